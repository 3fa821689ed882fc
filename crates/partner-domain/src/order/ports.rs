//! The order aggregate's ports: reads of orders, analytics events, and the writes of an order
//! transaction.
//!
//! Services hold the ports as trait objects; the PostgreSQL adapter implements them, and the
//! `mocks` feature generates `MockOrderRepo` for tests:
//!
//! ```
//! use std::sync::Arc;
//! use partner_domain::order::ports::OrderRepo;
//!
//! fn wire(_reads: Arc<dyn OrderRepo>) {}
//! ```

use async_trait::async_trait;
use time::OffsetDateTime;

use crate::account::auth::{Sealed, TokenKey};
use crate::events::Outbox;
#[cfg(any(test, feature = "mocks"))]
use crate::events::{DomainEvent, Requeue};
use crate::kernel::error::RepoError;
use crate::kernel::uow::Commit;
use crate::kernel::values::PartnerId;
use crate::order::{AnalyticsEvent, Order, OrderKey, OrderListing};

/// Storage of analytics events, and reads of orders (order writes go through an [`OrderTransaction`]).
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
    /// In ONE round trip: the token of `key` and the order of the listing with this id (a
    /// simulated `TEST-SIM-…` one too) when it belongs to the token's partner.
    async fn order_for_token(
        &self,
        key: TokenKey,
        order_id: &str,
    ) -> Result<Sealed<Option<OrderListing>>, RepoError>;
    /// Stored and simulated orders with `from <= createdDate < to`.
    async fn orders_between(
        &self,
        partner: &PartnerId,
        from: OffsetDateTime,
        to: OffsetDateTime,
    ) -> Result<Vec<Order>, RepoError>;
}

/// The writes of order ingest, inside an [`OrderTransaction`].
#[async_trait]
pub trait OrderWrites: Send {
    /// Whether the partner exists.
    async fn partner_exists(&mut self, partner: &PartnerId) -> Result<bool, RepoError>;
    /// Inserts the order (recorded at `now`) unless an order with its id exists; `true` when
    /// inserted. The partner MUST exist.
    async fn insert_order(&mut self, order: &Order, now: OffsetDateTime)
    -> Result<bool, RepoError>;
    /// The stored order with this id, with its sub-account's nickname as of now.
    async fn order_listing(&mut self, order_id: &str) -> Result<Option<OrderListing>, RepoError>;
}

/// A transaction of order ingest: the order and `order.created`, committed together.
pub trait OrderTransaction: OrderWrites + Outbox + Commit {}

impl<T: OrderWrites + Outbox + Commit + ?Sized> OrderTransaction for T {}

#[cfg(any(test, feature = "mocks"))]
mockall::mock! {
    /// A mock [`OrderTransaction`]: its writes, the outbox and the commit.
    pub OrderTransaction {}
    #[async_trait]
    impl OrderWrites for OrderTransaction {
        async fn partner_exists(&mut self, partner: &PartnerId) -> Result<bool, RepoError>;
        async fn insert_order(&mut self, order: &Order, now: OffsetDateTime) -> Result<bool, RepoError>;
        async fn order_listing(&mut self, order_id: &str) -> Result<Option<OrderListing>, RepoError>;
    }
    #[async_trait]
    impl Outbox for OrderTransaction {
        async fn publish(&mut self, events: &[DomainEvent], now: OffsetDateTime) -> Result<u64, RepoError>;
        async fn requeue(&mut self, partner: &PartnerId, which: Requeue, now: OffsetDateTime) -> Result<Option<crate::events::Requeued>, RepoError>;
    }
    #[async_trait]
    impl Commit for OrderTransaction {
        async fn commit(self: Box<Self>) -> Result<(), RepoError>;
    }
}

crate::kernel::debug_port!(OrderRepo);
