//! The ports: what the domain needs from storage. Adapters (PostgreSQL) implement them;
//! with the `mocks` feature each has a `mockall` mock for unit tests.
//!
//! Every method that reads or writes partner data takes the caller's [`PartnerId`], so a
//! repository cannot be asked for another tenant's rows by mistake.

use async_trait::async_trait;
use time::OffsetDateTime;

use std::collections::{BTreeMap, HashMap};

use crate::account::auth::{Sealed, TokenKey};
use crate::account::token::TokenHash;
use crate::account::{ApiTokenInfo, CareFlags, Partner, PartnerSettings, PortalUser};
use crate::catalog::{CareProduct, DnaProduct, MedicalProduct, Stored};
use crate::coupon::{Coupon, CouponCode, CouponFilter, CouponQuery, ProductSlug, Redemption};
use crate::events::DomainEvent;
use crate::events::{Subject, SubjectKind};
use crate::kernel::cursor::Position;
use crate::kernel::error::RepoError;
use crate::kernel::ids::{
    CouponId, DeliveryId, EndpointId, LeadId, PayoutId, ProductId, SubAccountId, TokenId, UserId,
};
use crate::kernel::values::Money;
use crate::kernel::values::{CareService, Nickname, PartnerId, SubId};
use crate::lead::Lead;
use crate::links::{CareLinkInputs, DnaLinkInputs, MedicalLinkInputs};
use crate::order::{AnalyticsEvent, Order, OrderKey, OrderListing};
use crate::payout::{NewPayout, Payout, PayoutKey};
use crate::sub_account::SubAccount;
use crate::webhook::{
    AttemptOutcome, ClaimRequest, ClaimedDelivery, DeliveryDetail, DeliveryFilter, DeliveryInfo,
    WebhookEndpoint,
};

/// What the authentication step needs to know about a presented token, in one lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRecord {
    pub token_id: TokenId,
    pub hash: TokenHash,
    pub user_id: UserId,
    pub user_deleted: bool,
    pub partner_id: PartnerId,
    pub partner_active: bool,
    /// Whether the partner may use the DNA links endpoint.
    pub partner_dna_access: bool,
    pub admin: bool,
    pub expires_at: Option<OffsetDateTime>,
    pub revoked_at: Option<OffsetDateTime>,
    pub last_used_at: Option<OffsetDateTime>,
}

/// Token lookups on the request path.
///
/// Contract: `find_by_hash` MUST read the token, its user and its partner as they are now (no
/// cache), so a revocation, a deleted user or a deactivated partner acts on the very next request
/// of every instance; it MUST match by the exact keyed hash (the column is unique).
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait TokenRepo: Send + Sync {
    /// The token with this keyed hash, with its user and partner (one indexed lookup).
    async fn find_by_hash(&self, hash: &TokenHash) -> Result<Option<TokenRecord>, RepoError>;

    /// Records a use at `now` unless one was recorded less than a minute before it
    /// (a conditional update, so concurrent instances write at most once a minute).
    async fn touch_last_used(
        &self,
        token_id: TokenId,
        now: OffsetDateTime,
    ) -> Result<(), RepoError>;
}

/// A token about to be stored: its keyed hash, never its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewToken {
    pub id: TokenId,
    pub hash: TokenHash,
    pub prefix: String,
    pub created_at: OffsetDateTime,
    pub expires_at: Option<OffsetDateTime>,
}

/// How a rotation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RotateOutcome {
    /// The old token is revoked and the new one stored with the old one's expiry.
    Rotated {
        expires_at: Option<OffsetDateTime>,
    },
    NotFound,
    /// The old token is revoked, expired, or its user is deleted.
    NotLive,
}

