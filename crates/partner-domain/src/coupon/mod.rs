//! Care Services bulk coupon codes: the code itself, product slugs, the state machine
//! (`active → redeemed`, `active → void`, and `expired` derived from `expiresAt`), listing scope,
//! and the service the operator and partners go through.

pub mod ports;

mod service;

pub use crate::kernel::ids::CouponId;
pub use service::{BulkOrder, CouponService, IssueError, TransitionError};

use serde::{Serialize, Serializer};
use time::OffsetDateTime;

use crate::account::auth::Principal;
use crate::kernel::ids::BulkOrderId;
use crate::kernel::random::{Random, random_string};
use crate::kernel::values::{CareService, Email, PartnerId, SubId, ValueError};

const CODE_ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
/// Codes per bulk order at most.
pub const MAX_QUANTITY: u32 = 10_000;

/// A coupon code: 12 of `A-Z 0-9`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CouponCode(String);

impl CouponCode {
    /// A new code from a CSPRNG (36^12, about 62 bits).
    pub fn mint(rng: &dyn Random) -> Self {
        Self(random_string(rng, CODE_ALPHABET, 12))
    }

    /// [`CouponCode::normalize`] of a request field: `{field} must be 12 characters …` otherwise.
    pub fn normalize_field(input: &str, field: &'static str) -> Result<Self, ValueError> {
        Self::normalize(input).ok_or(ValueError::expected(
            field,
            "12 characters A-Z and 0-9 (spaces and hyphens are ignored)",
        ))
    }

    /// [`CouponCode::normalize`] of the `{code}` path segment: `code must be a coupon code (12
    /// letters and digits)` otherwise (the wording the path has always answered).
    pub fn normalize_path(input: &str) -> Result<Self, ValueError> {
        Self::normalize(input).ok_or(ValueError::expected(
            "code",
            "a coupon code (12 letters and digits)",
        ))
    }

    /// A code as a patient typed it: trimmed, upper-cased, spaces and hyphens removed.
    pub fn normalize(input: &str) -> Option<Self> {
        let s: String = input
            .trim()
            .chars()
            .filter(|c| *c != ' ' && *c != '-')
            .collect::<String>()
            .to_ascii_uppercase();
        (s.len() == 12
            && s.bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit()))
        .then_some(Self(s))
    }

    /// The code's 12 characters.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Serialize for CouponCode {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

/// The Care Services products a coupon can be for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProductSlug {
    /// `urgent-care`.
    UrgentCare,
    /// `urgent-plus`.
    UrgentPlus,
    /// `primary`.
    Primary,
    /// `primary-plus`.
    PrimaryPlus,
    /// `vet-care`.
    VetCare,
    /// `behavior`.
    Behavior,
    /// `primary-family-plan`.
    PrimaryFamilyPlan,
    /// `primary-family-plan-and-discount-program`.
    PrimaryFamilyPlanAndDiscountProgram,
}

impl ProductSlug {
    /// Every product, in the contract's order.
    pub const ALL: [ProductSlug; 8] = [
        Self::UrgentCare,
        Self::UrgentPlus,
        Self::Primary,
        Self::PrimaryPlus,
        Self::VetCare,
        Self::Behavior,
        Self::PrimaryFamilyPlan,
        Self::PrimaryFamilyPlanAndDiscountProgram,
    ];

