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
use crate::payout::{NewPayout, Payout, PayoutKey};

/// Errors of [`PayoutService::record`].
#[derive(Debug, thiserror::Error)]
pub enum RecordPayoutError {
    /// No partner has that id.
    #[error("no partner with that partnerId")]
    UnknownPartner,
    /// The store failed.
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
    /// The service over its ports, clock and randomness (payout ids).
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
    pub async fn record(&self, new: NewPayout) -> Result<Payout, RecordPayoutError> {
        let now = self.clock.now();
        let id = PayoutId::generate_at(self.rng.as_ref(), now);
        let mut tx = self.uow.begin().await?;
        let payout = tx
            .insert_payout(id, &new, now)
            .await?
            .ok_or(RecordPayoutError::UnknownPartner)?;
        let created = DomainEvent::new(new.partner_id.clone(), Event::PayoutCreated { payout: id });
        tx.publish(&[created], now).await?;
        tx.commit().await?;
        Ok(payout)
    }

    /// One chunk of the partner's payouts, newest payout date first, after `after` (see
    /// [`crate::order::OrderService::chunk`]).
    pub async fn chunk(
        &self,
        partner: &PartnerId,
        after: Option<PayoutKey>,
        size: u16,
    ) -> Result<Chunk<Payout, PayoutKey>, RepoError> {
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

    /// The payout with this id of the partner of the token of `key` (extensions §8.2), read with
    /// the token's record in one round trip and sealed until authentication passes.
    pub async fn find_for_token(
        &self,
        key: TokenKey,
        id: PayoutId,
    ) -> Result<Sealed<Option<Payout>>, RepoError> {
        self.repo.payout_for_token(key, id).await
    }

    /// The chunk of `payouts`, read as at most `size` rows.
    pub fn chunk_of(payouts: Vec<Payout>, size: u16) -> Chunk<Payout, PayoutKey> {
        let next = (payouts.len() == usize::from(size))
            .then(|| payouts.last().map(PayoutKey::of))
            .flatten();
        Chunk {
            rows: payouts,
            next,
        }
    }
}

/// The service's rules over the unit-of-work port and the payout repository, with a fixed clock:
/// what it writes, publishes and commits, and how it cuts a listing into chunks.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::account::auth::{AuthService, Presented};
    use crate::account::ports::MockTokenRepo;
    use crate::account::token::TokenPepper;
    use crate::kernel::clock::FixedClock;
    use crate::kernel::random::MockRandom;
    use crate::kernel::uow::BeginsOnce;
    use crate::kernel::values::Money;
    use crate::payout::ports::{MockPayoutRepo, MockPayoutTransaction};
    use futures_util::FutureExt;
    use mockall::Sequence;
    use time::macros::{date, datetime};
    use time::{Date, OffsetDateTime};
    use uuid::Uuid;

    const NOW: OffsetDateTime = datetime!(2026-11-23 12:00 UTC);

    fn acme() -> PartnerId {
        PartnerId::parse("acme").expect("id")
    }

    /// Random bytes that are all `7`: the payout's id is known in advance.
    fn sevens() -> MockRandom {
        let mut rng = MockRandom::new();
        rng.expect_fill().returning(|buf| buf.fill(7));
        rng
    }

    fn the_id() -> PayoutId {
        PayoutId::generate_at(&sevens(), NOW)
    }

    fn service(repo: MockPayoutRepo, tx: Option<MockPayoutTransaction>) -> PayoutService {
        let uow: BeginsOnce<dyn PayoutTransaction> = match tx {
            Some(tx) => BeginsOnce::new(Box::new(tx)),
            None => BeginsOnce::never(),
        };
        PayoutService::new(
            Arc::new(repo),
            Arc::new(uow),
            Arc::new(FixedClock::new(NOW)),
            Arc::new(sevens()),
        )
    }

    fn new_payout() -> NewPayout {
        NewPayout {
            partner_id: acme(),
            payout_date: date!(2026 - 11 - 30),
            amount: Money::from_cents(123_450),
            status: "paid".into(),
            receipt_url: None,
            note: None,
        }
    }

    fn payout(id: PayoutId, payout_date: Date) -> Payout {
        Payout::new(
            id,
            "ops@acme.test".into(),
            date!(2026 - 11 - 23),
            NewPayout {
                payout_date,
                ..new_payout()
            },
        )
    }

