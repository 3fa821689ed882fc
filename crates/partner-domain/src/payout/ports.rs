//! The payout aggregate's ports.

use async_trait::async_trait;

use crate::account::auth::{Sealed, TokenKey};
use crate::kernel::error::RepoError;
use crate::kernel::values::PartnerId;
use crate::payout::{Payout, PayoutKey};

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

crate::kernel::debug_port!(PayoutRepo);
