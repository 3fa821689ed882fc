//! The outbox capability of a transaction: the one way deliveries are written or queued again.

use async_trait::async_trait;
use time::OffsetDateTime;

use crate::events::DomainEvent;
use crate::kernel::error::RepoError;
use crate::kernel::ids::{DeliveryId, EndpointId};
use crate::kernel::values::PartnerId;

/// Which of a partner's deliveries to queue again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requeue {
    /// One delivery (a resend).
    Delivery(DeliveryId),
    /// The endpoint's deliveries that failed and were created at or after `since` (a recover):
    /// at most `limit` of them, oldest first.
    FailedSince {
        /// The endpoint.
        endpoint: EndpointId,
        /// The earliest creation instant.
        since: OffsetDateTime,
        /// At most this many.
        limit: u32,
    },
}

/// What a requeue did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Requeued {
    /// Deliveries made pending again.
    pub requeued: u64,
    /// Deliveries that matched but were left as they were (beyond the limit).
    pub remaining: u64,
}

/// Writes to the outbox, inside a transaction (see [`crate::kernel::uow::Commit`] for when the
/// writes become visible and the workers learn of them: at the commit, never before).
#[async_trait]
pub trait Outbox: Send {
    /// Writes each event to the outbox with its deliveries, all pending: for
    /// [`super::Recipients::Subscribers`], one per enabled endpoint of the event's partner
    /// subscribed to its kind, due at `now`, or at `now` plus the endpoint's `lead.created` delay
    /// when [`super::EventKind::honours_endpoint_delay`]; for [`super::Recipients::Endpoint`], the
    /// one delivery named, due at `now`, written (with its event) only when the endpoint is the
    /// partner's. Returns how many deliveries were written.
    async fn publish(
        &mut self,
        events: &[DomainEvent],
        now: OffsetDateTime,
    ) -> Result<u64, RepoError>;

    /// Makes the partner's deliveries named by `which` pending again, due at `now`, with a fresh
    /// retry budget (`attempts` keeps counting; the id, and so `X-Partner-Delivery`, stays); a
    /// delivery's attempt in flight can no longer record its outcome. Returns how many; `None`
    /// when the partner has no such delivery ([`Requeue::Delivery`]) or endpoint
    /// ([`Requeue::FailedSince`]). A delivery of an endpoint that is disabled is never made
    /// pending: [`Requeue::Delivery`] then answers `requeued: 0` (its endpoint is read under a
    /// share lock, so a concurrent disabling waits for the requeue, and fails it).
    async fn requeue(
        &mut self,
        partner: &PartnerId,
        which: Requeue,
        now: OffsetDateTime,
    ) -> Result<Option<Requeued>, RepoError>;
}
