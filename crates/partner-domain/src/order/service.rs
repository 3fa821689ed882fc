//! The order service: idempotent ingest, analytics events, the chunked listing and the
//! commission summary.

use std::sync::Arc;

use time::{Date, OffsetDateTime};

use crate::account::auth::{Sealed, TokenKey};
use crate::events::{DomainEvent, Event};
use crate::kernel::clock::Clock;
use crate::kernel::error::RepoError;
use crate::kernel::ids::AnalyticsEventId;
use crate::kernel::page::Chunk;
use crate::kernel::random::Random;
use crate::kernel::uow::UnitOfWork;
use crate::kernel::values::PartnerId;
use crate::order::ports::{OrderRepo, OrderTransaction};
use crate::order::{
    AnalyticsEvent, CommissionSummary, NewAnalyticsEvent, Order, OrderKey, OrderListing,
};

/// How an order ingest ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OrderIngest {
    /// Stored now (201).
    Created(OrderListing),
    /// The same body was already stored (200).
    Replayed(OrderListing),
}

/// Errors of [`OrderService::ingest`].
#[derive(Debug, thiserror::Error)]
pub enum IngestOrderError {
    /// No partner has the order's `partnerId` (404).
    #[error("no partner with that partnerId")]
    UnknownPartner,
    /// Another order with a different body is stored under that `orderId` (409).
    #[error("another order with a different body is stored under that orderId")]
    Conflict,
    /// The store failed.
    #[error(transparent)]
    Repo(#[from] RepoError),
}

/// Errors of [`OrderService::record_event`].
#[derive(Debug, thiserror::Error)]
pub enum RecordEventError {
    /// No partner has the event's `partnerId` (404).
    #[error("no partner with that partnerId")]
    UnknownPartner,
    /// The event is one the contract rules out ([`AnalyticsEvent::new`], 400).
    #[error(transparent)]
    Invalid(#[from] crate::kernel::values::ValueError),
    /// The store failed.
    #[error(transparent)]
    Repo(#[from] RepoError),
}

/// Order ingest, listing and the commission summary.
#[derive(Debug, Clone)]
pub struct OrderService {
    repo: Arc<dyn OrderRepo>,
    uow: Arc<dyn UnitOfWork<dyn OrderTransaction>>,
    clock: Arc<dyn Clock>,
    rng: Arc<dyn Random>,
}

impl OrderService {
    /// The service over its store, the unit of work of ingest, the clock and the randomness
    /// ids are drawn from.
    pub fn new(
        repo: Arc<dyn OrderRepo>,
        uow: Arc<dyn UnitOfWork<dyn OrderTransaction>>,
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

    /// Stores an order, idempotently: the same body again is a replay, a different body under
    /// the same `orderId` a conflict. `order.created` is written with the first insert only.
    pub async fn ingest(&self, order: Order) -> Result<OrderIngest, IngestOrderError> {
        let now = self.clock.now();
        let mut tx = self.uow.begin().await?;
        if !tx.partner_exists(&order.partner_id).await? {
            return Err(IngestOrderError::UnknownPartner);
        }
        let inserted = tx.insert_order(&order, now).await?;
        if inserted {
            let created = DomainEvent::new(
                order.partner_id.clone(),
                Event::OrderCreated {
                    order: order.order_id.clone(),
                    source: order.source.clone(),
                },
            );
            tx.publish(&[created], now).await?;
        }
        let stored = tx
            .order_listing(&order.order_id)
            .await?
            .ok_or_else(|| RepoError::new("an order vanished inside its transaction"))?;
        tx.commit().await?;
        match (inserted, stored) {
            (true, l) => Ok(OrderIngest::Created(l)),
            (false, l) if l.order == order => Ok(OrderIngest::Replayed(l)),
            (false, _) => Err(IngestOrderError::Conflict),
        }
    }

    /// Records an analytics event (idempotent per run for `order_completed`).
    pub async fn record_event(&self, new: NewAnalyticsEvent) -> Result<(), RecordEventError> {
        let now = self.clock.now();
        let ev = AnalyticsEvent::new(AnalyticsEventId::generate_at(self.rng.as_ref(), now), new)?;
        if self.repo.insert_analytics_event(&ev, now).await? {
            Ok(())
        } else {
            Err(RecordEventError::UnknownPartner)
        }
    }

    /// One chunk of the partner's orders, newest first, after `after`; the answer lists the
    /// whole history chunk by chunk (`next` is `None` after the last one), so memory stays flat
    /// however long it is.
    pub async fn chunk(
        &self,
        partner: &PartnerId,
        after: Option<OrderKey>,
        size: u16,
    ) -> Result<Chunk<OrderListing, OrderKey>, RepoError> {
        let orders = self.repo.orders_page(partner, after, size).await?;
        Ok(Self::chunk_of(orders, size))
    }

    /// The first [`Self::chunk`] for the partner of the token of `key`, read with the token's
    /// record in one round trip and sealed until authentication passes; [`Self::chunk_of`]
    /// makes the chunk of what it opens to. The following chunks are read after
    /// authentication, with [`Self::chunk`].
    pub async fn first_chunk_for_token(
        &self,
        key: TokenKey,
        size: u16,
    ) -> Result<Sealed<Vec<OrderListing>>, RepoError> {
        self.repo.orders_page_for_token(key, size).await
    }

    /// The order of the listing with this id (a simulated one too) of the partner of the token
    /// of `key` (extensions §8.2), read with the token's record in one round trip and sealed
    /// until authentication passes. `None` without a read for an id no order can have.
    pub async fn find_for_token(
        &self,
        key: TokenKey,
        order_id: &str,
    ) -> Result<Sealed<Option<OrderListing>>, RepoError> {
        self.repo.order_for_token(key, order_id).await
    }

    /// The chunk of `orders`, read as at most `size` rows.
    pub fn chunk_of(orders: Vec<OrderListing>, size: u16) -> Chunk<OrderListing, OrderKey> {
        let next = (orders.len() == usize::from(size))
            .then(|| orders.last().map(|l| OrderKey::of(&l.order)))
            .flatten();
        Chunk { rows: orders, next }
    }

    /// Real orders and commission of the days `from..=to` (UTC, by `createdDate`).
    pub async fn commission_summary(
        &self,
        partner: &PartnerId,
        from: Date,
        to: Date,
    ) -> Result<CommissionSummary, RepoError> {
        let start = from.midnight().assume_utc();
        let end = to.next_day().map_or(
            OffsetDateTime::new_utc(Date::MAX, time::Time::MIDNIGHT),
            |d| d.midnight().assume_utc(),
        );
        let orders = self.repo.orders_between(partner, start, end).await?;
        Ok(CommissionSummary::of(&orders))
    }
}

/// Order ingest over the unit-of-work port: `order.created` goes out with the first insert only.
#[cfg(test)]
mod service_tests {
    use super::*;
    use crate::kernel::clock::FixedClock;
    use crate::kernel::random::SystemRandom;
    use crate::kernel::uow::BeginsOnce;
    use crate::kernel::values::Money;
    use crate::order::ports::MockOrderRepo;
    use crate::order::ports::MockOrderTransaction;
    use futures_util::FutureExt;
    use time::macros::datetime;

    fn order() -> Order {
        Order {
            order_id: "A1".into(),
            partner_id: PartnerId::parse("acme").expect("id"),
            sub_id: None,
            created_date: datetime!(2026-11-21 9:00 UTC),
            product: "Tirzepatide".into(),
            amount: Money::from_cents(49900),
            commission: Money::from_cents(100),
            status: "shipped".into(),
            is_test: false,
            source: "pharmacy".into(),
            customer_name: None,
            customer_email: None,
        }
    }

    fn ingest(tx: MockOrderTransaction, o: Order) -> Result<OrderIngest, IngestOrderError> {
        OrderService::new(
            Arc::new(MockOrderRepo::new()),
            Arc::new(BeginsOnce::<dyn OrderTransaction>::new(Box::new(tx))),
            Arc::new(FixedClock::new(datetime!(2026-11-23 12:00 UTC))),
            Arc::new(SystemRandom::new()),
        )
        .ingest(o)
        .now_or_never()
        .expect("ready")
    }

    /// A transaction whose store already holds `existing` (or nothing).
    fn tx(existing: Option<Order>, publishes: usize) -> MockOrderTransaction {
        let mut tx = MockOrderTransaction::new();
        tx.expect_partner_exists().returning(|_| Ok(true));
        let inserted = existing.is_none();
        tx.expect_insert_order().returning(move |_, _| Ok(inserted));
        tx.expect_publish()
            .withf(|events, _| {
                matches!(
                    events,
                    [DomainEvent {
                        event: Event::OrderCreated { .. },
                        ..
                    }]
                )
            })
            .times(publishes)
            .returning(|_, _| Ok(1));
        let stored = existing.unwrap_or_else(order);
        tx.expect_order_listing().returning(move |_| {
            Ok(Some(OrderListing {
                order: stored.clone(),
                sub_account: String::new(),
            }))
        });
        tx.expect_commit().times(1).returning(|| Ok(()));
        tx
    }

    #[test]
    fn a_new_order_is_created_and_announced() {
        let r = ingest(tx(None, 1), order());
        assert!(matches!(r, Ok(OrderIngest::Created(_))));
    }

    #[test]
    fn the_same_body_again_is_a_replay_and_announces_nothing() {
        let r = ingest(tx(Some(order()), 0), order());
        assert!(matches!(r, Ok(OrderIngest::Replayed(_))));
    }

    #[test]
    fn another_body_under_the_same_id_is_a_conflict() {
        let mut other = order();
        other.amount = Money::from_cents(1);
        let r = ingest(tx(Some(other), 0), order());
        assert!(matches!(r, Err(IngestOrderError::Conflict)));
    }

    #[test]
    fn an_unknown_partner_writes_nothing() {
        let mut t = MockOrderTransaction::new();
        t.expect_partner_exists().returning(|_| Ok(false));
        t.expect_insert_order().never();
        t.expect_commit().never();
        assert!(matches!(
            ingest(t, order()),
            Err(IngestOrderError::UnknownPartner)
        ));
    }

    fn service(repo: MockOrderRepo) -> OrderService {
        OrderService::new(
            Arc::new(repo),
            Arc::new(BeginsOnce::<dyn OrderTransaction>::never()),
            Arc::new(FixedClock::new(datetime!(2026-11-23 12:00 UTC))),
            Arc::new(SystemRandom::new()),
        )
    }

    #[test]
    fn an_analytics_event_is_recorded_at_the_clocks_instant_for_a_known_partner() {
        let new = NewAnalyticsEvent {
            run_id: "run42".into(),
            partner_id: PartnerId::parse("acme").expect("id"),
            sub_id: None,
            event: "page_view".into(),
            product: None,
            amount: None,
            occurred_at: datetime!(2026-11-21 10:00 UTC),
            test_source: crate::lead::TestSource::Simulation,
        };
        let mut repo = MockOrderRepo::new();
        let mut known = true;
        repo.expect_insert_analytics_event()
            .withf(|ev, now| ev.run_id() == "run42" && *now == datetime!(2026-11-23 12:00 UTC))
            .times(2)
            .returning(move |_, _| {
                let answer = known;
                known = false;
                Ok(answer)
            });
        let svc = service(repo);
        assert!(
            svc.record_event(new.clone())
                .now_or_never()
                .expect("ready")
                .is_ok()
        );
        assert!(matches!(
            svc.record_event(new).now_or_never().expect("ready"),
            Err(RecordEventError::UnknownPartner)
        ));
    }

    #[test]
    fn the_commission_summary_reads_whole_utc_days_and_counts_real_orders_only() {
        let mut repo = MockOrderRepo::new();
        repo.expect_orders_between()
            .withf(|p, from, to| {
                p.as_str() == "acme"
                    && *from == datetime!(2026-11-01 0:00 UTC)
                    && *to == datetime!(2026-12-01 0:00 UTC)
            })
            .times(1)
            .returning(|_, _, _| {
                let mut test = order();
                test.is_test = true;
                Ok(vec![order(), test, order()])
            });
        let s = service(repo)
            .commission_summary(
                &PartnerId::parse("acme").expect("id"),
                time::macros::date!(2026 - 11 - 01),
                time::macros::date!(2026 - 11 - 30),
            )
            .now_or_never()
            .expect("ready")
            .expect("summary");
        assert_eq!(
            (s.order_count, s.commission_total, s.excluded_test_orders),
            (2, Money::from_cents(200), 1)
        );
    }

    #[test]
    fn a_chunk_names_the_next_start_when_full() {
        let mut repo = MockOrderRepo::new();
        repo.expect_orders_page().returning(|_, _, size| {
            Ok((0..size)
                .map(|n| OrderListing {
                    order: Order {
                        order_id: format!("A{n}"),
                        ..order()
                    },
                    sub_account: "Desk".into(),
                })
                .collect())
        });
        let chunk = service(repo)
            .chunk(&PartnerId::parse("acme").expect("id"), None, 2)
            .now_or_never()
            .expect("ready")
            .expect("chunk");
        assert_eq!(chunk.rows.len(), 2);
        assert!(chunk.rows.iter().all(|r| r.sub_account == "Desk"));
        assert_eq!(chunk.next.map(|k| k.order_id), Some("A1".to_owned()));
    }
}