/// Operator-side storage of partners, users, tokens and feature flags.
///
/// Contract: tokens are stored as keyed hashes only (never their text); every method that says
/// "no such (undeleted) user" MUST treat a soft-deleted user as absent; `rotate_token` MUST
/// revoke the old token and store the new one in one transaction (both or neither).
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait AccountRepo: Send + Sync {
    /// Inserts or replaces the partner; `true` in the pair when it was inserted.
    async fn upsert_partner(
        &self,
        id: &PartnerId,
        settings: &PartnerSettings,
        now: OffsetDateTime,
    ) -> Result<(Partner, bool), RepoError>;
    /// The partner as stored now; `None` when unknown.
    async fn partner(&self, id: &PartnerId) -> Result<Option<Partner>, RepoError>;
    /// The five global Care Services switches (a missing row reads as enabled).
    async fn care_flags(&self) -> Result<CareFlags, RepoError>;
    /// Sets the named switches, leaves the others, and returns all five as they are after it.
    async fn set_care_flags(&self, changes: &[(CareService, bool)])
    -> Result<CareFlags, RepoError>;
    /// The partner's undeleted users, oldest first.
    async fn users_of(&self, partner: &PartnerId) -> Result<Vec<PortalUser>, RepoError>;
    /// `false` when the user's partner does not exist.
    async fn insert_user(&self, user: &PortalUser) -> Result<bool, RepoError>;
    /// `false` when there is no such (undeleted) user.
    async fn delete_user(&self, id: UserId, now: OffsetDateTime) -> Result<bool, RepoError>;
    /// `false` when there is no such (undeleted) user.
    async fn insert_token(&self, user_id: UserId, token: &NewToken) -> Result<bool, RepoError>;
    /// `None` when there is no such (undeleted) user.
    async fn tokens_of(&self, user_id: UserId) -> Result<Option<Vec<ApiTokenInfo>>, RepoError>;
    /// Revokes `old` and stores `new` with `old`'s expiry, unless `old` is unknown or not live.
    async fn rotate_token(
        &self,
        old: TokenId,
        new: &NewToken,
        now: OffsetDateTime,
    ) -> Result<RotateOutcome, RepoError>;
    /// Revokes the token at `now` (an already revoked token keeps its first revocation time);
    /// `false` when there is no such token.
    async fn revoke_token(&self, id: TokenId, now: OffsetDateTime) -> Result<bool, RepoError>;
}

/// A sub-account about to be stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSubAccount {
    pub id: SubAccountId,
    pub sub_id: SubId,
    pub nickname: Nickname,
    pub now: OffsetDateTime,
}

/// How an insert of a sub-account ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InsertSubAccount {
    Inserted(SubAccount),
    DuplicateSubId,
}

/// Storage of a partner's sub-accounts. Every method MUST act on the given partner's rows only.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait SubAccountRepo: Send + Sync {
    /// The partner's sub-accounts, by `subId`.
    async fn list(&self, partner: &PartnerId) -> Result<Vec<SubAccount>, RepoError>;
    /// In ONE round trip: the token of `key` (as [`TokenRepo::find_by_hash`]) and what
    /// [`SubAccountRepo::list`] reads for its partner, taken from the token by the statement
    /// itself; rows only for a token live at `key.now` (see [`LeadRepo::page_leads_for_token`]).
    async fn list_for_token(&self, key: TokenKey) -> Result<Sealed<Vec<SubAccount>>, RepoError>;
    /// Inserts unless the partner already has a sub-account with that `subId` (decided by the
    /// store's unique constraint, so concurrent creations cannot both succeed).
    async fn insert(
        &self,
        partner: &PartnerId,
        new: &NewSubAccount,
    ) -> Result<InsertSubAccount, RepoError>;
    /// `false` when the partner has no sub-account with that id.
    async fn delete(&self, partner: &PartnerId, id: SubAccountId) -> Result<bool, RepoError>;
    /// Whether the partner has a sub-account with that `subId`.
    async fn exists(&self, partner: &PartnerId, sub_id: SubId) -> Result<bool, RepoError>;
}

