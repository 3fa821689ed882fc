//! Maintenance, every `maintenance_interval`: deliveries whose budget dead workers spent end
//! `failed` (`interrupted`), pending deliveries of disabled endpoints end `failed` (`endpoint
//! disabled`: one written by a request racing the disable would otherwise wait forever), the
//! store's own index of due work is put right where it could hide a pending delivery
//! (`DeliveryRepo::upkeep`), and delivered or failed deliveries past the retention, then events
//! past the events feed's retention that no delivery refers to, are pruned in small batches, so
//! pruning never holds locks the claim needs for long; each batch walks on from where the
//! previous one stopped, oldest first, so a round costs what it deletes (and one look at each
//! event a delivery still keeps).

use std::sync::Arc;

use partner_domain::kernel::clock::Clock;
use partner_domain::webhook::ports::{DeliveryRepo, PruneStep};
use partner_domain::webhook::{ENDPOINT_DISABLED, attempt_budget};

use crate::WorkerConfig;

/// The `lastError` of a delivery whose last budgeted attempt never reported back.
const INTERRUPTED: &str = "interrupted";
/// Deliveries (then events) looked at per statement: each statement walks only its own batch, by
/// index, from where the previous one stopped (`partner-postgres`'s `retention`).
const PRUNE_BATCH: u32 = 500;
/// Statements per walk and round at most (a round never runs unbounded; the next round starts
/// the walks again from the oldest rows).
const PRUNE_STEPS: u32 = 1000;

/// Runs [`round`] every interval, forever (the worker aborts it at shutdown).
pub(crate) async fn run(repo: Arc<dyn DeliveryRepo>, clock: Arc<dyn Clock>, config: WorkerConfig) {
    loop {
        tokio::time::sleep(config.maintenance_interval).await;
        round(repo.as_ref(), clock.as_ref(), &config).await;
    }
}

/// One round of maintenance at the clock's now.
pub(crate) async fn round(repo: &dyn DeliveryRepo, clock: &dyn Clock, c: &WorkerConfig) {
    let now = clock.now();
    match repo
        .fail_exhausted(now, attempt_budget(&c.retry_schedule), INTERRUPTED)
        .await
    {
        Ok(0) => {}
        Ok(n) => tracing::warn!(
            deliveries = n,
            "webhook deliveries ended failed: their last attempt never reported back"
        ),
        Err(e) => tracing::warn!(error = %e, "ending exhausted webhook deliveries failed"),
    }
    match repo.fail_disabled(ENDPOINT_DISABLED).await {
        Ok(0) => {}
        Ok(n) => tracing::info!(
            deliveries = n,
            "pending deliveries of disabled endpoints ended failed (written while the endpoint was being disabled)"
        ),
        Err(e) => tracing::warn!(error = %e, "ending deliveries of disabled endpoints failed"),
    }
    match repo.upkeep().await {
        Ok(0) => {}
        Ok(n) => tracing::warn!(
            entries = n,
            "the store's index of due webhook work was corrected: a delivery could not be found from its due time"
        ),
        Err(e) => {
            tracing::warn!(error = %e, "the upkeep of the store's index of due webhook work failed")
        }
    }
    let before = |retention| {
        time::Duration::try_from(retention)
            .ok()
            .and_then(|r| now.checked_sub(r))
    };
    let (Some(deliveries), Some(events)) = (before(c.retention), before(c.event_retention)) else {
        return;
    };
    // The deliveries first, to the end of their walk: the events walk after them then finds the
    // events whose last delivery this round removed.
    for (what, before) in [(Pruned::Deliveries, deliveries), (Pruned::Events, events)] {
        let mut from = None;
        for _ in 0..PRUNE_STEPS {
            let step = match what {
                Pruned::Deliveries => repo.prune_deliveries(before, from, PRUNE_BATCH).await,
                Pruned::Events => repo.prune_events(before, from, PRUNE_BATCH).await,
            };
            match step {
                Ok(PruneStep { next: None, .. }) => break,
                Ok(PruneStep { next, .. }) => {
                    from = next;
                    tokio::task::yield_now().await;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "pruning webhook deliveries and events failed");
                    return;
                }
            }
        }
    }
}

