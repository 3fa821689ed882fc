//! The endpoint-row check before every attempt (issue 23, N9b''): a claimed delivery is sent only
//! once a read of its endpoint's row, begun after the attempt was ready to send (or, shared, at
//! most [`SHARE_WITHIN`] before it asked: below), finds the endpoint enabled and at the version
//! the claim read. The store's change announcements stay the fast path (a claim they report
//! stale is given back without a read, and they wake the claimer), but a late or lost
//! announcement (a slow or silently dead `LISTEN` connection) can no longer let a delivery go out
//! with the URL, secrets or header of an endpoint whose change was answered before the read
//! began.
//!
//! The reads are shared: attempts of one endpoint (and claimed version) that are ready while no
//! read of it has begun since share one read (single flight). At most one read per endpoint and
//! version runs at a time; an attempt ready while one runs (begun before it was ready; its
//! answer is shared only once it is in, within [`SHARE_WITHIN`] of its start) waits for the
//! next, which begins as soon as the running one ends and is shared by every attempt that became
//! ready meanwhile. Against a read per attempt begun at once, this made half as many reads in the
//! benchmark's drains (0.55 per delivery), with no difference in throughput the noisy machine
//! could show (docs/performance-history.md).
//!
//! An answer is also shared afterwards, for half as long as a read of the attempt's own may vouch
//! for its send ([`SHARE_WITHIN`]; [`CHECKED_WITHIN`] from the read's start): an attempt that asks
//! while the last read of its endpoint and version began at most that long ago takes that answer,
//! dated from that read's start, instead of waiting for a read of its own. The worker then sends
//! only if its slot comes within [`CHECKED_WITHIN`] of that start, so a change answered before the
//! send can go unseen for no longer than with a read of its own or with the claim's read
//! (docs/decisions.md, "A recent check's answer is shared"). A drain to one endpoint then reads the
//! row about once every few milliseconds instead of for every other delivery.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use partner_domain::kernel::error::RepoError;
use partner_domain::kernel::ids::EndpointId;
use partner_domain::webhook::ports::{DeliveryRepo, EndpointCheck};
use tokio::sync::watch;

/// An endpoint and the version of its row a claim read.
type Key = (EndpointId, i64);

/// How long after a read began its answer may still vouch for a send (the worker's bound from a
/// check to the slot, and from the claim's read to the slot): a change answered up to this long
/// (plus the read's own round trip) before the send may go unseen, as a change answered during
/// the read itself always could.
pub(crate) const CHECKED_WITHIN: Duration = Duration::from_millis(5);

/// How long after a read began its answer is shared with attempts that ask ([`Checks::check`]):
/// half of [`CHECKED_WITHIN`], so that an attempt sharing it has the other half to get its slot
/// before the answer is too old to vouch for the send (past the bound the row is read again,
/// inside the slot, which costs the endpoint a send's worth of time).
const SHARE_WITHIN: Duration = Duration::from_micros(2_500);
// A shared answer must leave time to get the slot: at or past the bound, the check in the slot
// could take back the very answer that was just too old.
const _: () = assert!(SHARE_WITHIN.as_micros() < CHECKED_WITHIN.as_micros());

/// A check's answer: whether the endpoint is enabled and at the version read, and the instant the
/// answer vouches from (the attempt's ask for a read begun after it; the read's start for a
/// recent answer it shared). The send must follow within [`CHECKED_WITHIN`] of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Answer {
    pub(crate) unchanged: bool,
    pub(crate) since: Instant,
}

/// The last answer read of each endpoint and version (when its read began, and the answer), kept
/// while it may be shared ([`SHARE_WITHIN`]).
type Recent = Arc<Mutex<HashMap<Key, (Instant, bool)>>>;

/// Past this many endpoints and versions, answers too old to be shared are dropped.
const RECENT_KEEP: usize = 256;

/// One read's answer, once it has one: when the read was sent (once it held its connection), and
/// whether the endpoint is unchanged (`None`: the read failed).
type Flight = watch::Receiver<Option<(Instant, Option<bool>)>>;

/// The reads of one endpoint and version.
#[derive(Debug, Default)]
struct Flights {
    /// Reads under way (one at most, but for a task that died mid-read).
    running: usize,
    /// The read begun last.
    last: Option<Flight>,
    /// The next read, not begun yet: attempts ready now join it.
    queued: Option<Flight>,
}

type Table = Arc<Mutex<HashMap<Key, Flights>>>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One read of an endpoint's row ([`DeliveryRepo::endpoint_unchanged`]).
type Read = Arc<
    dyn Fn(Key) -> Pin<Box<dyn Future<Output = Result<EndpointCheck, RepoError>> + Send>>
        + Send
        + Sync,