/// Begins units of work: a service that writes opens one [`Transaction`], makes its writes and
/// publishes the events they cause through it, and commits once, so a state change and its
/// outbox rows are stored together or not at all.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait UnitOfWork: Send + Sync {
    /// A transaction on a connection of its own. MUST NOT be shared with other callers.
    async fn begin(&self) -> Result<Box<dyn Transaction>, RepoError>;
}

/// One open transaction of a [`UnitOfWork`].
///
/// Contract for implementations:
/// - every write made through it, and the outbox rows of every event published through it,
///   MUST become visible together at [`Transaction::commit`], or not at all;
/// - dropping it without `commit` (an early return, an error, a panic) MUST roll it back;
/// - a method that answers `Err` leaves the transaction unusable: the caller drops it;
/// - workers MUST learn of deliveries written by [`Transaction::publish`] only after the commit.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait Transaction: Send {
    /// Inserts the lead. `false`, with nothing written, when its partner does not exist; the
    /// transaction stays usable.
    async fn insert_lead(&mut self, lead: &Lead) -> Result<bool, RepoError>;
    /// The lead with this id, locked against concurrent writers until the transaction ends;
    /// `None` for an unknown id.
    async fn lock_lead(&mut self, id: LeadId) -> Result<Option<Lead>, RepoError>;
    /// Stores what a patch may change of a lead (names, email, phone, consents, `updatedAt`),
    /// for the lead with the same id.
    async fn update_lead(&mut self, lead: &Lead) -> Result<(), RepoError>;
    /// Whether the partner exists.
    async fn partner_exists(&mut self, partner: &PartnerId) -> Result<bool, RepoError>;
    /// Inserts the order (recorded at `now`) unless an order with its id exists; `true` when
    /// inserted. The partner MUST exist.
    async fn insert_order(&mut self, order: &Order, now: OffsetDateTime)
    -> Result<bool, RepoError>;
    /// The stored order with this id, with its sub-account's nickname as of now.
    async fn order_listing(&mut self, order_id: &str) -> Result<Option<OrderListing>, RepoError>;
    /// Inserts the payout under `id` with the partner's email and `createdAt` the date of
    /// `now`; `None`, with nothing written, when the partner does not exist.
    async fn insert_payout(
        &mut self,
        id: PayoutId,
        new: &NewPayout,
        now: OffsetDateTime,
    ) -> Result<Option<Payout>, RepoError>;
    /// Writes each event to the outbox and, for each endpoint of the event's partner that is
    /// enabled and subscribed to its kind, one pending delivery due at `now`, or at `now` plus
    /// the endpoint's `lead.created` delay when [`crate::events::EventKind::honours_endpoint_delay`].
    async fn publish(
        &mut self,
        events: &[DomainEvent],
        now: OffsetDateTime,
    ) -> Result<(), RepoError>;
    /// Commits every write and event of this transaction.
    async fn commit(self: Box<Self>) -> Result<(), RepoError>;
}

#[cfg(any(test, feature = "mocks"))]
impl MockUnitOfWork {
    /// A unit of work that begins `tx` once (a second `begin` fails).
    pub fn begins(tx: MockTransaction) -> Self {
        let mut uow = Self::new();
        let mut tx = Some(tx);
        uow.expect_begin().times(1).returning(move || {
            tx.take()
                .map(|t| Box::new(t) as Box<dyn Transaction>)
                .ok_or_else(|| RepoError::new("begun twice"))
        });
        uow
    }
}