    /// The product with this slug, exactly.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == s)
    }

    /// [`ProductSlug::parse`] of a request field: `{field} must be one of …` otherwise.
    pub fn parse_field(s: &str, field: &'static str) -> Result<Self, ValueError> {
        Self::parse(s).ok_or(ValueError::expected(
            field,
            "one of urgent-care, urgent-plus, primary, primary-plus, vet-care, behavior, \
             primary-family-plan, primary-family-plan-and-discount-program",
        ))
    }

    /// The slug on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::UrgentCare => "urgent-care",
            Self::UrgentPlus => "urgent-plus",
            Self::Primary => "primary",
            Self::PrimaryPlus => "primary-plus",
            Self::VetCare => "vet-care",
            Self::Behavior => "behavior",
            Self::PrimaryFamilyPlan => "primary-family-plan",
            Self::PrimaryFamilyPlanAndDiscountProgram => "primary-family-plan-and-discount-program",
        }
    }

    /// The Care Services category the product belongs to (the household plans are primary care).
    pub fn service(self) -> CareService {
        match self {
            Self::UrgentCare | Self::UrgentPlus => CareService::UrgentCare,
            Self::Primary
            | Self::PrimaryPlus
            | Self::PrimaryFamilyPlan
            | Self::PrimaryFamilyPlanAndDiscountProgram => CareService::PrimaryCare,
            Self::VetCare => CareService::VeterinaryCare,
            Self::Behavior => CareService::MentalHealth,
        }
    }
}

impl Serialize for ProductSlug {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// A bulk order's `quantity`: 1 to [`MAX_QUANTITY`], or
/// `quantity must be an integer from 1 to 10000`.
pub fn parse_quantity(n: i64) -> Result<u32, ValueError> {
    u32::try_from(n)
        .ok()
        .filter(|q| (1..=MAX_QUANTITY).contains(q))
        .ok_or(ValueError::expected(
            "quantity",
            "an integer from 1 to 10000",
        ))
}

/// A coupon's `months`: 1, 3, 6 or 12 ([`COUPON_MONTHS`]), or `months is invalid: must be 1, 3, 6
/// or 12`.
pub fn parse_months(n: i64) -> Result<u8, ValueError> {
    match n {
        1 | 3 | 6 | 12 => Ok(n as u8),
        _ => Err(ValueError::invalid("months", "must be 1, 3, 6 or 12")),
    }
}

/// What partners see. `Expired` is never stored: it is an `active` coupon past `expiresAt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CouponStatus {
    /// Can be redeemed or voided.
    Active,
    /// Redeemed (it has a [`Redemption`]).
    Redeemed,
    /// Voided by the operator.
    Void,
    /// Active, but past its `expiresAt` (never stored).
    Expired,
}

impl CouponStatus {
    /// Every status, in the contract's order.
    pub const ALL: [CouponStatus; 4] = [Self::Active, Self::Redeemed, Self::Void, Self::Expired];

    /// The status with this name, exactly.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Redeemed => "redeemed",
            Self::Void => "void",
            Self::Expired => "expired",
        }
    }

    /// `active,redeemed`: a comma-separated subset (duplicates ignored).
    pub fn parse_list(s: &str) -> Result<Vec<Self>, ValueError> {
        let mut out = Vec::new();
        for part in s.split(',') {
            let st = Self::parse(part.trim()).ok_or(ValueError::invalid(
                "status",
                "a comma-separated subset of active,redeemed,void,expired",
            ))?;
            if !out.contains(&st) {
                out.push(st);
            }
        }
        Ok(out)
    }
}

impl Serialize for CouponStatus {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// The states a coupon is stored in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoredStatus {
    /// Can be redeemed or voided (or has expired: [`Coupon::status_at`] says).
    Active,
    /// Redeemed.
    Redeemed,
    /// Voided.
    Void,
}

impl StoredStatus {
    /// The stored status with this name, exactly.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "active" => Some(Self::Active),
            "redeemed" => Some(Self::Redeemed),
            "void" => Some(Self::Void),
            _ => None,
        }
    }

    /// The name in storage.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Redeemed => "redeemed",
            Self::Void => "void",
        }
    }
}

/// Who redeemed a coupon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redemption {
    /// When it was redeemed.
    pub at: OffsetDateTime,
    /// The patient's e-mail.
    pub email: String,
    /// The patient's id at the care provider.
    pub provider_primary_external_id: String,
}