#[derive(Clone, Copy)]
enum Pruned {
    Deliveries,
    Events,
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use partner_domain::kernel::clock::FixedClock;
    use partner_domain::kernel::error::RepoError;
    use partner_domain::webhook::ports::{MockDeliveryRepo, PruneMark};
    use time::macros::datetime;

    use super::*;

    fn config() -> WorkerConfig {
        WorkerConfig {
            retry_schedule: vec![Duration::from_secs(60), Duration::from_secs(600)],
            timeout: Duration::from_secs(10),
            allow_private: true,
            extra_roots_pem: None,
            poll_interval: Duration::from_secs(1),
            concurrency: 8,
            endpoint_concurrency: 4,
            retention: Duration::from_secs(7 * 86_400),
            event_retention: Duration::from_secs(30 * 86_400),
            maintenance_interval: Duration::from_secs(60),
            disable_after: None,
        }
    }

    #[tokio::test]
    async fn a_round_ends_exhausted_deliveries_and_prunes_past_the_retention_until_none_is_left() {
        let clock = FixedClock::new(datetime!(2026-03-10 12:00 UTC));
        let mut repo = MockDeliveryRepo::new();
        repo.expect_fail_exhausted()
            .withf(|now, budget, error| {
                *now == datetime!(2026-03-10 12:00 UTC) && *budget == 3 && error == "interrupted"
            })
            .times(1)
            .returning(|_, _, _| Ok(2));
        repo.expect_upkeep().times(1).returning(|| Ok(0));
        repo.expect_fail_disabled()
            .withf(|error| error == "endpoint disabled")
            .times(1)
            .returning(|_| Ok(1));
        let mark = |n: u128| PruneMark {
            created_at: datetime!(2026-01-01 0:00 UTC),
            id: uuid::Uuid::from_u128(n),
        };
        // Deliveries: two full steps, each starting where the previous one stopped, then the end.
        let calls = Arc::new(AtomicU32::new(0));
        let seen = calls.clone();
        repo.expect_prune_deliveries()
            .withf(|before, _, batch| *before == datetime!(2026-03-03 12:00 UTC) && *batch == 500)
            .times(3)
            .returning(move |_, from, _| {
                let n = seen.fetch_add(1, Ordering::SeqCst);
                assert_eq!(from, n.checked_sub(1).map(|k| mark(u128::from(k))));
                Ok(PruneStep {
                    deleted: if n < 2 { 500 } else { 7 },
                    next: (n < 2).then(|| mark(u128::from(n))),
                })
            });
        // Events after the deliveries: a step that deleted nothing (every event still referred
        // to) does not end the walk; one that reached the end does.
        let events = Arc::new(AtomicU32::new(0));
        let seen = events.clone();
        repo.expect_prune_events()
            .withf(|before, _, batch| *before == datetime!(2026-02-08 12:00 UTC) && *batch == 500)
            .times(2)
            .returning(move |_, from, _| {
                let n = seen.fetch_add(1, Ordering::SeqCst);
                assert_eq!(from, (n == 1).then(|| mark(9)));
                Ok(PruneStep {
                    deleted: 0,
                    next: (n == 0).then(|| mark(9)),
                })
            });
        round(&repo, &clock, &config()).await;
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert_eq!(events.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_failing_store_stops_the_round_without_retrying_in_a_loop() {
        let clock = FixedClock::new(datetime!(2026-03-10 12:00 UTC));
        let mut repo = MockDeliveryRepo::new();
        repo.expect_fail_exhausted()
            .times(1)
            .returning(|_, _, _| Err(RepoError::new("down")));
        repo.expect_upkeep().times(1).returning(|| Ok(0));
        repo.expect_fail_disabled()
            .times(1)
            .returning(|_| Err(RepoError::new("down")));
        repo.expect_prune_deliveries()
            .times(1)
            .returning(|_, _, _| Err(RepoError::new("down")));
        repo.expect_prune_events().never();
        round(&repo, &clock, &config()).await;
    }
}
