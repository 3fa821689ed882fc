//! The webhook aggregate's ports: endpoints and the delivery log (partners and the operator),
//! address resolution, and the delivery worker's storage.
//!
//! With the `mocks` feature, mocks stand in for the store (the delivery worker's tests in
//! `partner-webhooks` use `MockDeliveryRepo`):
//!
//! ```
//! # #[cfg(feature = "mocks")] {
//! use partner_domain::webhook::ports::{MockDeliveryRepo, MockWebhookRepo};
//!
//! let mut deliveries = MockDeliveryRepo::new();
//! deliveries.expect_fail_disabled().returning(|_| Ok(0));
//! # let _ = (deliveries, MockWebhookRepo::new());
//! # }
//! ```

use async_trait::async_trait;
use time::OffsetDateTime;

use crate::account::auth::{Sealed, TokenKey};
use crate::events::Outbox;
#[cfg(any(test, feature = "mocks"))]
use crate::events::{DomainEvent, Requeue};
use crate::kernel::error::RepoError;
use crate::kernel::ids::{DeliveryId, EndpointId};
use crate::kernel::uow::Commit;
use crate::kernel::values::PartnerId;
use crate::webhook::delivery::{
    AttemptOutcome, ClaimBatch, ClaimRequest, DeliveryDetail, DeliveryFilter, DeliveryInfo,
};
use crate::webhook::endpoint::WebhookEndpoint;
use crate::webhook::payload::{SubjectIds, Subjects};

/// What a read of an endpoint's row found ([`DeliveryRepo::endpoint_unchanged`]), and when it
/// was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndpointCheck {
    /// The endpoint is enabled and still at the version asked about.
    pub unchanged: bool,
    /// When the read was sent, once it held its connection: its snapshot is taken after this.
    /// A caller that ages the answer from here does not count the wait for a connection, which
    /// says nothing about how fresh the answer is (issue 23, N13).
    pub sent: std::time::Instant,
}

/// How an endpoint insert ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InsertEndpoint {
    /// Stored.
    Inserted,
    /// The partner already has the maximum; nothing was written.
    TooMany,
    /// No partner has that id; nothing was written.
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
    /// One of the partner's endpoints.
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
    /// In ONE round trip: the token of `key` and how many of its partner's deliveries (of
    /// `endpoint` only, when given) were created in each hour since `since`, by status.
    async fn hourly_for_token(
        &self,
        key: TokenKey,
        endpoint: Option<EndpointId>,
        since: OffsetDateTime,
    ) -> Result<Sealed<Vec<crate::webhook::hourly::StatusCount>>, RepoError>;
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
}

