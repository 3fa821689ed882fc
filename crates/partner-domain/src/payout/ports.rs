//! The payout aggregate's ports: reads of payouts and the write of a payout transaction.
//!
//! With the `mocks` feature, mocks stand in for the store:
//!
//! ```
//! # #[cfg(feature = "mocks")] {
//! use partner_domain::payout::ports::{MockPayoutRepo, MockPayoutTransaction};
//!
//! let repo = MockPayoutRepo::new();
//! let mut tx = MockPayoutTransaction::new();
//! tx.expect_commit().returning(|| Ok(()));
//! # let _ = (repo, tx);
//! # }
//! ```

use async_trait::async_trait;
use time::OffsetDateTime;

use crate::account::auth::{Sealed, TokenKey};
use crate::events::Outbox;
#[cfg(any(test, feature = "mocks"))]
use crate::events::{DomainEvent, Requeue};
use crate::kernel::error::RepoError;
use crate::kernel::ids::PayoutId;
use crate::kernel::uow::Commit;
use crate::kernel::values::PartnerId;
use crate::payout::{NewPayout, Payout, PayoutKey};

/// Reads of payouts (writes go through a [`PayoutTransaction`]).
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait PayoutRepo: Send + Sync {
    /// At most `limit` of the partner's payouts after `after` in the listing order (payout date,
    /// then creation date, then id, all descending); keyset, like [`crate::order::ports::OrderRepo::orders_page`].
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
    /// In ONE round trip: the token of `key` and the payout with this id when it belongs to the
    /// token's partner.
    async fn payout_for_token(
        &self,
        key: TokenKey,
        id: PayoutId,
    ) -> Result<Sealed<Option<Payout>>, RepoError>;
}

/// The write of payout recording, inside a [`PayoutTransaction`].
#[async_trait]
pub trait PayoutWrites: Send {
    /// Inserts the payout under `id` with the partner's email and `createdAt` the date of
    /// `now`; `None`, with nothing written, when the partner does not exist.
    async fn insert_payout(
        &mut self,
        id: PayoutId,
        new: &NewPayout,
        now: OffsetDateTime,
    ) -> Result<Option<Payout>, RepoError>;
}

/// A transaction of payout recording: the payout and `payout.created`, committed together.
pub trait PayoutTransaction: PayoutWrites + Outbox + Commit {}

impl<T: PayoutWrites + Outbox + Commit + ?Sized> PayoutTransaction for T {}

#[cfg(any(test, feature = "mocks"))]
mockall::mock! {
    /// A mock [`PayoutTransaction`]: its writes, the outbox and the commit.
    pub PayoutTransaction {}
    #[async_trait]
    impl PayoutWrites for PayoutTransaction {
        async fn insert_payout(&mut self, id: PayoutId, new: &NewPayout, now: OffsetDateTime) -> Result<Option<Payout>, RepoError>;
    }
    #[async_trait]
    impl Outbox for PayoutTransaction {
        async fn publish(&mut self, events: &[DomainEvent], now: OffsetDateTime) -> Result<u64, RepoError>;
        async fn requeue(&mut self, partner: &PartnerId, which: Requeue, now: OffsetDateTime) -> Result<Option<crate::events::Requeued>, RepoError>;
    }
    #[async_trait]
    impl Commit for PayoutTransaction {
        async fn commit(self: Box<Self>) -> Result<(), RepoError>;
    }
}

crate::kernel::debug_port!(PayoutRepo);