/// Reads of leads (writes go through a [`Transaction`]).
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait LeadRepo: Send + Sync {
    /// Up to `limit` of the partner's leads strictly after `after` in (createdAt desc, id desc)
    /// order; test rows only when `include_test`.
    async fn page_leads(
        &self,
        partner: &PartnerId,
        after: Option<Position>,
        include_test: bool,
        limit: u16,
    ) -> Result<Vec<Lead>, RepoError>;
    /// In ONE round trip: the token with this hash (as [`TokenRepo::find_by_hash`]) and the page
    /// [`LeadRepo::page_leads`] would read for its partner. Rows are read only for a token that
    /// is live at `now` (not revoked or expired, user not deleted, partner active), and only of
    /// that token's partner; whether the request is authenticated is still decided by
    /// [`crate::account::auth::AuthService::open`] from the record.
    async fn page_leads_for_token(
        &self,
        hash: &TokenHash,
        now: OffsetDateTime,
        after: Option<Position>,
        include_test: bool,
        limit: u16,
    ) -> Result<Sealed<Vec<Lead>>, RepoError>;
}

/// Storage of analytics events, and reads of orders (writes go through a [`Transaction`]).
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait OrderRepo: Send + Sync {
    /// `false` when the partner does not exist. A second `order_completed` of the same run is
    /// ignored (the first one stands).
    async fn insert_analytics_event(
        &self,
        ev: &AnalyticsEvent,
        now: OffsetDateTime,
    ) -> Result<bool, RepoError>;
    /// At most `limit` of the partner's stored and simulated orders ([`Order::simulated`]) that
    /// come after `after` in the listing order (`createdDate` descending, then `orderId`
    /// descending byte-wise), with the sub-account nickname as of now. MUST read only the rows it
    /// returns (keyset), so a partner's whole history is listed in chunks of flat memory.
    async fn orders_page(
        &self,
        partner: &PartnerId,
        after: Option<OrderKey>,
        limit: u16,
    ) -> Result<Vec<OrderListing>, RepoError>;
    /// In ONE round trip: the token of `key` and the first [`OrderRepo::orders_page`] of its
    /// partner (taken from the token by the statements; rows only for a live token).
    async fn orders_page_for_token(
        &self,
        key: TokenKey,
        limit: u16,
    ) -> Result<Sealed<Vec<OrderListing>>, RepoError>;
    /// Stored and simulated orders with `from <= createdDate < to`.
    async fn orders_between(
        &self,
        partner: &PartnerId,
        from: OffsetDateTime,
        to: OffsetDateTime,
    ) -> Result<Vec<Order>, RepoError>;
}

/// Reads of payouts (writes go through a [`Transaction`]).
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait PayoutRepo: Send + Sync {
    /// At most `limit` of the partner's payouts after `after` in the listing order (payout date,
    /// then creation date, then id, all descending); keyset, like [`OrderRepo::orders_page`].
    async fn payouts_page(
        &self,
        partner: &PartnerId,
        after: Option<PayoutKey>,
        limit: u16,
    ) -> Result<Vec<Payout>, RepoError>;
    /// In ONE round trip: the token of `key` and the first [`PayoutRepo::payouts_page`] of its
    /// partner (taken from the token by the statement; rows only for a live token).
    async fn payouts_page_for_token(
        &self,
        key: TokenKey,
        limit: u16,
    ) -> Result<Sealed<Vec<Payout>>, RepoError>;
}

