//! The unit of work shared by the services that write and publish events (until each aggregate
//! declares its own writes).

use async_trait::async_trait;
use time::OffsetDateTime;

use crate::events::DomainEvent;
use crate::kernel::error::RepoError;
use crate::kernel::ids::{LeadId, PayoutId};
use crate::kernel::values::PartnerId;
use crate::lead::Lead;
use crate::order::{Order, OrderListing};
use crate::payout::{NewPayout, Payout};

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

crate::kernel::debug_port!(UnitOfWork);
