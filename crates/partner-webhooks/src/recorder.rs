//! The recorder: attempts' outcomes written in batches, each applied only while its delivery still
//! holds the lease it was claimed under (the store's fencing). A slot is freed when its attempt
//! ends, not when its outcome is written, so the database writes one statement per batch instead
//! of one per delivery.

use std::sync::Arc;
use std::time::Duration;

use partner_domain::webhook::AttemptOutcome;
use partner_domain::webhook::ports::DeliveryRepo;
use tokio::sync::mpsc;

/// Outcomes recorded in one statement at most.
const RECORD_BATCH: usize = 1000;
/// How long the recorder waits for more outcomes after the first of a batch.
const RECORD_LINGER: Duration = Duration::from_millis(5);
/// Tries of one batch before it is left to its leases.
const RECORD_TRIES: u32 = 4;
/// The wait before the second try of a batch (then twice, three times as long).
const RECORD_BACKOFF: Duration = Duration::from_millis(200);

/// Records outcomes in batches until every sender is gone: whatever arrived while the previous
/// batch was being written, and for a few milliseconds after the first (an outcome waits a little;
/// the slot it held is free already).
pub(crate) async fn record_loop(
    repo: Arc<dyn DeliveryRepo>,
    mut rx: mpsc::UnboundedReceiver<AttemptOutcome>,
    disable_after: Option<Duration>,
) {
    let mut batch = Vec::with_capacity(RECORD_BATCH);
    while rx.recv_many(&mut batch, RECORD_BATCH).await > 0 {
        if batch.len() < RECORD_BATCH {
            tokio::time::sleep(RECORD_LINGER).await;
            while batch.len() < RECORD_BATCH {
                match rx.try_recv() {
                    Ok(o) => batch.push(o),
                    Err(_) => break,
                }
            }
        }
        record(repo.as_ref(), &batch, disable_after, RECORD_BACKOFF).await;
        batch.clear();
    }
}

/// Writes one batch, retrying a failed write a few times, `backoff` apart and longer each time.
async fn record(
    repo: &dyn DeliveryRepo,
    batch: &[AttemptOutcome],
    disable_after: Option<Duration>,
    backoff: Duration,
) {
    let mut tries = 1u32;
    loop {
        match repo.record(batch, disable_after).await {
            Ok(applied) => {
                let stale = u64::try_from(batch.len())
                    .unwrap_or(u64::MAX)
                    .saturating_sub(applied);
                if stale > 0 {
                    tracing::info!(
                        stale,
                        "webhook outcomes dropped: their lease had passed to another worker"
                    );
                }
                return;
            }
            Err(e) if tries < RECORD_TRIES => {
                tracing::warn!(error = %e, tries, "recording webhook outcomes failed; retrying");
                tokio::time::sleep(backoff * tries).await;
                tries += 1;
            }
            Err(e) => {
                // The leases run out and the deliveries are attempted again: at-least-once.
                tracing::warn!(error = %e, outcomes = batch.len(), "recording webhook outcomes failed; left to their leases");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use partner_domain::kernel::error::RepoError;
    use partner_domain::kernel::ids::DeliveryId;
    use partner_domain::webhook::NextStep;
    use partner_domain::webhook::ports::MockDeliveryRepo;
    use time::macros::datetime;
    use uuid::Uuid;

    use super::*;

    fn outcome(n: u128) -> AttemptOutcome {
        AttemptOutcome {
            id: DeliveryId::from_uuid(Uuid::from_u128(n)),
            lease: Uuid::from_u128(n),
            row: partner_domain::webhook::RowHint::NONE,
            at: datetime!(2026-01-01 0:00 UTC),
            status_code: Some(200),
            error: None,
            duration_ms: Some(3),
            next: NextStep::Delivered,
        }
    }

    #[tokio::test]
    async fn outcomes_that_arrive_together_are_written_in_one_statement() {
        let mut repo = MockDeliveryRepo::new();
        repo.expect_record()
            .withf(|batch, disable_after| batch.len() == 3 && disable_after.is_none())
            .times(1)
            .returning(|batch, _| Ok(batch.len() as u64));
        let (tx, rx) = mpsc::unbounded_channel();
        for n in 1..=3 {
            tx.send(outcome(n)).expect("open");
        }
        drop(tx);
        record_loop(Arc::new(repo), rx, None).await;
    }

    #[tokio::test]
    async fn a_failed_write_is_retried_then_left_to_the_leases() {
        let mut repo = MockDeliveryRepo::new();
        let mut seq = mockall::Sequence::new();
        repo.expect_record()
            .times(1)
            .in_sequence(&mut seq)
            .returning(|_, _| Err(RepoError::new("down")));
        repo.expect_record()
            .times(1)
            .in_sequence(&mut seq)
            .returning(|_, _| Ok(0));
        record(&repo, &[outcome(1)], None, Duration::from_millis(1)).await;

        let mut down = MockDeliveryRepo::new();
        down.expect_record()
            .times(RECORD_TRIES as usize)
            .returning(|_, _| Err(RepoError::new("down")));
        record(&down, &[outcome(1)], None, Duration::from_millis(1)).await;
    }
}