/// Storage of the product catalog and partners' prices. Products are global; prices MUST be
/// read and written for the given partner only. Reads return what is stored now (no cache), so
/// an operator's change shows on the next request.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait CatalogRepo: Send + Sync {
    /// Inserts or replaces; `true` when inserted.
    async fn put_medical(
        &self,
        p: &MedicalProduct,
        now: OffsetDateTime,
    ) -> Result<(Stored<MedicalProduct>, bool), RepoError>;
    /// Every medical product (active or not), in no particular order.
    async fn medical_products(&self) -> Result<Vec<MedicalProduct>, RepoError>;
    async fn medical_product(&self, id: ProductId) -> Result<Option<MedicalProduct>, RepoError>;
    /// Replaces the partner's prices for one product.
    async fn put_medical_prices(
        &self,
        partner: &PartnerId,
        product: ProductId,
        prices: &BTreeMap<String, Money>,
        now: OffsetDateTime,
    ) -> Result<(), RepoError>;
    /// The partner's prices, by product.
    async fn medical_prices(
        &self,
        partner: &PartnerId,
    ) -> Result<BTreeMap<ProductId, BTreeMap<String, Money>>, RepoError>;
    async fn put_dna(
        &self,
        p: &DnaProduct,
        now: OffsetDateTime,
    ) -> Result<(Stored<DnaProduct>, bool), RepoError>;
    /// Every DNA product, in no particular order.
    async fn dna_products(&self) -> Result<Vec<DnaProduct>, RepoError>;
    async fn dna_product(&self, id: ProductId) -> Result<Option<DnaProduct>, RepoError>;
    async fn put_dna_price(
        &self,
        partner: &PartnerId,
        product: ProductId,
        price: Money,
        now: OffsetDateTime,
    ) -> Result<(), RepoError>;
    async fn dna_prices(
        &self,
        partner: &PartnerId,
    ) -> Result<BTreeMap<ProductId, Money>, RepoError>;
    async fn put_care(
        &self,
        p: &CareProduct,
        now: OffsetDateTime,
    ) -> Result<(Stored<CareProduct>, bool), RepoError>;
    /// Every Care Services product, in no particular order.
    async fn care_products(&self) -> Result<Vec<CareProduct>, RepoError>;
    /// In ONE round trip: the token of `key` and what the DNA links of its partner are built
    /// from (the partner, its DNA prices: taken from the token by the statements, nothing for a
    /// token that is not live; every DNA product).
    async fn dna_links_for_token(&self, key: TokenKey) -> Result<Sealed<DnaLinkInputs>, RepoError>;
    /// In ONE round trip: the token of `key` and what the medical links of its partner are built
    /// from, with whether `sub` names one of its sub-accounts (as [`Self::dna_links_for_token`]).
    async fn medical_links_for_token(
        &self,
        key: TokenKey,
        sub: Option<SubId>,
    ) -> Result<Sealed<MedicalLinkInputs>, RepoError>;
    /// In ONE round trip: the token of `key` and what the Care Services links of its partner are
    /// built from (the global switches too), with whether `sub` names one of its sub-accounts.
    async fn care_links_for_token(
        &self,
        key: TokenKey,
        sub: Option<SubId>,
    ) -> Result<Sealed<CareLinkInputs>, RepoError>;
}

/// How a write that must be unique ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CouponWrite {
    Done,
    /// A code already exists; nothing was written.
    CodeCollision,
}

/// Storage of coupons. State changes MUST be single conditional statements (compare-and-set on
/// the stored status and, for redemption, the expiry at the given time), so that of concurrent
/// attempts on one code exactly one succeeds.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait CouponRepo: Send + Sync {
    /// Inserts every coupon in one transaction, or none.
    async fn insert_bulk(&self, coupons: &[Coupon]) -> Result<CouponWrite, RepoError>;
    /// One conditional update: the coupon with `code` becomes redeemed if it is active at
    /// `who.at` and locked to `slug` and `months`. `Err(None)`: no such code; `Err(Some(c))`:
    /// the coupon as it is, unchanged.
    async fn redeem(
        &self,
        code: &CouponCode,
        slug: ProductSlug,
        months: u8,
        who: &Redemption,
    ) -> Result<Result<Coupon, Option<Coupon>>, RepoError>;
    /// The same for `active → void`.
    async fn void(
        &self,
        id: CouponId,
        now: OffsetDateTime,
    ) -> Result<Result<Coupon, Option<Coupon>>, RepoError>;
    /// A page of the partner's coupons matching the query at `now` (effective statuses), newest
    /// first, and the count of all that match.
    async fn list(
        &self,
        q: &CouponQuery,
        now: OffsetDateTime,
    ) -> Result<(Vec<Coupon>, u64), RepoError>;
    /// In ONE round trip: the token of `key` and [`CouponRepo::list`] at `key.now` for the
    /// partner the statements derive from the token by [`crate::coupon::listing_scope`]'s rule
    /// (nothing when the token is not live or the scope is refused).
    async fn list_for_token(
        &self,
        key: TokenKey,
        filter: &CouponFilter,
    ) -> Result<Sealed<(Vec<Coupon>, u64)>, RepoError>;
}