/// A stored coupon, or one [`CouponService`] has just minted. Built by [`Coupon::new`] from
/// [`CouponParts`]; its state changes only in the store, by one conditional statement each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coupon {
    id: CouponId,
    code: CouponCode,
    partner_id: PartnerId,
    sub_id: Option<SubId>,
    product_slug: ProductSlug,
    months: u8,
    status: StoredStatus,
    expires_at: Option<OffsetDateTime>,
    redemption: Option<Redemption>,
    bulk_order_id: BulkOrderId,
    purchaser_email: String,
    purchaser_source: String,
    unit_price_cents: i64,
    notes: Option<String>,
    created_at: OffsetDateTime,
}

/// A stored coupon's fields, for [`Coupon::new`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CouponParts {
    /// The coupon's id.
    pub id: CouponId,
    /// Its code.
    pub code: CouponCode,
    /// The partner it was issued for.
    pub partner_id: PartnerId,
    /// The sub-account it was issued for, if any.
    pub sub_id: Option<SubId>,
    /// The product it is locked to.
    pub product_slug: ProductSlug,
    /// The duration it is locked to: 1, 3, 6 or 12 months.
    pub months: u8,
    /// The stored status.
    pub status: StoredStatus,
    /// When it expires, if ever.
    pub expires_at: Option<OffsetDateTime>,
    /// Present exactly when `status` is `Redeemed` (a CHECK constraint of the table).
    pub redemption: Option<Redemption>,
    /// The bulk order it was issued in.
    pub bulk_order_id: BulkOrderId,
    /// Who bought it (an e-mail address).
    pub purchaser_email: String,
    /// Where the purchase came from.
    pub purchaser_source: String,
    /// The price of one code, in cents (not negative).
    pub unit_price_cents: i64,
    /// The operator's notes.
    pub notes: Option<String>,
    /// When it was issued.
    pub created_at: OffsetDateTime,
}

/// Why [`Coupon::new`] refuses its parts: a state the contract rules out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CouponError {
    /// Months other than 1, 3, 6 or 12.
    #[error("months must be 1, 3, 6 or 12")]
    Months,
    /// A redemption without the `redeemed` status, or the reverse.
    #[error("a coupon has a redemption exactly when it is redeemed")]
    Redemption,
    /// A negative unit price.
    #[error("the unit price must not be negative")]
    NegativePrice,
    /// A purchaser e-mail that is not an e-mail address.
    #[error("the purchaser e-mail is not an e-mail address")]
    PurchaserEmail,
}

/// The membership durations a coupon can be for.
pub const COUPON_MONTHS: [u8; 4] = [1, 3, 6, 12];

/// Why a coupon cannot be redeemed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RedeemRefusal {
    /// Redeemed, void or expired (409).
    #[error("the coupon is {}, not active", .0.as_str())]
    NotActive(CouponStatus),
    /// The request names another product or duration than the coupon is locked to (400).
    #[error("the coupon is for another productSlug or months")]
    Mismatch,
}