>;

/// How old a check's answer may be, counted from the moment its read was sent (the statement
/// sent for it, after any read ahead of it ended and once it held a connection of the pool) to
/// the moment the attempt takes the answer, and
/// still vouch for the send. The read's snapshot is taken between its beginning and its answer,
/// so a change answered before the send can have gone unseen only if it was answered within this
/// (and the moments from taking the answer to the write) before the send, however slow or
/// stalled the worker's link from PostgreSQL (issue 23, N9d: with the link slowed 0.3 s, changes
/// answered 0.16-0.39 s before a send went unseen; with an answer held 9 s, one answered 8.9 s
/// before). Counted from the read's beginning, not the attempt's ask (N13, attack6: counting the
/// wait for the read ahead made a worker 20 ms away from PostgreSQL, one way, deliver almost
/// nothing): a read begun after the ask is recent by construction. Nor does the wait for a pooled
/// connection count (N13, attack7: with six busy endpoints and the worker's share of the default
/// pool, that wait made a worker 12-15 ms from PostgreSQL deliver a tenth of what main did); the
/// repository reports when it sent the read ([`EndpointCheck::sent`]). A healthy read answers within
/// a millisecond; 50 ms is a round trip of 25 ms each way, past which the worker gives deliveries
/// back rather than sends them (docs/operator-guide.md: keep workers near the database).
pub(crate) const FRESH_FOR: Duration = Duration::from_millis(50);

/// How long an attempt waits for a read's answer (the read ahead of it, then its own) before it
/// asks again: a read stuck on a frozen link does not hold the attempt for the pool's bound.
const WAIT_FOR: Duration = Duration::from_millis(250);

/// How many times a late answer is asked for again (a new read, begun after the ask) before the
/// delivery is given back unattempted: a late answer is usually a moment's load, not a slow link.
pub(crate) const LATE_RETRIES: usize = 2;

/// The checks of a worker.
pub(crate) struct Checks {
    read: Read,
    flights: Table,
    recent: Recent,
    /// [`FRESH_FOR`], but in tests.
    fresh_for: Duration,
    /// [`SHARE_WITHIN`], but in tests.
    share_within: Duration,
}

impl std::fmt::Debug for Checks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checks")
            .field("flights", &lock(&self.flights).len())
            .finish()
    }
}

impl Checks {
    pub(crate) fn new(repo: Arc<dyn DeliveryRepo>) -> Self {
        Self::reading(Arc::new(move |(id, version)| {
            let repo = repo.clone();
            Box::pin(async move { repo.endpoint_unchanged(id, version).await })
        }))
    }

    fn reading(read: Read) -> Self {
        Self {
            read,
            flights: Table::default(),
            recent: Recent::default(),
            fresh_for: FRESH_FOR,
            share_within: SHARE_WITHIN,
        }
    }

    /// Whether `endpoint` is still enabled and at `version`: the answer of the last read of its
    /// row when that read began at most [`SHARE_WITHIN`] ago, else of a read begun after this
    /// call; `None` when the read failed (logged; the delivery is given back, not sent). An
    /// answer later than [`FRESH_FOR`] after it was asked for vouches for nothing: it is asked
    /// for again, [`LATE_RETRIES`] times at most, and then this is `None` as well.
    pub(crate) async fn check(&self, endpoint: EndpointId, version: i64) -> Option<Answer> {
        if let Some(shared) = self.shared((endpoint, version)) {
            return Some(shared);
        }
        for _ in 0..=LATE_RETRIES {
            let asked = Instant::now();
            let mut flight = self.join((endpoint, version));
            let answer = tokio::time::timeout(
                self.fresh_for.max(WAIT_FOR),
                flight.wait_for(Option::is_some),
            )
            .await
            .ok()
            .and_then(|answer| answer.ok().and_then(|answer| *answer));
            metrics::histogram!("webhook_check_duration_seconds")
                .record(asked.elapsed().as_secs_f64());
            if let Some((sent, unchanged)) = answer {
                // Its age taken now, when the attempt acts on it (a task polled late counts).
                let age = sent.elapsed();
                if age <= self.fresh_for {
                    tracing::trace!(endpoint = %endpoint, us = age.as_micros(), "a webhook endpoint's row check answered");
                    return unchanged.map(|unchanged| Answer {
                        unchanged,
                        since: asked,
                    });
                }
            }
            metrics::counter!("webhook_checks_late_total").increment(1);
        }
        tracing::warn!(endpoint = %endpoint, fresh_ms = self.fresh_for.as_millis(), tries = LATE_RETRIES + 1, "a webhook endpoint's row check answered too late to vouch for the send every time; given back");
        None
    }