/// How an endpoint insert ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InsertEndpoint {
    Inserted,
    /// The partner already has the maximum; nothing was written.
    TooMany,
    UnknownPartner,
}

/// Storage of webhook endpoints and the delivery log, scoped by partner: every method MUST act on
/// the given partner's rows only (another partner's id answers as absent).
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait WebhookRepo: Send + Sync {
    /// The partner's endpoints, oldest first.
    async fn endpoints(&self, partner: &PartnerId) -> Result<Vec<WebhookEndpoint>, RepoError>;
    /// In ONE round trip: the token of `key` and [`WebhookRepo::endpoints`] of its partner
    /// (taken from the token by the statement; rows only for a live token).
    async fn endpoints_for_token(
        &self,
        key: TokenKey,
    ) -> Result<Sealed<Vec<WebhookEndpoint>>, RepoError>;
    async fn endpoint(
        &self,
        partner: &PartnerId,
        id: EndpointId,
    ) -> Result<Option<WebhookEndpoint>, RepoError>;
    /// Inserts unless the partner already has `max` endpoints (checked under a lock on the partner).
    async fn insert_endpoint(
        &self,
        e: &WebhookEndpoint,
        max: usize,
    ) -> Result<InsertEndpoint, RepoError>;
    /// Replaces the stored endpoint of the same partner and id; `false` when absent.
    async fn update_endpoint(&self, e: &WebhookEndpoint) -> Result<bool, RepoError>;
    /// Deletes the endpoint and, with it, its deliveries; `false` when absent.
    async fn delete_endpoint(&self, partner: &PartnerId, id: EndpointId)
    -> Result<bool, RepoError>;
    /// The partner's deliveries matching `filter`, newest first (`created_at` desc, `id` desc),
    /// after `filter.after`, at most `filter.limit`.
    async fn deliveries(
        &self,
        partner: &PartnerId,
        filter: &DeliveryFilter,
    ) -> Result<Vec<DeliveryInfo>, RepoError>;
    /// In ONE round trip: the token of `key` and [`WebhookRepo::deliveries`] of its partner
    /// (taken from the token by the statement; rows only for a live token).
    async fn deliveries_for_token(
        &self,
        key: TokenKey,
        filter: &DeliveryFilter,
    ) -> Result<Sealed<Vec<DeliveryInfo>>, RepoError>;
    /// In ONE round trip: the token of `key` and [`WebhookRepo::delivery`] of its partner
    /// (taken from the token by both statements; nothing for a token that is not live).
    async fn delivery_for_token(
        &self,
        key: TokenKey,
        id: DeliveryId,
        log_limit: u16,
    ) -> Result<Sealed<Option<DeliveryDetail>>, RepoError>;
    /// One of the partner's deliveries with its last `log_limit` attempts, oldest first.
    async fn delivery(
        &self,
        partner: &PartnerId,
        id: DeliveryId,
        log_limit: u16,
    ) -> Result<Option<DeliveryDetail>, RepoError>;
    /// Makes one of the partner's deliveries pending, due at `now`, with a fresh retry budget
    /// (`attempts` keeps counting). `None` when the partner has no such delivery.
    async fn resend(
        &self,
        partner: &PartnerId,
        id: DeliveryId,
        now: OffsetDateTime,
    ) -> Result<Option<DeliveryInfo>, RepoError>;
    /// Writes a `ping` event and its one delivery `delivery_id` to the partner's endpoint, due at
    /// `now`. `None` when the partner has no such endpoint.
    async fn ping(
        &self,
        partner: &PartnerId,
        endpoint: EndpointId,
        delivery_id: DeliveryId,
        now: OffsetDateTime,
    ) -> Result<Option<DeliveryInfo>, RepoError>;
    /// Makes the endpoint's failed deliveries created at or after `since` pending, due at `now`,
    /// with a fresh budget; returns how many. `None` when the partner has no such endpoint.
    async fn recover(
        &self,
        partner: &PartnerId,
        endpoint: EndpointId,
        since: OffsetDateTime,
        now: OffsetDateTime,
    ) -> Result<Option<u64>, RepoError>;
}