/// Whether a host name resolves to an internal address (resolution failures answer `false`).
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait AddressCheck: Send + Sync {
    /// Whether `host` resolves to an internal address ([`crate::webhook::is_internal`]).
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
    /// dies leaves its deliveries due again after the lease. A claimed row whose stored event
    /// cannot be read is answered in [`ClaimBatch::unreadable`]: it never fails the others.
    async fn claim(&self, req: &ClaimRequest) -> Result<ClaimBatch, RepoError>;
    /// The records among `wanted` that still exist, as they are now; one query per kind of
    /// record.
    async fn subjects(&self, wanted: &SubjectIds) -> Result<Subjects, RepoError>;
    /// Records outcomes in one statement. MUST apply an outcome only while its delivery is still
    /// `pending` under the same lease token (fencing: a worker whose lease ran out and was
    /// reclaimed cannot overwrite the newer attempt). Returns how many were applied. Then updates
    /// the health of the endpoints concerned as [`crate::webhook::health::EndpointHealth::after`]
    /// decides from the attempts that made a request
    /// ([`crate::webhook::health::Attempted::of`]), applied to each endpoint's health as stored
    /// (never over a concurrent change of it); a disabled endpoint's pending deliveries end
    /// `failed` with [`crate::webhook::ENDPOINT_DISABLED`].
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
    /// Ends as `failed` (with `error`) every pending delivery of a disabled endpoint. A disable
    /// already ends them; this heals one written by a request that raced the disable (its
    /// delivery committed after the disable's update had looked), which no worker would ever
    /// claim. Returns how many.
    async fn fail_disabled(&self, error: &str) -> Result<u64, RepoError>;
    /// The store's upkeep of what it keeps beside the deliveries to find due ones fast (an index
    /// of the endpoints with due work, say), once a maintenance round: afterwards every pending
    /// delivery MUST be found by [`DeliveryRepo::claim`] from its due time on, whatever happened
    /// to that bookkeeping meanwhile (a row written with the store's own triggers bypassed, a
    /// partial restore). Returns how many entries it corrected (0 when all was in order). A store
    /// that keeps nothing of the kind does nothing, which is the default.
    async fn upkeep(&self) -> Result<u64, RepoError> {
        Ok(0)
    }
    /// Gives claims back unattempted, because their endpoint changed after they were claimed
    /// (what the claim read of it, URL, secrets, custom header or status, is stale): each row
    /// still `pending` under the given lease loses the lease and the attempt the claim counted, and
    /// is due at `now`, so the next claim reads the endpoint afresh. Returns how many.
    async fn release(
        &self,
        claims: &[(DeliveryId, uuid::Uuid)],
        now: OffsetDateTime,
    ) -> Result<u64, RepoError>;
    /// Whether endpoint `id` is still enabled and at `version` (a claim's
    /// [`crate::webhook::ClaimedDelivery::endpoint_version`]): nothing a claim read of it has
    /// changed since. One cheap read by primary key, for a worker that could not hear the
    /// store's change announcements since the claim (issue 23, N9), and the moment it was sent.
    async fn endpoint_unchanged(
        &self,
        id: EndpointId,
        version: i64,
    ) -> Result<EndpointCheck, RepoError>;
    /// One bounded step of the delivery log's retention: deletes the next `batch` (at most)
    /// delivered or failed deliveries created before `before`, oldest first, starting at `from`
    /// (the [`PruneStep::next`] of the previous step of the same walk; `None`: the oldest).
    /// Each step walks only the rows it deletes, by index, never those earlier steps removed.
    async fn prune_deliveries(
        &self,
        before: OffsetDateTime,
        from: Option<PruneMark>,
        batch: u32,
    ) -> Result<PruneStep, RepoError>;
    /// One bounded step of the events' retention: looks at the next `batch` events (at most)
    /// created before `before`, oldest first, after `from`, deletes those no delivery refers to,
    /// and records for each partner the last feed position removed (a cursor before it answers
    /// `cursor_expired`). An event kept because a delivery still refers to it is walked past, not
    /// looked at again by later steps of the walk (the next walk, a round later, sees it again).
    async fn prune_events(
        &self,
        before: OffsetDateTime,
        from: Option<PruneMark>,
        batch: u32,
    ) -> Result<PruneStep, RepoError>;
}

/// Where a retention walk stands: the creation time and id of the last row it looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PruneMark {
    /// The last row's creation time.
    pub created_at: OffsetDateTime,
    /// The last row's id (ties of `created_at` are walked in id order).
    pub id: uuid::Uuid,
}

/// What one step of a retention walk did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PruneStep {
    /// Rows deleted.
    pub deleted: u64,
    /// Where the next step starts; `None` when this step reached the end of what is past the
    /// retention (it looked at fewer rows than its batch).
    pub next: Option<PruneMark>,
}