    #[test]
    fn recording_inserts_publishes_payout_created_then_commits() {
        let mut seq = Sequence::new();
        let mut tx = MockPayoutTransaction::new();
        tx.expect_insert_payout()
            .withf(|id, new, now| *id == the_id() && *new == new_payout() && *now == NOW)
            .times(1)
            .in_sequence(&mut seq)
            .returning(|id, new, _| {
                Ok(Some(Payout::new(
                    id,
                    "ops@acme.test".into(),
                    date!(2026 - 11 - 23),
                    new.clone(),
                )))
            });
        tx.expect_publish()
            .withf(|events, now| {
                *now == NOW
                    && events
                        == [DomainEvent::new(
                            acme(),
                            Event::PayoutCreated { payout: the_id() },
                        )]
            })
            .times(1)
            .in_sequence(&mut seq)
            .returning(|_, _| Ok(1));
        tx.expect_commit()
            .times(1)
            .in_sequence(&mut seq)
            .returning(|| Ok(()));
        let row = service(MockPayoutRepo::new(), Some(tx))
            .record(new_payout())
            .now_or_never()
            .expect("ready")
            .expect("recorded");
        assert_eq!(row.id(), the_id());
        assert_eq!(row.created_at, date!(2026 - 11 - 23));
        assert_eq!(row.email, "ops@acme.test");
    }

    #[test]
    fn a_payout_of_an_unknown_partner_publishes_and_commits_nothing() {
        let mut tx = MockPayoutTransaction::new();
        tx.expect_insert_payout().returning(|_, _, _| Ok(None));
        tx.expect_publish().never();
        tx.expect_commit().never();
        let r = service(MockPayoutRepo::new(), Some(tx))
            .record(new_payout())
            .now_or_never()
            .expect("ready");
        assert!(matches!(r, Err(RecordPayoutError::UnknownPartner)), "{r:?}");
    }

    #[test]
    fn a_failed_publish_is_not_committed() {
        let mut tx = MockPayoutTransaction::new();
        tx.expect_insert_payout()
            .returning(|id, _, _| Ok(Some(payout(id, date!(2026 - 11 - 30)))));
        tx.expect_publish()
            .returning(|_, _| Err(RepoError::new("outbox down")));
        tx.expect_commit().never();
        let r = service(MockPayoutRepo::new(), Some(tx))
            .record(new_payout())
            .now_or_never()
            .expect("ready");
        assert!(matches!(r, Err(RecordPayoutError::Repo(_))), "{r:?}");
    }

    #[test]
    fn a_full_chunk_names_where_the_next_starts_and_a_short_one_ends_the_listing() {
        let ids = [1, 2, 3].map(|n| PayoutId::from_uuid(Uuid::from_u128(n)));
        let last_key = PayoutKey::of(&payout(ids[1], date!(2026 - 10 - 31)));
        let mut repo = MockPayoutRepo::new();
        repo.expect_payouts_page()
            .withf(|p, after, size| *p == acme() && after.is_none() && *size == 2)
            .times(1)
            .returning(move |_, _, _| {
                Ok(vec![
                    payout(ids[0], date!(2026 - 11 - 30)),
                    payout(ids[1], date!(2026 - 10 - 31)),
                ])
            });
        repo.expect_payouts_page()
            .withf(move |_, after, _| *after == Some(last_key))
            .times(1)
            .returning(move |_, _, _| Ok(vec![payout(ids[2], date!(2026 - 9 - 30))]));
        let svc = service(repo, None);
        let first = svc
            .chunk(&acme(), None, 2)
            .now_or_never()
            .expect("ready")
            .expect("read");
        assert_eq!(first.rows.len(), 2);
        assert_eq!(first.next, Some(last_key));
        let second = svc
            .chunk(&acme(), first.next, 2)
            .now_or_never()
            .expect("ready")
            .expect("read");
        assert_eq!(
            second.rows.iter().map(Payout::id).collect::<Vec<_>>(),
            [ids[2]]
        );
        assert_eq!(second.next, None, "a short chunk is the last");
    }

    #[test]
    fn the_first_chunk_for_a_token_is_read_with_the_token_and_opened_by_authentication() {
        let key_of = |auth: &AuthService, p: &Presented| auth.key(p);
        let clock = Arc::new(FixedClock::new(NOW));
        let auth = AuthService::new(
            Arc::new(MockTokenRepo::new()),
            Some(TokenPepper::new(b"p")),
            clock,
        );
        let header = format!("Bearer pk_live_{}", "K".repeat(43));
        let presented = auth.present(Some(header.as_bytes())).expect("shape");
        let key = key_of(&auth, &presented);
        let mut repo = MockPayoutRepo::new();
        repo.expect_payouts_page_for_token()
            .withf(move |k, size| k.hash.ct_eq(&key.hash) && k.now == NOW && *size == 50)
            .times(1)
            .returning(|_, _| Ok(Sealed::new(None, Vec::new())));
        let sealed = service(repo, None)
            .first_chunk_for_token(key, 50)
            .now_or_never()
            .expect("ready")
            .expect("read");
        // No token had that hash: nothing read with it can be opened.
        assert!(auth.open(&presented, sealed).is_err());
    }
}