impl Coupon {
    /// A coupon as stored or minted; refuses a state the contract rules out ([`CouponError`]):
    /// months other than 1, 3, 6 or 12, a redemption without the `redeemed` status or the
    /// reverse, a negative price, a purchaser e-mail that is not one.
    ///
    /// ```
    /// use partner_domain::coupon::{
    ///     Coupon, CouponCode, CouponError, CouponId, CouponParts, CouponStatus, ProductSlug,
    ///     RedeemRefusal, StoredStatus,
    /// };
    /// use partner_domain::kernel::ids::BulkOrderId;
    /// use partner_domain::kernel::values::PartnerId;
    /// use time::macros::datetime;
    ///
    /// let now = datetime!(2026-11-23 12:00 UTC);
    /// let parts = CouponParts {
    ///     id: CouponId::from_uuid(uuid::Uuid::nil()),
    ///     code: CouponCode::normalize("abcd-efgh-1234").expect("a code"),
    ///     partner_id: PartnerId::parse("acme")?,
    ///     sub_id: None,
    ///     product_slug: ProductSlug::Primary,
    ///     months: 12,
    ///     status: StoredStatus::Active,
    ///     expires_at: Some(datetime!(2027-01-01 0:00 UTC)),
    ///     redemption: None,
    ///     bulk_order_id: BulkOrderId::from_uuid(uuid::Uuid::nil()),
    ///     purchaser_email: "hr@employer.test".into(),
    ///     purchaser_source: "benefits".into(),
    ///     unit_price_cents: 9_900,
    ///     notes: None,
    ///     created_at: now,
    /// };
    /// let coupon = Coupon::new(parts.clone())?;
    /// assert_eq!(coupon.can_redeem(ProductSlug::Primary, 12, now), Ok(()));
    /// assert_eq!(
    ///     coupon.can_redeem(ProductSlug::Primary, 6, now),
    ///     Err(RedeemRefusal::Mismatch)
    /// );
    /// assert_eq!(
    ///     coupon.status_at(datetime!(2027-01-01 0:00 UTC)),
    ///     CouponStatus::Expired
    /// );
    /// // No coupon for 7 months.
    /// assert_eq!(
    ///     Coupon::new(CouponParts { months: 7, ..parts }),
    ///     Err(CouponError::Months)
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(parts: CouponParts) -> Result<Self, CouponError> {
        if !COUPON_MONTHS.contains(&parts.months) {
            return Err(CouponError::Months);
        }
        if (parts.status == StoredStatus::Redeemed) != parts.redemption.is_some() {
            return Err(CouponError::Redemption);
        }
        if parts.unit_price_cents < 0 {
            return Err(CouponError::NegativePrice);
        }
        if crate::kernel::values::Email::parse(&parts.purchaser_email).is_err() {
            return Err(CouponError::PurchaserEmail);
        }
        let CouponParts {
            id,
            code,
            partner_id,
            sub_id,
            product_slug,
            months,
            status,
            expires_at,
            redemption,
            bulk_order_id,
            purchaser_email,
            purchaser_source,
            unit_price_cents,
            notes,
            created_at,
        } = parts;
        Ok(Self {
            id,
            code,
            partner_id,
            sub_id,
            product_slug,
            months,
            status,
            expires_at,
            redemption,
            bulk_order_id,
            purchaser_email,
            purchaser_source,
            unit_price_cents,
            notes,
            created_at,
        })
    }

    /// The coupon's id.
    #[must_use]
    pub fn id(&self) -> CouponId {
        self.id
    }

    /// Its code.
    #[must_use]
    pub fn code(&self) -> &CouponCode {
        &self.code
    }

    /// The partner it was issued for.
    #[must_use]
    pub fn partner_id(&self) -> &PartnerId {
        &self.partner_id
    }

    /// The sub-account it was issued for, if any.
    #[must_use]
    pub fn sub_id(&self) -> Option<SubId> {
        self.sub_id
    }

    /// The product it is locked to.
    #[must_use]
    pub fn product_slug(&self) -> ProductSlug {
        self.product_slug
    }

    /// The duration it is locked to, in months.
    #[must_use]
    pub fn months(&self) -> u8 {
        self.months
    }

    /// When it expires, if ever.
    #[must_use]
    pub fn expires_at(&self) -> Option<OffsetDateTime> {
        self.expires_at
    }

    /// The bulk order it was issued in.
    #[must_use]
    pub fn bulk_order_id(&self) -> BulkOrderId {
        self.bulk_order_id
    }

    /// Who bought it.
    #[must_use]
    pub fn purchaser_email(&self) -> &str {
        &self.purchaser_email
    }

    /// Where the purchase came from.
    #[must_use]
    pub fn purchaser_source(&self) -> &str {
        &self.purchaser_source
    }