/// How a delivery's `data` is written on the wire: with the API's own answer types (the HTTP
/// adapter's), so a webhook's lead, order or payout is byte for byte what the listings show.
pub trait DataFormat: Send + Sync {
    /// The JSON of `payload` (the `data` of the delivery body).
    fn data(&self, payload: &crate::webhook::Payload<'_>) -> serde_json::Value;
}

/// The read a webhook transaction makes of what it wrote.
#[async_trait]
pub trait DeliveryReads: Send {
    /// One of the partner's deliveries, as it is inside this transaction.
    async fn delivery(
        &mut self,
        partner: &PartnerId,
        id: DeliveryId,
    ) -> Result<Option<DeliveryInfo>, RepoError>;
}

/// The stored times of a partner's admitted webhook actions ([`crate::webhook::ActionBudget`]),
/// shared by every instance.
#[async_trait]
pub trait ActionCalls: Send {
    /// The times stored for the partner, locked until the transaction ends: a concurrent caller
    /// (of any instance) waits for this transaction before it reads them.
    async fn lock_action_calls(
        &mut self,
        partner: &PartnerId,
    ) -> Result<Vec<OffsetDateTime>, RepoError>;
    /// Replaces the times stored for the partner.
    async fn store_action_calls(
        &mut self,
        partner: &PartnerId,
        calls: &[OffsetDateTime],
    ) -> Result<(), RepoError>;
}

/// Changes to an endpoint, as one atomic read-modify-write: concurrent changes of one endpoint
/// (a `PATCH`, a worker's health change) apply one after another.
#[async_trait]
pub trait EndpointWrites: Send {
    /// The partner's endpoint, its row locked until the transaction ends (a concurrent change
    /// waits); `None` when the partner has no such endpoint.
    async fn lock_endpoint(
        &mut self,
        partner: &PartnerId,
        id: EndpointId,
    ) -> Result<Option<WebhookEndpoint>, RepoError>;
    /// Replaces the endpoint read by [`EndpointWrites::lock_endpoint`]. Re-enabling it starts
    /// its health count afresh; while it is disabled, its pending deliveries end `failed` with
    /// [`crate::webhook::ENDPOINT_DISABLED`].
    async fn write_endpoint(&mut self, e: &WebhookEndpoint) -> Result<(), RepoError>;
}

/// A transaction of the webhook service: pings, resends and recoveries go through the outbox like
/// every other delivery, and the workers learn of them at the commit.
pub trait WebhookTransaction:
    DeliveryReads + EndpointWrites + ActionCalls + Outbox + Commit
{
}

impl<T: DeliveryReads + EndpointWrites + ActionCalls + Outbox + Commit + ?Sized> WebhookTransaction
    for T
{
}

#[cfg(any(test, feature = "mocks"))]
mockall::mock! {
    /// A mock [`WebhookTransaction`]: its writes, the outbox and the commit.
    pub WebhookTransaction {}
    #[async_trait]
    impl DeliveryReads for WebhookTransaction {
        async fn delivery(&mut self, partner: &PartnerId, id: DeliveryId) -> Result<Option<DeliveryInfo>, RepoError>;
    }
    #[async_trait]
    impl EndpointWrites for WebhookTransaction {
        async fn lock_endpoint(&mut self, partner: &PartnerId, id: EndpointId) -> Result<Option<WebhookEndpoint>, RepoError>;
        async fn write_endpoint(&mut self, e: &WebhookEndpoint) -> Result<(), RepoError>;
    }
    #[async_trait]
    impl ActionCalls for WebhookTransaction {
        async fn lock_action_calls(&mut self, partner: &PartnerId) -> Result<Vec<OffsetDateTime>, RepoError>;
        async fn store_action_calls(&mut self, partner: &PartnerId, calls: &[OffsetDateTime]) -> Result<(), RepoError>;
    }
    #[async_trait]
    impl Outbox for WebhookTransaction {
        async fn publish(&mut self, events: &[DomainEvent], now: OffsetDateTime) -> Result<u64, RepoError>;
        async fn requeue(&mut self, partner: &PartnerId, which: Requeue, now: OffsetDateTime) -> Result<Option<crate::events::Requeued>, RepoError>;
    }
    #[async_trait]
    impl Commit for WebhookTransaction {
        async fn commit(self: Box<Self>) -> Result<(), RepoError>;
    }
}

crate::kernel::debug_port!(WebhookRepo, AddressCheck, DeliveryRepo);