    /// Whether `endpoint` is unchanged, as a read begun after the call would tell
    /// ([`Self::check`] without the instant it vouches from): for tests.
    #[cfg(test)]
    pub(crate) async fn unchanged(&self, endpoint: EndpointId, version: i64) -> Option<bool> {
        self.check(endpoint, version).await.map(|a| a.unchanged)
    }

    /// The last answer of `key`, when its read began at most `share_within` ago (and not longer
    /// than an answer may be old at all).
    fn shared(&self, key: Key) -> Option<Answer> {
        let &(since, unchanged) = lock(&self.recent).get(&key)?;
        (since.elapsed() <= self.share_within.min(self.fresh_for))
            .then_some(Answer { unchanged, since })
    }

    /// The read this caller waits for: the next one, not begun yet (a new one when there is
    /// none). It begins in a task of its own, once the read begun before it ended; attempts
    /// ready until then join it.
    fn join(&self, key: Key) -> Flight {
        let mut table = lock(&self.flights);
        let flights = table.entry(key).or_default();
        if let Some(queued) = &flights.queued {
            return queued.clone();
        }
        let (tx, rx) = watch::channel(None);
        flights.queued = Some(rx.clone());
        let behind = flights.last.clone().filter(|_| flights.running > 0);
        drop(table);
        let read = self.read.clone();
        let table = self.flights.clone();
        let recent = self.recent.clone();
        let share_within = self.share_within;
        // A task of its own: the read and its answer do not depend on any one waiter.
        tokio::spawn(async move {
            if let Some(mut running) = behind {
                // Ends with an answer, or without one when its task died: either way it is over.
                let _ = running.wait_for(Option::is_some).await;
            }
            if let Some(f) = lock(&table).get_mut(&key) {
                // Begun: from now on, attempts ready join the next read.
                f.last = f.queued.take();
                f.running += 1;
            }
            metrics::counter!("webhook_check_reads_total").increment(1);
            let (sent, unchanged) = match read(key).await {
                Ok(check) => {
                    let mut recent = lock(&recent);
                    if recent.len() >= RECENT_KEEP {
                        recent.retain(|_, (since, _)| since.elapsed() <= share_within);
                    }
                    let last = recent.entry(key).or_insert((check.sent, check.unchanged));
                    if last.0 <= check.sent {
                        *last = (check.sent, check.unchanged);
                    }
                    (check.sent, Some(check.unchanged))
                }
                Err(e) => {
                    // Not sent: given back, due now, and checked again when claimed again.
                    tracing::warn!(error = %e, endpoint = %key.0, "checking a webhook endpoint's row failed");
                    (Instant::now(), None)
                }
            };
            {
                let mut table = lock(&table);
                if let Some(f) = table.get_mut(&key) {
                    f.running = f.running.saturating_sub(1);
                    if f.running == 0 && f.queued.is_none() {
                        table.remove(&key);
                    }
                }
            }
            let _ = tx.send(Some((sent, unchanged)));
        });
        rx
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use tokio::sync::Semaphore;

    use super::*;

    fn id(n: u128) -> EndpointId {
        EndpointId::from_uuid(uuid::Uuid::from_u128(n))
    }

    /// Checks whose reads each wait for a permit of `gate` and count themselves; an endpoint is
    /// unchanged at version 1 only.
    fn gated(gate: Arc<Semaphore>, reads: Arc<AtomicUsize>) -> Checks {
        let mut checks = Checks::reading(Arc::new(move |(_, version)| {
            reads.fetch_add(1, Ordering::SeqCst);
            let gate = gate.clone();
            Box::pin(async move {
                let sent = Instant::now();
                gate.acquire().await.expect("gate").forget();
                Ok(EndpointCheck {
                    unchanged: version == 1,
                    sent,
                })
            })
        }));
        // These tests are about sharing, not lateness: a loaded machine must not fail them.
        checks.fresh_for = Duration::from_secs(30);
        checks
    }

    async fn settle() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    /// Attempts ready while a read runs do not share it (it began before they were ready): they
    /// share the next one, which begins once it ends.
    #[tokio::test]
    async fn attempts_share_a_read_only_if_it_began_after_they_were_ready() {
        let gate = Arc::new(Semaphore::new(0));
        let reads = Arc::new(AtomicUsize::new(0));
        let checks = Arc::new(gated(gate.clone(), reads.clone()));
        let check = |endpoint, version| {
            let c = checks.clone();
            tokio::spawn(async move { c.unchanged(endpoint, version).await })
        };
        let first = check(id(1), 1);
        settle().await;
        assert_eq!(reads.load(Ordering::SeqCst), 1, "the first read began");
        let later: Vec<_> = (0..3).map(|_| check(id(1), 1)).collect();
        settle().await;
        assert_eq!(reads.load(Ordering::SeqCst), 1, "the next read waits");
        gate.add_permits(1);
        assert_eq!(first.await.expect("first"), Some(true));
        settle().await;
        assert_eq!(reads.load(Ordering::SeqCst), 2, "one read for the three");
        let last = check(id(1), 1);
        settle().await;
        assert_eq!(reads.load(Ordering::SeqCst), 2, "queued behind the second");
        gate.add_permits(1);
        for l in later {
            assert_eq!(l.await.expect("later"), Some(true));
        }
        gate.add_permits(1);
        assert_eq!(last.await.expect("last"), Some(true));
        assert_eq!(reads.load(Ordering::SeqCst), 3);
        assert!(lock(&checks.flights).is_empty(), "nothing left behind");
        // Another version, another endpoint: reads of their own.
        gate.add_permits(2);
        assert_eq!(
            checks.unchanged(id(1), 2).await,
            Some(false),
            "changed since version 2 was read"
        );
        assert_eq!(checks.unchanged(id(2), 1).await, Some(true));
        assert_eq!(reads.load(Ordering::SeqCst), 5);
    }

    /// An answer whose read began at most `share_within` ago is shared with attempts that ask
    /// afterwards, dated from that read's start (the worker's bound to the send counts from
    /// there); past it, or for another version, a read of their own. A failed read is not
    /// shared.
    #[tokio::test]
    async fn a_recent_answer_is_shared_dated_from_its_reads_start_then_read_again() {
        let reads = Arc::new(AtomicUsize::new(0));
        let mut checks = delayed(&[0], reads.clone());
        checks.share_within = Duration::from_millis(200);
        // The sharing is what is tested, not lateness: a loaded machine must not fail it.
        checks.fresh_for = Duration::from_secs(30);
        let first = checks.check(id(1), 1).await.expect("answered");
        assert!(first.unchanged);
        assert_eq!(reads.load(Ordering::SeqCst), 1);
        tokio::time::sleep(Duration::from_millis(5)).await;
        let before = Instant::now();
        let shared = checks.check(id(1), 1).await.expect("shared");
        assert_eq!(reads.load(Ordering::SeqCst), 1, "no read of its own");
        assert!(
            shared.since >= first.since && shared.since < before,
            "dated from the read's start, not from this ask"
        );
        assert_eq!(checks.unchanged(id(1), 2).await, Some(true));
        assert_eq!(
            reads.load(Ordering::SeqCst),
            2,
            "another version: its own read"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(checks.unchanged(id(1), 1).await, Some(true));
        assert_eq!(
            reads.load(Ordering::SeqCst),
            3,
            "too old to share: read again"
        );

        let failing = Checks::reading(Arc::new(|_| {
            Box::pin(async { Err(RepoError::unavailable("connection refused")) })
        }));
        assert_eq!(failing.unchanged(id(1), 1).await, None);
        assert!(
            failing.shared((id(1), 1)).is_none(),
            "a failure is not shared"
        );
    }

    /// A read that fails vouches for nothing (the worker gives the delivery back).
    #[tokio::test]
    async fn a_failed_read_is_a_changed_endpoint() {
        let checks = Checks::reading(Arc::new(|_| {
            Box::pin(async { Err(RepoError::unavailable("connection refused")) })
        }));
        assert_eq!(checks.unchanged(id(1), 1).await, None);
        assert!(lock(&checks.flights).is_empty());
    }

    /// Checks whose reads answer "unchanged" after `delays[n]` for the `n`th read (the last
    /// delay for every later one), counting them in `reads`.
    fn delayed(delays: &'static [u64], reads: Arc<AtomicUsize>) -> Checks {
        Checks::reading(Arc::new(move |_| {
            let n = reads.fetch_add(1, Ordering::SeqCst);
            let ms = delays.get(n).or(delays.last()).copied().unwrap_or(0);
            Box::pin(async move {
                let sent = Instant::now();
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok(EndpointCheck {
                    unchanged: true,
                    sent,
                })
            })
        }))
    }

    /// Issue 23, N9d: an answer that arrives later than `fresh_for` after the ask vouches for
    /// nothing (the link from PostgreSQL may have held it while the endpoint changed): it is
    /// asked for again by a read begun after the new ask, which vouches when it is timely; when
    /// every one of the `1 + LATE_RETRIES` asks is answered late, the check is `None` (the
    /// delivery is given back).
    #[tokio::test]
    async fn n9d_a_late_answer_is_asked_again_and_vouches_only_when_timely() {
        // The first read answers after 150 ms: late (100 ms), asked again at 100 ms; the second
        // begins when the first ends (single flight) and answers at once, 50 ms after its ask.
        let reads = Arc::new(AtomicUsize::new(0));
        let mut checks = delayed(&[150, 0], reads.clone());
        checks.fresh_for = Duration::from_millis(100);
        assert_eq!(
            checks.unchanged(id(1), 1).await,
            Some(true),
            "the timely one"
        );
        assert_eq!(reads.load(Ordering::SeqCst), 2);

        // Every read answers after 250 ms: late each time, given up after the last ask.
        let reads = Arc::new(AtomicUsize::new(0));
        let mut checks = delayed(&[250], reads.clone());
        checks.fresh_for = Duration::from_millis(100);
        let asked = Instant::now();
        assert_eq!(checks.unchanged(id(1), 1).await, None, "late every time");
        let took = asked.elapsed();
        assert!(
            took >= Duration::from_millis(300) && took < Duration::from_millis(3000),
            "three asks, each waiting for a late answer: {took:?}"
        );
        assert!((1..=3).contains(&reads.load(Ordering::SeqCst)));

        // Answers within the bound vouch on the first ask.
        let reads = Arc::new(AtomicUsize::new(0));
        let mut checks = delayed(&[20], reads.clone());
        checks.fresh_for = Duration::from_millis(100);
        assert_eq!(checks.unchanged(id(1), 1).await, Some(true));
        assert_eq!(reads.load(Ordering::SeqCst), 1);
    }

    /// Issue 23, N13 (attack6): the answer's age is counted from its read's beginning, not from
    /// the attempt's ask. An attempt ready while a slow read runs waits for it and then for its
    /// own read (begun after it was ready); that read, answered quickly, vouches although the
    /// attempt asked longer ago than the bound (counting from the ask, a worker a few
    /// milliseconds from PostgreSQL delivered almost nothing).
    #[tokio::test]
    async fn n13_an_answer_is_as_old_as_its_read_not_as_the_wait_for_the_read_ahead() {
        let reads = Arc::new(AtomicUsize::new(0));
        // The read ahead takes 240 ms; counting from the ask, each of the three asks (60 ms
        // each, from 50 ms on) would have timed out before the attempt's own read answered.
        let mut checks = delayed(&[240, 5], reads.clone());
        checks.fresh_for = Duration::from_millis(60);
        let checks = Arc::new(checks);
        let first = {
            let checks = checks.clone();
            tokio::spawn(async move { checks.unchanged(id(1), 1).await })
        };
        settle().await;
        let asked = Instant::now();
        assert_eq!(checks.unchanged(id(1), 1).await, Some(true));
        assert!(
            asked.elapsed() > Duration::from_millis(60),
            "it waited for the read ahead: {:?}",
            asked.elapsed()
        );
        assert_eq!(first.await.expect("first"), Some(true));
    }

    /// Issue 23, N13 (attack7): the wait for a pooled connection does not age the answer. A read
    /// that waits 200 ms for a connection and then answers at once vouches under a bound of 60 ms
    /// (aged from the moment it was asked, it never could: the pool part of N13, where a worker
    /// with six busy endpoints and four connections delivered a tenth of what main did).
    #[tokio::test]
    async fn n13_the_wait_for_a_pooled_connection_does_not_age_the_answer() {
        let reads = Arc::new(AtomicUsize::new(0));
        let counted = reads.clone();
        let mut checks = Checks::reading(Arc::new(move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                // Waiting for a connection of the pool ...
                tokio::time::sleep(Duration::from_millis(200)).await;
                // ... then the read itself, sent now and answered quickly.
                let sent = Instant::now();
                tokio::time::sleep(Duration::from_millis(5)).await;
                Ok(EndpointCheck {
                    unchanged: true,
                    sent,
                })
            })
        }));
        checks.fresh_for = Duration::from_millis(60);
        assert_eq!(checks.unchanged(id(1), 1).await, Some(true));
        assert_eq!(reads.load(Ordering::SeqCst), 1, "vouched on the first read");
    }
}