/// Whether a host name resolves to an internal address (resolution failures answer `false`).
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait AddressCheck: Send + Sync {
    async fn resolves_internal(&self, host: &str, port: u16) -> bool;
}

/// The delivery worker's storage. Claims and outcomes are batched: a worker spends a few round
/// trips per batch of deliveries, not per delivery.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait DeliveryRepo: Send + Sync {
    /// Claims pending deliveries due at `req.now` with fewer than `req.max_attempts` attempts:
    /// at most `req.limit` in all and at most each endpoint's room (`req.room`, else
    /// `req.per_endpoint`), oldest due first within an endpoint, endpoints in random order.
    /// MUST skip rows locked by another claimer (`FOR UPDATE SKIP LOCKED`), count the attempt
    /// (`attempts + 1`), move `next_attempt_at` to `req.lease_until` and stamp a fresh lease
    /// token, all in one statement, so any number of workers share the work and a worker that
    /// dies leaves its deliveries due again after the lease.
    async fn claim(&self, req: &ClaimRequest) -> Result<Vec<ClaimedDelivery>, RepoError>;
    /// The subjects that still exist among `wanted`, keyed as asked; one query per subject kind.
    async fn subjects(
        &self,
        wanted: &[(SubjectKind, String)],
    ) -> Result<HashMap<(SubjectKind, String), Subject>, RepoError>;
    /// Records outcomes in one statement. MUST apply an outcome only while its delivery is still
    /// `pending` under the same lease token (fencing: a worker whose lease ran out and was
    /// reclaimed cannot overwrite the newer attempt). Returns how many were applied. Then updates
    /// the health of the endpoints concerned: an attempt answered `410` disables its endpoint
    /// (reason `gone`), and so does a run of failed attempts lasting `disable_after` (reason
    /// `failing`; `None`: never); a disabled endpoint's pending deliveries end `failed`.
    async fn record(
        &self,
        outcomes: &[AttemptOutcome],
        disable_after: Option<std::time::Duration>,
    ) -> Result<u64, RepoError>;
    /// Ends as `failed` (with `error`) the pending deliveries due at `now` that already made
    /// `max_attempts` attempts: their last worker died before recording an outcome.
    async fn fail_exhausted(
        &self,
        now: OffsetDateTime,
        max_attempts: u32,
        error: &str,
    ) -> Result<u64, RepoError>;
    /// Deletes at most `batch` delivered or failed deliveries created before `before`, then at
    /// most `batch` events of that age that no delivery refers to. Returns the rows deleted.
    async fn prune(&self, before: OffsetDateTime, batch: u32) -> Result<u64, RepoError>;
}

/// Whether the store answers (`/readyz`).
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait Readiness: Send + Sync {
    async fn ping(&self) -> Result<(), RepoError>;
}

macro_rules! debug_port {
    ($($t:ident),*) => {$(
        impl std::fmt::Debug for dyn $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(stringify!($t))
            }
        }
    )*};
}
debug_port!(
    TokenRepo,
    AccountRepo,
    SubAccountRepo,
    LeadRepo,
    UnitOfWork,
    OrderRepo,
    PayoutRepo,
    CatalogRepo,
    CouponRepo,
    WebhookRepo,
    AddressCheck,
    DeliveryRepo,
    Readiness
);
