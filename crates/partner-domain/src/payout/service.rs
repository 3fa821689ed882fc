//! The payout service: recording (with `payout.created`) and the chunked listing.

use std::sync::Arc;

use crate::account::auth::{Sealed, TokenKey};
use crate::events::{DomainEvent, Event};
use crate::kernel::clock::Clock;
use crate::kernel::error::RepoError;
use crate::kernel::ids::PayoutId;
use crate::kernel::page::Chunk;
use crate::kernel::random::Random;
use crate::kernel::uow::UnitOfWork;
use crate::kernel::values::PartnerId;
use crate::payout::ports::{PayoutRepo, PayoutTransaction};
use crate::payout::{NewPayout, Payout, PayoutKey, PayoutRow};

/// Errors of [`PayoutService::record`].
#[derive(Debug, thiserror::Error)]
pub enum RecordPayoutError {
    #[error("no partner with that partnerId")]
    UnknownPartner,
    #[error(transparent)]
    Repo(#[from] RepoError),
}

/// Payout recording and listing.
#[derive(Debug, Clone)]
pub struct PayoutService {
    repo: Arc<dyn PayoutRepo>,
    uow: Arc<dyn UnitOfWork<dyn PayoutTransaction>>,
    clock: Arc<dyn Clock>,
    rng: Arc<dyn Random>,
}

impl PayoutService {
    pub fn new(
        repo: Arc<dyn PayoutRepo>,
        uow: Arc<dyn UnitOfWork<dyn PayoutTransaction>>,
        clock: Arc<dyn Clock>,
        rng: Arc<dyn Random>,
    ) -> Self {
        Self {
            repo,
            uow,
            clock,
            rng,
        }
    }

    /// Stores a payout (its `email` is the partner's, `createdAt` today) and `payout.created`.
    pub async fn record(&self, new: NewPayout) -> Result<PayoutRow, RecordPayoutError> {
        let id = PayoutId::generate(self.rng.as_ref());
        let now = self.clock.now();
        let mut tx = self.uow.begin().await?;
        let payout = tx
            .insert_payout(id, &new, now)
            .await?
            .ok_or(RecordPayoutError::UnknownPartner)?;
        let created = DomainEvent::new(new.partner_id.clone(), Event::PayoutCreated { payout: id });
        tx.publish(&[created], now).await?;
        tx.commit().await?;
        Ok(payout.row())
    }

    /// One chunk of the partner's payouts, newest payout date first, after `after` (see
    /// [`crate::order::OrderService::chunk`]).
    pub async fn chunk(
        &self,
        partner: &PartnerId,
        after: Option<PayoutKey>,
        size: u16,
    ) -> Result<Chunk<PayoutRow, PayoutKey>, RepoError> {
        let payouts = self.repo.payouts_page(partner, after, size).await?;
        Ok(Self::chunk_of(payouts, size))
    }

    /// The first [`Self::chunk`] for the partner of the token of `key`, read with the token's
    /// record in one round trip and sealed until authentication passes; [`Self::chunk_of`]
    /// makes the chunk of what it opens to. The following chunks are read after
    /// authentication, with [`Self::chunk`].
    pub async fn first_chunk_for_token(
        &self,
        key: TokenKey,
        size: u16,
    ) -> Result<Sealed<Vec<Payout>>, RepoError> {
        self.repo.payouts_page_for_token(key, size).await
    }

    /// The chunk of `payouts`, read as at most `size` rows.
    pub fn chunk_of(payouts: Vec<Payout>, size: u16) -> Chunk<PayoutRow, PayoutKey> {
        let next = (payouts.len() == usize::from(size))
            .then(|| payouts.last().map(PayoutKey::of))
            .flatten();
        Chunk {
            rows: payouts.iter().map(Payout::row).collect(),
            next,
        }
    }
}
