//! The coupon service: issuance, redemption, voiding and listing.

use std::sync::Arc;

use time::OffsetDateTime;

use crate::account::auth::{Sealed, TokenKey};
use crate::account::ports::PartnerDirectory;
use crate::coupon::ports::{CouponRepo, CouponWrite};
use crate::coupon::{
    BulkOrderRequest, Coupon, CouponAt, CouponCode, CouponFilter, CouponPage, CouponParts,
    ProductSlug, RedeemRefusal, Redemption, StoredStatus,
};
use crate::kernel::clock::Clock;
use crate::kernel::error::RepoError;
use crate::kernel::ids::{BulkOrderId, CouponId};
use crate::kernel::random::Random;
use crate::kernel::values::Email;

/// Errors of [`CouponService::issue`].
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    /// No partner has that `partnerId` (404).
    #[error("no partner with that partnerId")]
    UnknownPartner,
    /// The partner has no sub-account with that `subId` (400).
    #[error("subAccountId must be an existing sub-account of the partner")]
    UnknownSubAccount,
    /// `expiresAt` is not in the future (400).
    #[error("expiresAt must be in the future")]
    ExpiryPast,
    /// A coupon the request would mint breaks a rule of [`Coupon::new`].
    #[error(transparent)]
    Invalid(#[from] super::CouponError),
    /// The store failed.
    #[error(transparent)]
    Repo(#[from] RepoError),
}

/// Errors of [`CouponService::redeem`] and [`CouponService::void`].
#[derive(Debug, thiserror::Error)]
pub enum TransitionError {
    /// No coupon has that code or id (404).
    #[error("no such coupon")]
    NotFound,
    /// The coupon cannot make the transition (409 when not active, 400 on a mismatch).
    #[error(transparent)]
    Refused(RedeemRefusal),
    /// The store failed.
    #[error(transparent)]
    Repo(#[from] RepoError),
}

/// The issued bulk order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BulkOrder {
    /// The bulk order's id, shared by its coupons.
    pub bulk_order_id: BulkOrderId,
    /// The coupons issued, all active.
    pub coupons: Vec<Coupon>,
    /// When they were issued (their statuses are theirs at this instant).
    pub at: OffsetDateTime,
}

/// Coupon issuance, redemption, voiding and listing.
///
/// Built over its own store ([`CouponRepo`]), a [`PartnerDirectory`] (does the partner, and
/// the sub-account, exist), a [`Clock`] and a [`Random`]: with the `mocks` feature another
/// service tests its rules over `MockCouponRepo`, `MockPartnerDirectory`, a [`FixedClock`] and
/// a `SeededRandom`.
///
/// ```
/// # #[cfg(feature = "mocks")] {
/// use std::sync::Arc;
/// use futures_util::FutureExt;
/// use partner_domain::account::ports::MockPartnerDirectory;
/// use partner_domain::coupon::ports::{CouponWrite, MockCouponRepo};
/// use partner_domain::coupon::{BulkOrderRequest, CouponService, CouponStatus, ProductSlug};
/// use partner_domain::kernel::clock::FixedClock;
/// use partner_domain::kernel::random::SeededRandom;
/// use partner_domain::kernel::values::{Email, PartnerId};
/// use time::macros::datetime;
///
/// let now = datetime!(2026-11-23 12:00 UTC);
/// let mut directory = MockPartnerDirectory::new();
/// directory.expect_partner_exists().returning(|_| Ok(true));
/// let mut repo = MockCouponRepo::new();
/// repo.expect_insert_bulk().returning(|_| Ok(CouponWrite::Done));
/// let coupons = CouponService::new(
///     Arc::new(repo),
///     Arc::new(directory),
///     Arc::new(FixedClock::new(now)),
///     Arc::new(SeededRandom::new(7)),
/// );
/// let order = coupons
///     .issue(BulkOrderRequest {
///         partner_id: PartnerId::parse("acme").unwrap(),
///         sub_id: None,
///         product_slug: ProductSlug::Primary,
///         months: 12,
///         quantity: 3,
///         unit_price_cents: 9_900,
///         purchaser_email: Email::parse("hr@employer.test").unwrap(),
///         purchaser_source: "benefits".into(),
///         expires_at: None,
///         notes: None,
///     })
///     .now_or_never()
///     .expect("the mocks answer at once")
///     .unwrap();
/// assert_eq!(order.coupons.len(), 3);
/// assert!(order.coupons.iter().all(|c| c.status_at(now) == CouponStatus::Active));
/// # }
/// ```
///
/// [`FixedClock`]: crate::kernel::clock::FixedClock
#[derive(Debug, Clone)]
pub struct CouponService {
    repo: Arc<dyn CouponRepo>,
    directory: Arc<dyn PartnerDirectory>,
    clock: Arc<dyn Clock>,
    rng: Arc<dyn Random>,
}

impl CouponService {
    /// The service over its store, the partner directory, the clock and the randomness codes
    /// and ids are drawn from.
    pub fn new(
        repo: Arc<dyn CouponRepo>,
        directory: Arc<dyn PartnerDirectory>,
        clock: Arc<dyn Clock>,
        rng: Arc<dyn Random>,
    ) -> Self {
        Self {
            repo,
            directory,
            clock,
            rng,
        }
    }

    /// Issues `quantity` codes in one transaction. Codes are unique across the table; on the
    /// (astronomically rare) collision the whole order is retried with fresh codes.
    pub async fn issue(&self, req: BulkOrderRequest) -> Result<BulkOrder, IssueError> {
        let now = self.clock.now();
        if req.expires_at.is_some_and(|e| e <= now) {
            return Err(IssueError::ExpiryPast);
        }
        if !self.directory.partner_exists(&req.partner_id).await? {
            return Err(IssueError::UnknownPartner);
        }
        if let Some(s) = req.sub_id
            && !self
                .directory
                .sub_account_exists(&req.partner_id, s)
                .await?
        {
            return Err(IssueError::UnknownSubAccount);
        }
        let bulk_order_id = BulkOrderId::generate_at(self.rng.as_ref(), now);
        for _ in 0..3 {
            let coupons = self.mint(&req, bulk_order_id, now)?;
            if self.repo.insert_bulk(&coupons).await? == CouponWrite::Done {
                return Ok(BulkOrder {
                    bulk_order_id,
                    coupons,
                    at: now,
                });
            }
        }
        Err(RepoError::new("coupon codes collided three times").into())
    }

    fn mint(
        &self,
        req: &BulkOrderRequest,
        bulk_order_id: BulkOrderId,
        now: OffsetDateTime,
    ) -> Result<Vec<Coupon>, super::CouponError> {
        let mut codes = std::collections::HashSet::with_capacity(req.quantity as usize);
        let mut out = Vec::with_capacity(req.quantity as usize);
        while out.len() < req.quantity as usize {
            let code = CouponCode::mint(self.rng.as_ref());
            if !codes.insert(code.clone()) {
                continue;
            }
            out.push(Coupon::new(CouponParts {
                id: CouponId::generate_at(self.rng.as_ref(), now),
                code,
                partner_id: req.partner_id.clone(),
                sub_id: req.sub_id,
                product_slug: req.product_slug,
                months: req.months,
                status: StoredStatus::Active,
                expires_at: req.expires_at,
                redemption: None,
                bulk_order_id,
                purchaser_email: req.purchaser_email.to_string(),
                purchaser_source: req.purchaser_source.clone(),
                unit_price_cents: req.unit_price_cents,
                notes: req.notes.clone(),
                created_at: now,
            })?);
        }
        Ok(out)
    }

    /// Redeems a code: exactly one of any number of concurrent attempts succeeds.
    pub async fn redeem(
        &self,
        code: &CouponCode,
        slug: ProductSlug,
        months: u8,
        who: Redemption,
    ) -> Result<CouponAt, TransitionError> {
        let now = who.at;
        match self.repo.redeem(code, slug, months, &who).await? {
            Ok(coupon) => Ok(CouponAt { coupon, at: now }),
            Err(None) => Err(TransitionError::NotFound),
            Err(Some(c)) => Err(TransitionError::Refused(
                c.can_redeem(slug, months, now).err().unwrap_or(
                    // The update lost a race to a concurrent redemption or void.
                    RedeemRefusal::NotActive(c.status_at(now)),
                ),
            )),
        }
    }

    /// A redemption by `email` happening now.
    pub fn redemption(&self, email: &Email, provider_primary_external_id: String) -> Redemption {
        Redemption {
            at: self.clock.now(),
            email: email.to_string(),
            provider_primary_external_id,
        }
    }

    /// Voids the coupon with this id at the clock's instant: of concurrent attempts, exactly one
    /// succeeds.
    pub async fn void(&self, id: CouponId) -> Result<CouponAt, TransitionError> {
        let now = self.clock.now();
        match self.repo.void(id, now).await? {
            Ok(coupon) => Ok(CouponAt { coupon, at: now }),
            Err(None) => Err(TransitionError::NotFound),
            Err(Some(c)) => Err(TransitionError::Refused(
                c.can_void(now)
                    .err()
                    .unwrap_or(RedeemRefusal::NotActive(c.status_at(now))),
            )),
        }
    }

    /// The coupon with this code of the token's own partner (extensions §8.2: admin tokens
    /// too), as it stands at the clock's instant, read with the token's record in one round trip
    /// and sealed until authentication passes.
    pub async fn find_for_token(
        &self,
        key: TokenKey,
        code: &CouponCode,
    ) -> Result<Sealed<Option<CouponAt>>, RepoError> {
        let now = key.now;
        Ok(self
            .repo
            .find_for_token(key, code)
            .await?
            .map(|c| c.map(|coupon| CouponAt { coupon, at: now })))
    }

    /// A page of coupons matching `filter` at the clock's instant (effective statuses, newest
    /// first) and the count of all that match, for the partner [`crate::coupon::listing_scope`] gives the token
    /// of `key` (decided in the statement), read with the token's record in one round trip and sealed until
    /// authentication passes. The caller still decides the scope with [`crate::coupon::listing_scope`] for the
    /// authenticated principal (400/403) before answering with the page.
    pub async fn list_for_token(
        &self,
        key: TokenKey,
        filter: &CouponFilter,
    ) -> Result<Sealed<CouponPage>, RepoError> {
        let now = key.now;
        Ok(self
            .repo
            .list_for_token(key, filter)
            .await?
            .map(|(coupons, total)| CouponPage {
                items: coupons,
                total,
                at: now,
            }))
    }

    /// The clock's instant.
    pub fn now(&self) -> OffsetDateTime {
        self.clock.now()
    }
}

/// The service's rules over mocks of its ports and a fixed clock: what is refused before storage,
/// how issuance survives a code collision, and how a refused transition is explained.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::account::auth::Principal;
    use crate::account::ports::MockPartnerDirectory;
    use crate::coupon::ports::MockCouponRepo;
    use crate::coupon::{CouponStatus, listing_scope};
    use crate::kernel::clock::FixedClock;
    use crate::kernel::random::SystemRandom;
    use crate::kernel::values::{PartnerId, SubId};
    use futures_util::FutureExt;
    use time::macros::datetime;
    use uuid::Uuid;

    const NOW: OffsetDateTime = datetime!(2026-11-23 12:00 UTC);

    fn acme() -> PartnerId {
        PartnerId::parse("acme").expect("id")
    }

    struct Ports {
        repo: MockCouponRepo,
        directory: MockPartnerDirectory,
    }

    impl Ports {
        fn new() -> Self {
            Self {
                repo: MockCouponRepo::new(),
                directory: MockPartnerDirectory::new(),
            }
        }

        /// `acme` exists, with sub-account 7 only.
        fn acme() -> Self {
            let mut p = Self::new();
            p.directory
                .expect_partner_exists()
                .returning(|id| Ok(*id == acme()));
            p.directory
                .expect_sub_account_exists()
                .returning(|_, s| Ok(s == SubId::new(7).expect("7")));
            p
        }

        fn service(self) -> CouponService {
            CouponService::new(
                Arc::new(self.repo),
                Arc::new(self.directory),
                Arc::new(FixedClock::new(NOW)),
                Arc::new(SystemRandom::new()),
            )
        }
    }

    fn request(quantity: u32) -> BulkOrderRequest {
        BulkOrderRequest {
            partner_id: acme(),
            sub_id: SubId::new(7),
            product_slug: ProductSlug::Primary,
            months: 12,
            quantity,
            unit_price_cents: 9_900,
            purchaser_email: Email::parse("buyer@acme.test").expect("email"),
            purchaser_source: "portal".into(),
            expires_at: Some(NOW + time::Duration::days(30)),
            notes: None,
        }
    }

    fn issue(ports: Ports, req: BulkOrderRequest) -> Result<BulkOrder, IssueError> {
        ports.service().issue(req).now_or_never().expect("ready")
    }

    #[test]
    fn issuing_mints_distinct_active_codes_in_one_bulk_order() {
        let mut ports = Ports::acme();
        ports
            .repo
            .expect_insert_bulk()
            .withf(|coupons| {
                let codes: std::collections::HashSet<_> =
                    coupons.iter().map(Coupon::code).collect();
                coupons.len() == 25
                    && codes.len() == 25
                    && coupons.iter().all(|c| {
                        c.status_at(NOW) == CouponStatus::Active
                            && c.created_at() == NOW
                            && c.bulk_order_id() == coupons[0].bulk_order_id()
                            && *c.partner_id() == acme()
                    })
            })
            .times(1)
            .returning(|_| Ok(CouponWrite::Done));
        let order = issue(ports, request(25)).expect("issued");
        assert_eq!(order.coupons.len(), 25);
        assert!(
            order
                .coupons
                .iter()
                .all(|c| c.bulk_order_id == order.bulk_order_id)
        );
        assert!(
            order
                .coupons
                .iter()
                .all(|c| c.sub_id().map(|s| s.to_string()).as_deref() == Some("7"))
        );
    }

    #[test]
    fn a_code_collision_retries_the_whole_order_with_fresh_codes_three_times_at_most() {
        let first = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut ports = Ports::acme();
        let seen = first.clone();
        let mut calls = 0;
        ports
            .repo
            .expect_insert_bulk()
            .times(2)
            .returning(move |coupons| {
                calls += 1;
                let codes: Vec<CouponCode> = coupons.iter().map(|c| c.code().clone()).collect();
                let mut seen = seen.lock().expect("lock");
                if calls == 1 {
                    *seen = codes;
                    Ok(CouponWrite::CodeCollision)
                } else {
                    assert_ne!(*seen, codes, "fresh codes");
                    Ok(CouponWrite::Done)
                }
            });
        assert!(issue(ports, request(3)).is_ok());
        let mut ports = Ports::acme();
        ports
            .repo
            .expect_insert_bulk()
            .times(3)
            .returning(|_| Ok(CouponWrite::CodeCollision));
        assert!(matches!(issue(ports, request(3)), Err(IssueError::Repo(_))));
    }

    #[test]
    fn issuing_is_refused_before_storage_in_the_contracts_order() {
        // A past expiry: nothing is read.
        let mut ports = Ports::new();
        ports.directory.expect_partner_exists().never();
        ports.repo.expect_insert_bulk().never();
        let mut past = request(1);
        past.expires_at = Some(NOW);
        assert!(matches!(issue(ports, past), Err(IssueError::ExpiryPast)));
        // An unknown partner, then an unknown sub-account.
        let mut ports = Ports::acme();
        ports.repo.expect_insert_bulk().never();
        let mut other = request(1);
        other.partner_id = PartnerId::parse("beta").expect("id");
        assert!(matches!(
            issue(ports, other),
            Err(IssueError::UnknownPartner)
        ));
        let mut ports = Ports::acme();
        ports.repo.expect_insert_bulk().never();
        let mut sub = request(1);
        sub.sub_id = SubId::new(8);
        assert!(matches!(
            issue(ports, sub),
            Err(IssueError::UnknownSubAccount)
        ));
    }

    fn coupon(
        status: StoredStatus,
        slug: ProductSlug,
        expires_at: Option<OffsetDateTime>,
    ) -> Coupon {
        Coupon::new(CouponParts {
            id: CouponId::from_uuid(Uuid::nil()),
            code: CouponCode::normalize("ABCD-EFGH-1234").expect("code"),
            partner_id: acme(),
            sub_id: None,
            product_slug: slug,
            months: 12,
            status,
            expires_at,
            redemption: (status == StoredStatus::Redeemed).then(|| Redemption {
                at: NOW,
                email: "pat@x.co".into(),
                provider_primary_external_id: "ext-1".into(),
            }),
            bulk_order_id: BulkOrderId::from_uuid(Uuid::nil()),
            purchaser_email: "buyer@acme.test".into(),
            purchaser_source: "portal".into(),
            unit_price_cents: 9_900,
            notes: None,
            created_at: NOW,
        })
        .expect("a valid coupon")
    }

    fn redeem(result: Result<Coupon, Option<Coupon>>) -> Result<CouponAt, TransitionError> {
        let mut ports = Ports::new();
        ports
            .repo
            .expect_redeem()
            .withf(|code, slug, months, who| {
                code.as_str() == "ABCDEFGH1234"
                    && *slug == ProductSlug::Primary
                    && *months == 12
                    && who.at == NOW
            })
            .times(1)
            .return_once(move |_, _, _, _| Ok(result));
        let svc = ports.service();
        let who = svc.redemption(&Email::parse("pat@x.co").expect("email"), "ext-1".into());
        svc.redeem(
            &CouponCode::normalize("ABCDEFGH1234").expect("code"),
            ProductSlug::Primary,
            12,
            who,
        )
        .now_or_never()
        .expect("ready")
    }

    #[test]
    fn a_redemption_is_answered_from_the_one_conditional_write() {
        let row = redeem(Ok(coupon(
            StoredStatus::Redeemed,
            ProductSlug::Primary,
            None,
        )))
        .expect("redeemed");
        assert_eq!(row.status(), CouponStatus::Redeemed);
        assert_eq!(row.coupon.redemption().map(|r| r.at), Some(NOW));
        assert!(matches!(redeem(Err(None)), Err(TransitionError::NotFound)));
        // Refused: the coupon as it is explains why.
        let other = coupon(StoredStatus::Active, ProductSlug::PrimaryPlus, None);
        assert!(matches!(
            redeem(Err(Some(other))),
            Err(TransitionError::Refused(RedeemRefusal::Mismatch))
        ));
        let expired = coupon(StoredStatus::Active, ProductSlug::Primary, Some(NOW));
        assert!(matches!(
            redeem(Err(Some(expired))),
            Err(TransitionError::Refused(RedeemRefusal::NotActive(
                CouponStatus::Expired
            )))
        ));
        let void = coupon(StoredStatus::Void, ProductSlug::Primary, None);
        assert!(matches!(
            redeem(Err(Some(void))),
            Err(TransitionError::Refused(RedeemRefusal::NotActive(
                CouponStatus::Void
            )))
        ));
        // Redeemable as read, yet the write refused it: a concurrent transition won the race.
        let raced = coupon(StoredStatus::Active, ProductSlug::Primary, None);
        assert!(matches!(
            redeem(Err(Some(raced))),
            Err(TransitionError::Refused(RedeemRefusal::NotActive(
                CouponStatus::Active
            )))
        ));
    }

    #[test]
    fn voiding_is_answered_from_the_one_conditional_write_at_the_clocks_instant() {
        let void = |result: Result<Coupon, Option<Coupon>>| {
            let mut ports = Ports::new();
            ports
                .repo
                .expect_void()
                .withf(|id, now| *id == CouponId::from_uuid(Uuid::nil()) && *now == NOW)
                .times(1)
                .return_once(move |_, _| Ok(result));
            ports
                .service()
                .void(CouponId::from_uuid(Uuid::nil()))
                .now_or_never()
                .expect("ready")
        };
        let row = void(Ok(coupon(StoredStatus::Void, ProductSlug::Primary, None))).expect("void");
        assert_eq!(row.status(), CouponStatus::Void);
        assert!(matches!(void(Err(None)), Err(TransitionError::NotFound)));
        let redeemed = coupon(StoredStatus::Redeemed, ProductSlug::Primary, None);
        assert!(matches!(
            void(Err(Some(redeemed))),
            Err(TransitionError::Refused(RedeemRefusal::NotActive(
                CouponStatus::Redeemed
            )))
        ));
    }

    #[test]
    fn a_listing_for_a_token_renders_statuses_at_the_keys_instant() {
        let mut ports = Ports::new();
        ports
            .repo
            .expect_list_for_token()
            .withf(|key, filter| key.now == NOW && filter.limit == 10 && filter.requested.is_none())
            .times(1)
            .returning(|_, _| {
                Ok(Sealed::new(
                    None,
                    (
                        vec![coupon(
                            StoredStatus::Active,
                            ProductSlug::Primary,
                            Some(NOW),
                        )],
                        41,
                    ),
                ))
            });
        let key = TokenKey {
            hash: crate::account::token::TokenPepper::new(b"p").hash(
                &crate::account::token::TokenText::parse(&format!("pk_live_{}", "K".repeat(43)))
                    .expect("token"),
            ),
            now: NOW,
        };
        let filter = CouponFilter {
            requested: None,
            statuses: Vec::new(),
            product_slug: None,
            limit: 10,
            offset: 0,
        };
        let sealed = ports
            .service()
            .list_for_token(key, &filter)
            .now_or_never()
            .expect("ready")
            .expect("read");
        let page = sealed.into_content_for_test();
        assert_eq!(page.total, 41);
        assert_eq!(
            page.items[0].status_at(page.at),
            CouponStatus::Expired,
            "expired at the key's instant"
        );
        // The scope the statement applied is the one the service checks after authentication.
        let me = Principal::for_test(acme(), false);
        assert_eq!(listing_scope(&me, None), Ok(acme()));
    }
}