    /// The price of one code, in cents.
    #[must_use]
    pub fn unit_price_cents(&self) -> i64 {
        self.unit_price_cents
    }

    /// The operator's notes.
    #[must_use]
    pub fn notes(&self) -> Option<&str> {
        self.notes.as_deref()
    }

    /// When it was issued.
    #[must_use]
    pub fn created_at(&self) -> OffsetDateTime {
        self.created_at
    }

    /// `expired` when active and past `expiresAt`; else the stored status.
    pub fn status_at(&self, now: OffsetDateTime) -> CouponStatus {
        match self.status {
            StoredStatus::Active if self.expires_at.is_some_and(|e| e <= now) => {
                CouponStatus::Expired
            }
            StoredStatus::Active => CouponStatus::Active,
            StoredStatus::Redeemed => CouponStatus::Redeemed,
            StoredStatus::Void => CouponStatus::Void,
        }
    }

    /// The `active → redeemed` transition's condition: active now, for that product and
    /// duration. (Storage applies it in one conditional update; this explains a refusal.)
    pub fn can_redeem(
        &self,
        slug: ProductSlug,
        months: u8,
        now: OffsetDateTime,
    ) -> Result<(), RedeemRefusal> {
        match self.status_at(now) {
            CouponStatus::Active if self.product_slug == slug && self.months == months => Ok(()),
            CouponStatus::Active => Err(RedeemRefusal::Mismatch),
            other => Err(RedeemRefusal::NotActive(other)),
        }
    }

    /// The `active → void` transition's condition (an expired coupon is not active).
    pub fn can_void(&self, now: OffsetDateTime) -> Result<(), RedeemRefusal> {
        match self.status_at(now) {
            CouponStatus::Active => Ok(()),
            other => Err(RedeemRefusal::NotActive(other)),
        }
    }

    /// Who redeemed it and when, once redeemed.
    #[must_use]
    pub fn redemption(&self) -> Option<&Redemption> {
        self.redemption.as_ref()
    }
}

/// Whose coupons a listing shows: the caller's partner by default; an admin may name any
/// partner; a non-admin naming another partner is refused.
pub fn listing_scope(caller: &Principal, requested: Option<&str>) -> Result<PartnerId, ScopeError> {
    match requested {
        None => Ok(caller.partner_id().clone()),
        Some(raw) => {
            let p = PartnerId::parse(raw).map_err(|_| ScopeError::Malformed)?;
            if caller.admin() || p == *caller.partner_id() {
                Ok(p)
            } else {
                Err(ScopeError::Forbidden)
            }
        }
    }
}

/// Errors of [`listing_scope`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    /// The requested `partner_id` is not a partnerId (400).
    #[error("partner_id is malformed")]
    Malformed,
    /// A non-admin token named another partner (403).
    #[error("only admin tokens may list another partner's coupons")]
    Forbidden,
}

/// A listing request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CouponQuery {
    /// Whose coupons.
    pub partner: PartnerId,
    /// Empty: every status.
    pub statuses: Vec<CouponStatus>,
    /// Only coupons for this product, if set.
    pub product_slug: Option<ProductSlug>,
    /// At most this many.
    pub limit: u16,
    /// After skipping this many.
    pub offset: u64,
}

/// A listing request read for a token, whose partner is decided in the statement by the rule of
/// [`listing_scope`] (the token's partner, or `requested` when the token is an admin's or names
/// its own partner).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CouponFilter {
    /// The partner named by `partner_id`, if any.
    pub requested: Option<PartnerId>,
    /// Empty: every status.
    pub statuses: Vec<CouponStatus>,
    /// Only coupons for this product, if set.
    pub product_slug: Option<ProductSlug>,
    /// At most this many.
    pub limit: u16,
    /// After skipping this many.
    pub offset: u64,
}

/// One page of a listing, with the count of all matching coupons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CouponPage {
    /// The page's coupons.
    pub items: Vec<Coupon>,
    /// How many coupons match in all.
    pub total: u64,
    /// The instant the page was read at: the coupons' statuses are theirs at this instant.
    pub at: OffsetDateTime,
}

