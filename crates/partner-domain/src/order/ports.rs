//! The order aggregate's ports.

use async_trait::async_trait;
use time::OffsetDateTime;

use crate::account::auth::{Sealed, TokenKey};
use crate::kernel::error::RepoError;
use crate::kernel::values::PartnerId;
use crate::order::{AnalyticsEvent, Order, OrderKey, OrderListing};

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

crate::kernel::debug_port!(OrderRepo);