/// A coupon as it stands at an instant: its status depends on the time (an active coupon past
/// its expiry is expired).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CouponAt {
    /// The coupon.
    pub coupon: Coupon,
    /// The instant its status is read at.
    pub at: OffsetDateTime,
}

impl CouponAt {
    /// The coupon's status at [`Self::at`].
    #[must_use]
    pub fn status(&self) -> CouponStatus {
        self.coupon.status_at(self.at)
    }
}

/// A bulk order as the operator places it, already parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BulkOrderRequest {
    /// The partner the codes are for.
    pub partner_id: PartnerId,
    /// The sub-account they are for, if any.
    pub sub_id: Option<SubId>,
    /// The product they are locked to.
    pub product_slug: ProductSlug,
    /// The duration they are locked to (1, 3, 6 or 12).
    pub months: u8,
    /// How many codes (1 to [`MAX_QUANTITY`]).
    pub quantity: u32,
    /// The price of one code, in cents (not negative).
    pub unit_price_cents: i64,
    /// Who bought them.
    pub purchaser_email: Email,
    /// Where the purchase came from.
    pub purchaser_source: String,
    /// When they expire, if ever (in the future).
    pub expires_at: Option<OffsetDateTime>,
    /// The operator's notes.
    pub notes: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::random::SystemRandom;
    use time::macros::datetime;
    use uuid::Uuid;

    const NOW: OffsetDateTime = datetime!(2026-11-21 10:00 UTC);

    fn parts() -> CouponParts {
        CouponParts {
            id: CouponId::from_uuid(Uuid::nil()),
            code: CouponCode::normalize("ABCD-EFGH-1234").expect("code"),
            partner_id: PartnerId::parse("acme").expect("partner"),
            sub_id: None,
            product_slug: ProductSlug::Primary,
            months: 12,
            status: StoredStatus::Active,
            expires_at: None,
            redemption: None,
            bulk_order_id: BulkOrderId::from_uuid(Uuid::nil()),
            purchaser_email: "buyer@acme.test".into(),
            purchaser_source: "portal".into(),
            unit_price_cents: 9_900,
            notes: None,
            created_at: NOW,
        }
    }

    /// Issue 21: `Coupon::new` took months 7, a redeemed coupon without its redemption, a negative
    /// price and a purchaser that is no e-mail, and then said `can_redeem(…, 7, …)` was `Ok`.
    #[test]
    fn coupon_new_refuses_the_states_the_contract_rules_out() {
        assert!(Coupon::new(parts()).is_ok());
        type Break = fn(&mut CouponParts);
        let cases: [(Break, CouponError); 5] = [
            (|p| p.months = 7, CouponError::Months),
            (
                |p| p.status = StoredStatus::Redeemed,
                CouponError::Redemption,
            ),
            (
                |p| {
                    p.redemption = Some(Redemption {
                        at: NOW,
                        email: "pat@x.co".into(),
                        provider_primary_external_id: "ext".into(),
                    })
                },
                CouponError::Redemption,
            ),
            (|p| p.unit_price_cents = -1, CouponError::NegativePrice),
            (
                |p| p.purchaser_email = "not an email".into(),
                CouponError::PurchaserEmail,
            ),
        ];
        for (break_it, error) in cases {
            let mut p = parts();
            break_it(&mut p);
            assert_eq!(Coupon::new(p), Err(error));
        }
    }

    fn coupon(status: StoredStatus, expires_at: Option<OffsetDateTime>) -> Coupon {
        Coupon {
            id: CouponId::from_uuid(Uuid::nil()),
            code: CouponCode::normalize("ABCD-EFGH-1234").expect("code"),
            partner_id: PartnerId::parse("acme").expect("id"),
            sub_id: None,
            product_slug: ProductSlug::Primary,
            months: 12,
            status,
            expires_at,
            redemption: None,
            bulk_order_id: BulkOrderId::from_uuid(Uuid::nil()),
            purchaser_email: "buyer@acme.test".into(),
            purchaser_source: "portal".into(),
            unit_price_cents: 9900,
            notes: None,
            created_at: NOW,
        }
    }

    #[test]
    fn codes_are_minted_from_the_alphabet_and_normalized_on_input() {
        let rng = SystemRandom::new();
        let c = CouponCode::mint(&rng);
        assert_eq!(c.as_str().len(), 12);
        assert!(
            c.as_str()
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
        );
        assert_eq!(CouponCode::normalize(c.as_str()), Some(c));
        assert_eq!(
            CouponCode::normalize("  abcd-efgh 1234 ").map(|c| c.0),
            Some("ABCDEFGH1234".into())
        );
        for bad in [
            "",
            "ABCDEFGH123",
            "ABCDEFGH12345",
            "ABCDEFGH123!",
            "ÄBCDEFGH1234",
            "ABCD_EFGH_12",
        ] {
            assert!(CouponCode::normalize(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn slugs_map_to_services() {
        assert_eq!(
            ProductSlug::PrimaryFamilyPlan.service(),
            CareService::PrimaryCare
        );
        assert_eq!(
            ProductSlug::PrimaryFamilyPlanAndDiscountProgram.service(),
            CareService::PrimaryCare
        );
        assert_eq!(ProductSlug::Behavior.service(), CareService::MentalHealth);
        assert_eq!(ProductSlug::VetCare.service(), CareService::VeterinaryCare);
        assert_eq!(ProductSlug::UrgentPlus.service(), CareService::UrgentCare);
        for p in ProductSlug::ALL {
            assert_eq!(ProductSlug::parse(p.as_str()), Some(p));
        }
        assert_eq!(ProductSlug::parse("primary-care"), None);
    }

    #[test]
    fn state_machine() {
        let active = coupon(StoredStatus::Active, Some(NOW + time::Duration::DAY));
        assert_eq!(active.status_at(NOW), CouponStatus::Active);
        assert_eq!(active.can_redeem(ProductSlug::Primary, 12, NOW), Ok(()));
        assert_eq!(
            active.can_redeem(ProductSlug::PrimaryPlus, 12, NOW),
            Err(RedeemRefusal::Mismatch)
        );
        assert_eq!(
            active.can_redeem(ProductSlug::Primary, 6, NOW),
            Err(RedeemRefusal::Mismatch)
        );
        assert_eq!(active.can_void(NOW), Ok(()));
        // Derived expiry: reads as expired, can be neither redeemed nor voided.
        let later = NOW + time::Duration::DAY;
        assert_eq!(active.status_at(later), CouponStatus::Expired);
        assert_eq!(
            active.can_redeem(ProductSlug::Primary, 12, later),
            Err(RedeemRefusal::NotActive(CouponStatus::Expired))
        );
        assert_eq!(
            active.can_void(later),
            Err(RedeemRefusal::NotActive(CouponStatus::Expired))
        );
        for (s, st) in [
            (StoredStatus::Redeemed, CouponStatus::Redeemed),
            (StoredStatus::Void, CouponStatus::Void),
        ] {
            let c = coupon(s, None);
            assert_eq!(
                c.can_redeem(ProductSlug::Primary, 12, NOW),
                Err(RedeemRefusal::NotActive(st))
            );
            assert_eq!(c.can_void(NOW), Err(RedeemRefusal::NotActive(st)));
        }
        assert_eq!(
            coupon(StoredStatus::Active, None).status_at(later),
            CouponStatus::Active,
            "no expiry"
        );
    }

    #[test]
    fn status_lists_and_months() {
        assert_eq!(
            CouponStatus::parse_list("active,expired,active"),
            Ok(vec![CouponStatus::Active, CouponStatus::Expired])
        );
        assert!(CouponStatus::parse_list("active,used").is_err());
        assert!(CouponStatus::parse_list("").is_err());
        assert!(parse_months(12).is_ok() && parse_months(2).is_err() && parse_months(0).is_err());
    }

    #[test]
    fn listing_scope_rules() {
        let me = |admin| Principal::for_test(PartnerId::parse("acme").expect("id"), admin);
        assert_eq!(
            listing_scope(&me(false), None).map(|p| p.to_string()),
            Ok("acme".into())
        );
        assert_eq!(
            listing_scope(&me(false), Some("acme")).map(|p| p.to_string()),
            Ok("acme".into())
        );
        assert_eq!(
            listing_scope(&me(false), Some("beta")),
            Err(ScopeError::Forbidden)
        );
        assert_eq!(
            listing_scope(&me(true), Some("beta")).map(|p| p.to_string()),
            Ok("beta".into())
        );
        assert_eq!(
            listing_scope(&me(true), Some("a b")),
            Err(ScopeError::Malformed)
        );
        assert_eq!(
            listing_scope(&me(false), Some("")),
            Err(ScopeError::Malformed)
        );
    }

    #[test]
    fn row_renders_derived_status_and_redemption() {
        let mut c = coupon(StoredStatus::Redeemed, None);
        c.redemption = Some(Redemption {
            at: NOW,
            email: "pat@x.co".into(),
            provider_primary_external_id: "ext-1".into(),
        });
        let at = CouponAt { coupon: c, at: NOW };
        assert_eq!(at.status(), CouponStatus::Redeemed);
        let r = at.coupon.redemption().expect("redeemed");
        assert_eq!(
            (r.at, r.provider_primary_external_id.as_str()),
            (NOW, "ext-1")
        );
        assert_eq!(at.coupon.code().as_str(), "ABCDEFGH1234");
        assert_eq!(at.coupon.sub_id(), None);
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        /// A code as a patient might type it: any case, with spaces and hyphens anywhere and
        /// whitespace around.
        fn typed() -> impl Strategy<Value = (String, String)> {
            ("[A-Z0-9]{12}", any::<u64>(), "[ \t\n]{0,3}", "[ \t\n]{0,3}").prop_map(
                |(code, noise, before, after)| {
                    let mut typed = before;
                    for (i, c) in code.chars().enumerate() {
                        let bits = noise >> (i * 4);
                        match bits & 3 {
                            1 => typed.push(' '),
                            2 => typed.push('-'),
                            _ => {}
                        }
                        typed.push(if bits & 4 == 0 {
                            c
                        } else {
                            c.to_ascii_lowercase()
                        });
                    }
                    typed.push_str(&after);
                    (typed, code)
                },
            )
        }

        proptest! {
            /// Any text: no panic; a result is always 12 of A-Z 0-9, is a fixed point, and came
            /// from text of only letters, digits, spaces and hyphens (after trimming).
            #[test]
            fn normalize_is_total_and_strict(s in prop_oneof![
                any::<String>(),
                "[A-Za-z0-9 \\-]{10,16}",
                "[A-Za-z0-9 \\-_.!ÄßⅫ]{12,14}",
            ]) {
                if let Some(c) = CouponCode::normalize(&s) {
                    prop_assert_eq!(c.as_str().len(), 12);
                    prop_assert!(c.as_str().bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit()));
                    prop_assert_eq!(CouponCode::normalize(c.as_str()), Some(c.clone()));
                    prop_assert!(
                        s.trim().chars().all(|ch| ch.is_ascii_alphanumeric() || ch == ' ' || ch == '-'),
                        "{:?}", s
                    );
                }
            }

            #[test]
            fn typed_codes_normalize_to_the_code((typed, code) in typed()) {
                prop_assert_eq!(CouponCode::normalize(&typed).map(|c| c.0), Some(code));
            }

        }
    }
}
