//! The worker loop: woken by the store's `LISTEN` (or the fallback poll), it claims due
//! deliveries in batches within each endpoint's room, builds their payloads from the event model
//! (one read per kind of record), and starts one task per attempt; each outcome goes to the
//! recorder and frees its place in the lanes. Shutdown stops claiming and lets attempts in flight
//! finish within their timeout.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use partner_domain::kernel::clock::Clock;
use partner_domain::kernel::ids::EndpointId;
use partner_domain::kernel::random::Random;
use partner_domain::webhook::ports::{DataFormat, DeliveryRepo};
use partner_domain::webhook::{
    AttemptOutcome, ClaimBatch, ClaimRequest, ClaimedDelivery, NextStep, Payload,
    SUBJECT_UNREADABLE, SubjectIds, Subjects, after_failure, attempt_budget, delivery_body,
    honour_retry_after,
};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc};

use crate::alarms::Alarms;
use crate::changes::{Changes, Freshness};
use crate::checks::{CHECKED_WITHIN, Checks, FRESH_FOR};
use crate::client::{Client, Sent};
use crate::give_back::{GiveBack, GiveBacks};
use crate::lanes::{Heard, Lanes};
use crate::news::NewsFold;
use crate::stamps::{Stamps, unix_us};
use crate::{WorkerConfig, WorkerError, maintenance, recorder};

/// Deliveries claimed in one statement at most.
const CLAIM_BATCH: usize = 512;
/// How long a delivery given back because its endpoint's row check failed or answered too late
/// waits before it is due again (issue 23, N9d): the check is not made again and again against a
/// slow or failing database.
const GIVEN_BACK_FOR: Duration = Duration::from_secs(1);

/// How long the first give-back of a batch waits for others before its statement is sent: the
/// claims of a changed endpoint are given back within moments of each other (`give_back`).
const GIVE_BACK_LINGER: Duration = Duration::from_millis(1);

/// Takes `n`'s stored wake-up, if any, without waiting.
async fn taken(n: &Notify) -> bool {
    tokio::select! {
        biased;
        () = n.notified() => true,
        () = std::future::ready(()) => false,
    }
}

struct Inner {
    repo: Arc<dyn DeliveryRepo>,
    clock: Arc<dyn Clock>,
    rng: Arc<dyn Random>,
    /// How a delivery's `data` is written (the API's answer types).
    format: Arc<dyn DataFormat>,
    client: Client,
    config: WorkerConfig,
    /// News: deliveries were written (the store's `LISTEN`, this process's writes). Which
    /// endpoints they are for is not said.
    wake: Arc<Notify>,
    /// Room: an endpoint this worker holds deliveries of can take more (an attempt finished),
    /// or claims were given back due at once.
    room: Notify,
    sending: Arc<Semaphore>,
    lanes: Mutex<Lanes>,
    /// Signalled whenever the last held delivery finishes (shutdown waits for it).
    idle: Notify,
    /// Endpoint changes announced by the store: claims made before one are given back.
    changes: Mutex<Changes>,
    /// The endpoint-row check before every attempt, shared by attempts ready together.
    checks: Checks,
    /// Claims to give back unattempted, written in batches (`Worker::give_back`).
    giving_back: Mutex<GiveBacks>,
    /// When the retries this worker recorded fall due: the loop wakes then.
    alarms: Mutex<Alarms>,
    /// An alarm sooner than the loop's wake-up was set: it looks again.
    alarm_set: Notify,
}

impl Inner {
    fn lanes(&self) -> MutexGuard<'_, Lanes> {
        // A panic while holding the lock leaves counts that are still usable.
        self.lanes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn giving_back(&self) -> MutexGuard<'_, GiveBacks> {
        self.giving_back
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn alarms(&self) -> MutexGuard<'_, Alarms> {
        self.alarms
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn changes(&self) -> MutexGuard<'_, Changes> {
        self.changes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// How long a claim's lease lasts (see `claim_round`).
    fn lease(&self) -> Duration {
        self.config.timeout * 2 + Duration::from_secs(5)
    }
}

/// The delivery worker.
#[derive(Clone)]
pub struct Worker {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("config", &self.inner.config)
            .finish()
    }
}

impl Worker {
    pub fn new(
        repo: Arc<dyn DeliveryRepo>,
        clock: Arc<dyn Clock>,
        rng: Arc<dyn Random>,
        format: Arc<dyn DataFormat>,
        config: WorkerConfig,
    ) -> Result<Self, WorkerError> {
        let client = Client::new(&config, clock.clone())?;
        let concurrency = config.concurrency.max(1);
        Ok(Self {
            inner: Arc::new(Inner {
                checks: Checks::new(repo.clone()),
                giving_back: Mutex::new(GiveBacks::default()),
                alarms: Mutex::new(Alarms::default()),
                alarm_set: Notify::new(),
                repo,
                clock,
                rng,
                format,
                client,
                wake: Arc::new(Notify::new()),
                room: Notify::new(),
                sending: Arc::new(Semaphore::new(concurrency)),
                lanes: Mutex::new(Lanes::default()),
                idle: Notify::new(),
                // Twice a lease: no claim still held is older.
                changes: Mutex::new(Changes::new(
                    (config.timeout * 2 + Duration::from_secs(5)) * 2,
                )),
                config: WorkerConfig {
                    concurrency,
                    endpoint_concurrency: config.endpoint_concurrency.max(1),
                    ..config
                },
            }),
        })
    }

    /// Wakes the worker to claim now (call it when a delivery was written: `LISTEN`/`NOTIFY`).
    pub fn waker(&self) -> Arc<Notify> {
        self.inner.wake.clone()
    }

    /// Endpoint `id` changed or went (`None`: any may have, e.g. announcements were missed): the
    /// deliveries of it claimed before now are given back unattempted instead of sent with the
    /// URL, secrets and header their claim read. Call it on the store's `webhook_endpoints`
    /// notifications.
    pub fn endpoint_changed(&self, id: Option<EndpointId>) {
        self.inner.changes().changed(id, Instant::now());
    }

    /// The store's change announcements are heard again from now (`true`: the listening
    /// connection listens), or no longer (`false`: it was lost, or is not up yet); call it with
    /// `false` before the worker runs when a listener will be attached. Every delivery is sent
    /// only once the store says its endpoint's row is still the version the claim read (issue
    /// 23, N9b''), heard or not; this tells the worker when a change the row shows but no
    /// announcement did is to be expected (issue 23, N9) rather than logged.
    pub fn listening(&self, on: bool) {
        self.inner.changes().heard_since(on.then(Instant::now));
    }

    /// What the listening connection heard is proven until `until` (the echo of a probe: every
    /// change committed before it was sent was heard). After the latest such instant (a
    /// connection that died silently echoes nothing more) the announcements are not trusted,
    /// as while not listening (issue 23, N9b'): a change only the row shows is then expected,
    /// not logged. Sending never depends on it (issue 23, N9b'').
    pub fn heard_until(&self, until: Instant) {
        self.inner.changes().heard_until(until);
    }

    /// Runs until `shutdown` completes; then stops claiming, lets in-flight attempts finish within
    /// the attempt timeout, records their outcomes, and returns. What is still unfinished then is
    /// abandoned to its lease and attempted again later.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let recorder = tokio::spawn(recorder::record_loop(
            self.inner.repo.clone(),
            rx,
            self.inner.config.disable_after,
        ));
        let maintenance = tokio::spawn(maintenance::run(
            self.inner.repo.clone(),
            self.inner.clock.clone(),
            self.inner.config.clone(),
        ));
        let mut shutdown = std::pin::pin!(shutdown);
        let mut fold = NewsFold::default();
        loop {
            let wake_by = self
                .inner
                .alarms()
                .next(Instant::now() + self.inner.config.poll_interval);
            let mut news = tokio::select! {
                biased;
                () = &mut shutdown => break,
                () = self.inner.room.notified() => false,
                () = self.inner.wake.notified() => true,
                () = self.inner.alarm_set.notified() => continue,
                () = tokio::time::sleep(wake_by.saturating_duration_since(Instant::now())) => false,
            };
            self.inner.alarms().passed(Instant::now());
            // News while every endpoint this worker holds is full, and the last claims on news
            // found nothing: most likely more work for those endpoints, which no claim can take
            // before one of them has room. Wait for that room (a claim then serves both), at
            // most the fold's bound: another endpoint's new work waits no longer than that.
            let full = || {
                self.inner
                    .lanes()
                    .all_full(&self.inner.config, Instant::now())
            };
            if news
                && let Some(bound) = fold.bound()
                && full()
            {
                let waited = Instant::now();
                tokio::select! {
                    biased;
                    () = &mut shutdown => break,
                    () = self.inner.room.notified() => news = false,
                    () = tokio::time::sleep(bound) => {}
                }
                tracing::debug!(
                    bound_us = bound.as_micros(),
                    waited_us = waited.elapsed().as_micros(),
                    room = !news,
                    "webhook news waited for room"
                );
            }
            // The claim serves whatever else is waiting too: news written before it (it sees
            // them) and room (it asks for it). A claim that was for room as well tells nothing
            // about the news.
            if taken(&self.inner.room).await {
                news = false;
            }
            taken(&self.inner.wake).await;
            // A claim round waits on the store; shutdown does not wait for it (issue 23, N12: a
            // connection frozen under the claim held SIGTERM for good). A round cut short claimed
            // nothing, or leases that expire: those deliveries are attempted again after them.
            let found = tokio::select! {
                biased;
                () = &mut shutdown => break,
                found = self.claim_round(&tx, unix_us()) => found,
            };
            if news {
                fold.claimed_on_news(found);
            }
        }
        maintenance.abort();
        let deadline = self.inner.config.timeout + Duration::from_secs(1);
        let drained = tokio::time::timeout(deadline, async {
            loop {
                let idle = self.inner.idle.notified();
                if self.inner.lanes().held() == 0 {
                    break;
                }
                idle.await;
            }
        })
        .await;
        if drained.is_err() {
            tracing::warn!("webhook attempts still in flight at shutdown are left to their lease");
        }
        drop(tx);
        // In-flight tasks hold senders; the recorder ends once they are done or abandoned.
        let _ = tokio::time::timeout(Duration::from_secs(5), recorder).await;
    }

    /// Claims while there is room and the store has due deliveries; whether it claimed any.
    async fn claim_round(&self, tx: &mpsc::UnboundedSender<AttemptOutcome>, woke: i64) -> bool {
        let c = &self.inner.config;
        let mut found = false;
        let per_endpoint = Lanes::fresh_endpoint_room(c);
        let ceiling = c.concurrency.saturating_mul(2);
        loop {
            let (limit, room) = {
                let lanes = self.inner.lanes();
                let limit = ceiling.saturating_sub(lanes.held()).min(CLAIM_BATCH);
                (limit, lanes.room(c, Instant::now()))
            };
            if limit == 0 {
                return found;
            }
            let now = self.inner.clock.now();
            // Long enough for a ready delivery to wait its turn (about half an attempt timeout at
            // most, see `Lane::capacity`) and then make its own attempt; `attempt` gives up one
            // whose lease would run out mid-send. Short enough that a dead worker's deliveries
            // are soon due again.
            let lease_until = now + self.inner.lease();
            // Before the statement: a change announced while it runs makes its claims stale.
            let claimed_at = Instant::now();
            let req = ClaimRequest {
                now,
                lease_until,
                limit: u32::try_from(limit).unwrap_or(u32::MAX),
                per_endpoint: u32::try_from(per_endpoint).unwrap_or(u32::MAX),
                room,
                max_attempts: attempt_budget(&c.retry_schedule),
            };
            let claim = unix_us();
            let batch = match self.inner.repo.claim(&req).await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "claiming webhook deliveries failed");
                    return found;
                }
            };
            let n = batch.len();
            metrics::counter!("webhook_claims_total", "result" => if n == 0 { "empty" } else { "claimed" })
                .increment(1);
            if n == 0 {
                return found;
            }
            found = true;
            let stamps = Stamps {
                woke,
                claim,
                claimed: unix_us(),
                built: 0,
            };
            // A delivery whose event cannot be read fails alone, at once: no request can be built.
            for u in batch.unreadable {
                let _ = tx.send(AttemptOutcome {
                    id: u.id,
                    lease: u.lease,
                    row: u.row,
                    at: now,
                    status_code: None,
                    error: Some(SUBJECT_UNREADABLE.into()),
                    duration_ms: None,
                    next: NextStep::GiveUp,
                });
            }
            let ClaimBatch {
                ready: claimed,
                subjects,
                looked_up,
                ..
            } = batch;
            if claimed.is_empty() {
                if n < limit {
                    return found;
                }
                continue;
            }
            self.inner
                .lanes()
                .hold(c, claimed.iter().map(|d| d.endpoint_id));
            tokio::spawn(self.clone().dispatch(
                claimed,
                (subjects, looked_up),
                lease_until,
                claimed_at,
                stamps,
                tx.clone(),
            ));
            if n < limit {
                return found;
            }
        }
    }

    /// Builds the batch's payloads (one query per subject kind the claim did not read along:
    /// `read_along`, the records it read and the ids it looked up) and starts each attempt.
    async fn dispatch(
        self,
        batch: Vec<ClaimedDelivery>,
        read_along: (Subjects, SubjectIds),
        lease_until: time::OffsetDateTime,
        claimed_at: Instant,
        mut stamps: Stamps,
        tx: mpsc::UnboundedSender<AttemptOutcome>,
    ) {
        let (mut subjects, looked_up) = read_along;
        let wanted = SubjectIds::of(batch.iter().map(|d| &d.event)).without(&looked_up);
        let read = if wanted.is_empty() {
            Ok(Subjects::default())
        } else {
            self.inner.repo.subjects(&wanted).await
        };
        match read {
            Ok(s) => subjects.merge(s),
            Err(e) => {
                // Left to their leases: attempted again later.
                tracing::warn!(error = %e, deliveries = batch.len(), "reading webhook subjects failed");
                for d in &batch {
                    self.finish(d.endpoint_id, Heard::Nothing);
                }
                return;
            }
        };
        stamps.built = unix_us();
        for d in batch {
            let Some(data) = Payload::of(&d.event, &subjects).map(|p| self.inner.format.data(&p))
            else {
                // The record is gone, or unreadable; retrying cannot bring it back.
                let error = if subjects.is_unreadable(&d.event) {
                    SUBJECT_UNREADABLE
                } else {
                    "subject not found"
                };
                let _ = tx.send(AttemptOutcome {
                    id: d.id,
                    lease: d.lease,
                    row: d.row,
                    at: self.inner.clock.now(),
                    status_code: None,
                    error: Some(error.into()),
                    duration_ms: None,
                    next: NextStep::GiveUp,
                });
                self.finish(d.endpoint_id, Heard::Nothing);
                continue;
            };
            let body = delivery_body(d.id, d.event.kind(), d.event_created_at, data);
            let me = self.clone();
            let tx = tx.clone();
            tokio::spawn(async move {
                me.attempt(d, body, lease_until, claimed_at, stamps, tx)
                    .await;
            });
        }
    }

    /// Waits for a turn of the endpoint and checks its row, then for a slot of the endpoint and
    /// a global one, sends, and reports the outcome.
    async fn attempt(
        self,
        d: ClaimedDelivery,
        body: Vec<u8>,
        lease_until: time::OffsetDateTime,
        claimed_at: Instant,
        stamps: Stamps,
        tx: mpsc::UnboundedSender<AttemptOutcome>,
    ) {
        let Some((turns, lane)) = self.inner.lanes().slots(d.endpoint_id) else {
            self.finish(d.endpoint_id, Heard::Nothing);
            return;
        };
        // The endpoint changed since the claim read it: give the delivery back, due now, so the
        // next claim sends it with the endpoint as it is (or not at all, when it went). A change
        // the store announced is known without a read; otherwise the endpoint's row is read, by
        // a read begun once the attempt is ready (one of the next of its endpoint to be sent), or
        // one begun at most `checks::SHARE_WITHIN` before, whose answer is dated from its start:
        // a change answered before it is seen however late its announcement comes (a slow or
        // silently dead listener: issue 23, N9b''), and a failed read sends nothing.
        //
        // The check is made while the endpoint's slots are busy with the attempts before this
        // one, not inside a slot (a slot's time was the read and then the send, the read the
        // longer under load: docs/performance-history.md, "The live drain's regression"). A
        // turn is one of `endpoint_concurrency` places next in line, so the read begins when at
        // most that many attempts of the endpoint are ahead of this one; its answer vouches for
        // the send only when the slot comes within `CHECKED_WITHIN` of the read's asking, else
        // the row is read again once the slot is held, as before.
        //
        // The claim statement read the row too: when a slot is free within `CHECKED_WITHIN` of
        // the claim's asking, that read vouches for the send as a check asked then would, and no
        // row is read (`claim_vouches`: a delivery that trickles in is sent a round trip sooner).
        let Ok(turn) = turns.acquire_owned().await else {
            self.finish(d.endpoint_id, Heard::Nothing);
            return;
        };
        let (mut asked, mut vouched, slots) =
            if let Some(slots) = self.claim_vouches(&d, &lane, claimed_at) {
                (claimed_at, Some(true), Some(slots))
            } else {
                let (vouched, asked) = self.vouch(&d, claimed_at).await;
                let mut slots = None;
                if vouched == Some(true) {
                    let (Ok(endpoint_slot), Ok(slot)) = (
                        lane.acquire_owned().await,
                        self.inner.sending.clone().acquire_owned().await,
                    ) else {
                        self.finish(d.endpoint_id, Heard::Nothing);
                        return;
                    };
                    slots = Some((endpoint_slot, slot));
                }
                (asked, vouched, slots)
            };
        // The next attempt in line may check now.
        drop(turn);
        let slot = unix_us();
        let start = self.inner.clock.now();
        if vouched == Some(true) {
            // Too close to the end of the lease: another worker may take it over mid-send, so
            // leave it to that worker rather than risk two attempts at once.
            if start + self.inner.config.timeout > lease_until {
                self.finish(d.endpoint_id, Heard::Nothing);
                return;
            }
            if asked.elapsed() > CHECKED_WITHIN {
                (vouched, asked) = self.vouch(&d, claimed_at).await;
            } else if self.announced_changed(&d, claimed_at) {
                vouched = Some(false);
            }
        }
        if vouched != Some(true) {
            drop(slots);
            self.give_back(&d, vouched);
            return;
        }
        metrics::counter!(
            "webhook_sends_vouched_total",
            "by" => if asked == claimed_at { "claim" } else { "check" }
        )
        .increment(1);
        let started = Instant::now();
        let send = unix_us();
        // A send that needs a new connection writes only once it is up and the endpoint's row
        // is read again, unless the answer above is still fresh and no change was announced
        // (issue 23, N9c).
        let recheck = || self.recheck(&d, claimed_at, asked);
        let sent = self
            .inner
            .client
            .send(&d, body, self.inner.config.timeout, recheck)
            .await;
        if let Sent::Unsent(vouched) = sent {
            self.give_back(&d, vouched);
            return;
        }
        let took = started.elapsed();
        stamps.log(d.id, slot, send);
        let at = self.inner.clock.now();
        let c = &self.inner.config;
        let (status_code, error, next) = match sent {
            Sent::Answered(code, _) if (200..300).contains(&code) => {
                (Some(code), None, NextStep::Delivered)
            }
            Sent::Answered(code, retry_after) => {
                let error = if (300..400).contains(&code) {
                    "redirect".to_owned()
                } else {
                    format!("status {code}")
                };
                let next = honour_retry_after(
                    after_failure(&c.retry_schedule, d.attempt, self.jitter(), at),
                    at,
                    retry_after,
                );
                (Some(code), Some(error), next)
            }
            Sent::NoAnswer { error, .. } => {
                let next = after_failure(&c.retry_schedule, d.attempt, self.jitter(), at);
                (None, Some(error.to_owned()), next)
            }
            Sent::Unsent(_) => return,
        };
        if let NextStep::RetryAt(due) = next
            && let Ok(delay) = Duration::try_from(due - at)
            && self.inner.alarms().set(Instant::now(), delay)
        {
            self.inner.alarm_set.notify_one();
        }
        let outcome = match (&error, status_code) {
            (None, _) => "delivered",
            (Some(_), Some(_)) => "rejected",
            (Some(_), None) => "no_answer",
        };
        metrics::counter!("webhook_attempts_total", "outcome" => outcome).increment(1);
        metrics::histogram!("webhook_attempt_duration_seconds").record(took.as_secs_f64());
        if let Some(error) = &error {
            // The endpoint is named by id, never by URL (its query may carry a credential).
            tracing::info!(
                delivery = %d.id,
                endpoint = %d.endpoint_id,
                attempt = d.attempt,
                status = status_code,
                error = %error,
                elapsed_ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
                retry = matches!(next, NextStep::RetryAt(_)),
                "webhook attempt failed"
            );
        }
        let _ = tx.send(AttemptOutcome {
            id: d.id,
            lease: d.lease,
            row: d.row,
            at,
            status_code,
            error,
            duration_ms: Some(u32::try_from(took.as_millis()).unwrap_or(u32::MAX)),
            next,
        });
        let heard = match sent {
            Sent::Answered(..) => Heard::Answer(took),
            Sent::NoAnswer {
                timed_out: true, ..
            } => Heard::Timeout(took),
            Sent::NoAnswer { .. } | Sent::Unsent(_) => Heard::Nothing,
        };
        self.finish(d.endpoint_id, heard);
    }

    /// The slots for `d` at once, vouched for by its claim's own read of the endpoint row, when
    /// that read is as recent as a check's answer may be ([`CHECKED_WITHIN`]) and no change of
    /// the endpoint was announced since: the claim statement read the row (enabled, at the
    /// version it returned) with a snapshot taken after `claimed_at`, so a change answered
    /// before the send can have gone unseen only if it was answered within that bound before
    /// the send, as with a check begun that long before its slot. `None`: the claim is older,
    /// or a slot is not free now; the row is then read as usual.
    fn claim_vouches(
        &self,
        d: &ClaimedDelivery,
        lane: &Arc<Semaphore>,
        claimed_at: Instant,
    ) -> Option<(OwnedSemaphorePermit, OwnedSemaphorePermit)> {
        if claimed_at.elapsed() > CHECKED_WITHIN || self.announced_changed(d, claimed_at) {
            return None;
        }
        let endpoint_slot = lane.clone().try_acquire_owned().ok()?;
        let slot = self.inner.sending.clone().try_acquire_owned().ok()?;
        Some((endpoint_slot, slot))
    }

    /// Whether a change of `d`'s endpoint was announced since its claim at `claimed_at`.
    fn announced_changed(&self, d: &ClaimedDelivery, claimed_at: Instant) -> bool {
        self.inner
            .changes()
            .freshness(d.endpoint_id, claimed_at, Instant::now())
            == Freshness::Stale
    }

    /// Whether `d` may be written on the connection just made for it (issue 23, N9c): the
    /// answer that vouched for its send, asked at `asked`, still does while it is under
    /// [`FRESH_FOR`] old and no change of the endpoint was announced since the claim (the
    /// announcements are free to consult, and one heard while the connection was being made
    /// would otherwise go unheeded for up to that long); past that, the row is read again.
    async fn recheck(
        &self,
        d: &ClaimedDelivery,
        claimed_at: Instant,
        asked: Instant,
    ) -> Option<bool> {
        if asked.elapsed() <= FRESH_FOR {
            return Some(!self.announced_changed(d, claimed_at));
        }
        self.vouch(d, claimed_at).await.0
    }

    /// Whether `d`'s endpoint is as its claim read it, now: `Some(false)` when a change was
    /// announced since the claim or its row says so, `None` when the row's check failed or
    /// answered too late ([`Checks::check`]); and the instant the answer vouches from (its
    /// read's ask, or the start of the recent read it shared; now for an announced change). A
    /// send on it must follow within [`CHECKED_WITHIN`] of that instant.
    async fn vouch(&self, d: &ClaimedDelivery, claimed_at: Instant) -> (Option<bool>, Instant) {
        let heard = self
            .inner
            .changes()
            .freshness(d.endpoint_id, claimed_at, Instant::now());
        if heard == Freshness::Stale {
            return (Some(false), Instant::now());
        }
        let answer = self
            .inner
            .checks
            .check(d.endpoint_id, d.endpoint_version)
            .await;
        // Announced while the row was read: known as well, for free.
        if self.announced_changed(d, claimed_at) {
            return (Some(false), Instant::now());
        }
        let row = answer.map(|a| a.unchanged);
        if row == Some(false) && heard == Freshness::Fresh {
            // Only the row says so: the announcement is late or was lost (or the change
            // committed within milliseconds of the read).
            tracing::info!(
                endpoint = %d.endpoint_id,
                delivery = %d.id,
                "a claimed delivery's endpoint changed unannounced; given back"
            );
        }
        (row, answer.map_or_else(Instant::now, |a| a.since))
    }

    /// Gives `d` back unattempted (its attempt not counted): due at once when its endpoint
    /// changed (`Some(false)`: the next claim reads it as it is), or after [`GIVEN_BACK_FOR`]
    /// when the check failed or answered too late (`None`: so a slow or failing database is not
    /// asked again and again for the same delivery). Queued, and written with the others queued
    /// meanwhile in one statement ([`Self::give_back_batches`]); the delivery stays held until
    /// then.
    fn give_back(&self, d: &ClaimedDelivery, vouched: Option<bool>) {
        let start = self.inner.giving_back().push(GiveBack {
            id: d.id,
            lease: d.lease,
            endpoint: d.endpoint_id,
            at_once: vouched.is_some(),
        });
        if start {
            tokio::spawn(self.clone().give_back_batches());
        }
    }

    /// Writes the queued give-backs, one batch at a time until none is queued: one `release`
    /// statement for all those due at once, one for those due later (usually only one of the
    /// two has any). Waits [`GIVE_BACK_LINGER`] first, so that the other claims of a changed
    /// endpoint, given back moments after the first, share its statement.
    async fn give_back_batches(self) {
        tokio::time::sleep(GIVE_BACK_LINGER).await;
        loop {
            let next = self.inner.giving_back().take();
            let Some(batch) = next else { return };
            let now = self.inner.clock.now();
            let [at_once, later] = crate::give_back::split(&batch);
            for (claims, due) in [(&at_once, now), (&later, now + GIVEN_BACK_FOR)] {
                if claims.is_empty() {
                    continue;
                }
                if let Err(e) = self.inner.repo.release(claims, due).await {
                    // Left to their leases: claimed again, afresh, when they run out.
                    tracing::warn!(error = %e, deliveries = claims.len(), "giving back stale claims failed");
                }
            }
            for g in &batch {
                self.finish(g.endpoint, Heard::Nothing);
            }
            if !at_once.is_empty() {
                self.inner.room.notify_one();
            }
        }
    }

    /// A held delivery is done: frees its place in the lanes, and wakes the claimer or the
    /// shutdown when that matters.
    fn finish(&self, endpoint: EndpointId, heard: Heard) {
        let finished =
            self.inner
                .lanes()
                .finish(&self.inner.config, endpoint, heard, Instant::now());
        if finished.idle {
            self.inner.idle.notify_waiters();
        }
        if finished.wake {
            self.inner.room.notify_one();
        }
    }

    fn jitter(&self) -> f64 {
        let mut b = [0u8; 4];
        self.inner.rng.fill(&mut b);
        f64::from(u32::from_le_bytes(b)) / f64::from(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use partner_domain::events::Event;
    use partner_domain::kernel::clock::FixedClock;
    use partner_domain::kernel::ids::{DeliveryId, LeadId};
    use partner_domain::webhook::ports::{EndpointCheck, MockDeliveryRepo};
    use partner_domain::webhook::{ClaimBatch, RowHint, Subjects, UnreadableDelivery};
    use time::macros::datetime;
    use uuid::Uuid;

    use super::*;

    /// A `data` that names the payload's kind of record.
    struct Names;

    impl DataFormat for Names {
        fn data(&self, payload: &Payload<'_>) -> serde_json::Value {
            serde_json::Value::String(format!("{payload:?}"))
        }
    }

    /// Jitter 0: a retry comes at 90 % of its scheduled delay.
    struct Zeros;

    impl Random for Zeros {
        fn fill(&self, buf: &mut [u8]) {
            buf.fill(0);
        }
    }

    fn config() -> WorkerConfig {
        WorkerConfig {
            retry_schedule: vec![Duration::from_secs(60)],
            timeout: Duration::from_secs(5),
            allow_private: false,
            extra_roots_pem: None,
            poll_interval: Duration::from_millis(10),
            concurrency: 4,
            endpoint_concurrency: 2,
            retention: Duration::from_secs(3600),
            event_retention: Duration::from_secs(3600),
            maintenance_interval: Duration::from_secs(3600),
            disable_after: None,
        }
    }

    fn claimed(event: Event) -> ClaimedDelivery {
        ClaimedDelivery {
            id: DeliveryId::from_uuid(Uuid::from_u128(7)),
            endpoint_id: EndpointId::from_uuid(Uuid::from_u128(1)),
            lease: Uuid::from_u128(99),
            row: RowHint::new(0x2_0007),
            attempt: 1,
            event_id: partner_domain::kernel::ids::EventId::from_uuid(Uuid::from_u128(8)),
            event,
            event_created_at: datetime!(2026-03-10 11:59 UTC),
            // A literal loopback address: refused before any request when private addresses
            // are not allowed, so no receiver is needed.
            url: "https://127.0.0.1:9/hook".into(),
            secret: None,
            previous_secret: None,
            custom_header: None,
            endpoint_version: 1,
        }
    }

    /// Runs a worker over `repo` whose store hands out `delivery` once, until the recorder was
    /// handed one outcome, and returns that outcome.
    async fn one_outcome(repo: MockDeliveryRepo, delivery: ClaimedDelivery) -> AttemptOutcome {
        first_outcome(
            repo,
            ClaimBatch {
                ready: vec![delivery],
                unreadable: vec![],
                ..ClaimBatch::default()
            },
        )
        .await
    }

    /// A claimed delivery whose stored event cannot be read fails at once, without a request.
    #[tokio::test]
    async fn an_unreadable_delivery_fails_alone_as_subject_unreadable() {
        let unreadable = UnreadableDelivery {
            id: DeliveryId::from_uuid(Uuid::from_u128(8)),
            endpoint_id: EndpointId::from_uuid(Uuid::from_u128(1)),
            lease: Uuid::from_u128(98),
            row: RowHint::new(0x3_0001),
        };
        let o = first_outcome(
            MockDeliveryRepo::new(),
            ClaimBatch {
                ready: vec![],
                unreadable: vec![unreadable.clone()],
                ..ClaimBatch::default()
            },
        )
        .await;
        assert_eq!(
            (
                o.id,
                o.lease,
                o.row,
                o.status_code,
                o.error.as_deref(),
                o.duration_ms,
                o.next
            ),
            (
                unreadable.id,
                unreadable.lease,
                unreadable.row,
                None,
                Some(SUBJECT_UNREADABLE),
                None,
                NextStep::GiveUp
            )
        );
    }

    /// Runs a worker over `repo` whose store hands out `batch` once, until the recorder was
    /// handed one outcome, and returns that outcome.
    /// A worker over `repo` and `clock`, running until `stop` is notified.
    fn spawn_worker(
        repo: MockDeliveryRepo,
        clock: Arc<FixedClock>,
    ) -> (Arc<Notify>, tokio::task::JoinHandle<()>) {
        let worker = Worker::new(
            Arc::new(repo),
            clock,
            Arc::new(Zeros),
            Arc::new(Names),
            config(),
        )
        .expect("worker");
        let stop = Arc::new(Notify::new());
        let run = tokio::spawn(worker.run({
            let stop = stop.clone();
            async move { stop.notified().await }
        }));
        (stop, run)
    }

    async fn first_outcome(mut repo: MockDeliveryRepo, batch: ClaimBatch) -> AttemptOutcome {
        repo.expect_claim()
            .withf(|req| {
                req.now == datetime!(2026-03-10 12:00 UTC)
                    && req.max_attempts == 2
                    && req.per_endpoint == 4
                    && req.limit == 8
            })
            .returning(claims_once(batch, false));
        repo.expect_subjects()
            .returning(|_| Ok(Subjects::default()));
        repo.expect_endpoint_unchanged().returning(|_, version| {
            Ok(EndpointCheck {
                unchanged: version == 1,
                sent: std::time::Instant::now(),
            })
        });
        let (seen_tx, mut seen_rx) = mpsc::unbounded_channel();
        repo.expect_record().returning(move |batch, _| {
            for o in batch {
                let _ = seen_tx.send(o.clone());
            }
            Ok(batch.len() as u64)
        });
        let clock = Arc::new(FixedClock::new(datetime!(2026-03-10 12:00 UTC)));
        let (stop, run) = spawn_worker(repo, clock);
        let outcome = tokio::time::timeout(Duration::from_secs(10), seen_rx.recv())
            .await
            .expect("an outcome within 10 s")
            .expect("recorded");
        stop.notify_one();
        run.await.expect("the worker stops");
        outcome
    }

    #[tokio::test]
    async fn a_delivery_whose_record_is_gone_ends_failed_without_a_request() {
        let lead = LeadId::from_uuid(Uuid::from_u128(5));
        let outcome = one_outcome(
            MockDeliveryRepo::new(),
            claimed(Event::LeadCreated { lead }),
        )
        .await;
        assert_eq!(outcome.error.as_deref(), Some("subject not found"));
        assert_eq!(outcome.next, NextStep::GiveUp);
        assert_eq!(
            outcome.lease,
            Uuid::from_u128(99),
            "recorded under its lease"
        );
        assert_eq!(
            outcome.row,
            RowHint::new(0x2_0007),
            "handed back where the claim found the row"
        );
        assert_eq!(outcome.duration_ms, None);
    }

    /// A record the claim looked up is not read again: here the lead is gone (looked up, not
    /// found), so its delivery fails as `subject not found` without a subjects read.
    #[tokio::test]
    async fn a_record_the_claim_looked_up_is_not_read_again() {
        let lead = LeadId::from_uuid(Uuid::from_u128(5));
        let mut repo = MockDeliveryRepo::new();
        repo.expect_subjects().never();
        let outcome = first_outcome(
            repo,
            ClaimBatch {
                ready: vec![claimed(Event::LeadCreated { lead })],
                looked_up: SubjectIds {
                    leads: vec![lead],
                    ..SubjectIds::default()
                },
                ..ClaimBatch::default()
            },
        )
        .await;
        assert_eq!(outcome.error.as_deref(), Some("subject not found"));
        assert_eq!(outcome.next, NextStep::GiveUp);
    }

    #[tokio::test]
    async fn an_internal_address_is_refused_and_retried_on_the_schedule() {
        let endpoint = EndpointId::from_uuid(Uuid::from_u128(1));
        let outcome = one_outcome(MockDeliveryRepo::new(), claimed(Event::Ping { endpoint })).await;
        assert_eq!(outcome.error.as_deref(), Some("address not allowed"));
        assert_eq!(outcome.status_code, None);
        assert_eq!(
            outcome.next,
            NextStep::RetryAt(datetime!(2026-03-10 12:00:54 UTC)),
            "60 s less the full jitter of 10 %"
        );
        assert_eq!(
            (outcome.lease, outcome.row),
            (Uuid::from_u128(99), RowHint::new(0x2_0007)),
            "recorded under its lease, where the claim found the row"
        );
    }

    /// A store's claim that hands out `batch` once, then nothing. With `aged`, that claim is
    /// answered later than the bound within which its own read vouches for a send
    /// (`Worker::claim_vouches`), so that its deliveries' rows are read.
    fn claims_once(
        batch: ClaimBatch,
        aged: bool,
    ) -> impl FnMut(&ClaimRequest) -> Result<ClaimBatch, partner_domain::kernel::error::RepoError>
    + Send
    + 'static {
        let handed = AtomicBool::new(false);
        move |_| {
            Ok(if handed.swap(true, Ordering::SeqCst) {
                ClaimBatch::default()
            } else {
                if aged {
                    std::thread::sleep(CHECKED_WITHIN + Duration::from_millis(1));
                }
                batch.clone()
            })
        }
    }

    /// A store whose endpoint rows are always unchanged, and the count of their reads.
    fn counting_unchanged_reads() -> (MockDeliveryRepo, Arc<std::sync::atomic::AtomicUsize>) {
        let mut repo = MockDeliveryRepo::new();
        let reads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = reads.clone();
        repo.expect_endpoint_unchanged().returning(move |_, _| {
            counted.fetch_add(1, Ordering::SeqCst);
            Ok(EndpointCheck {
                unchanged: true,
                sent: std::time::Instant::now(),
            })
        });
        (repo, reads)
    }

    /// A delivery whose slot is free within [`CHECKED_WITHIN`] of its claim is sent on the
    /// claim's own read of the endpoint row, without another read. (Tried three times: a test
    /// thread stalled past the 5 ms bound reads the row, as it should.)
    #[tokio::test]
    async fn a_fresh_claim_vouches_for_its_send_without_a_row_read() {
        let endpoint = EndpointId::from_uuid(Uuid::from_u128(1));
        let mut reads = Vec::new();
        for _ in 0..3 {
            let (repo, read) = counting_unchanged_reads();
            let outcome = one_outcome(repo, claimed(Event::Ping { endpoint })).await;
            // The send was made (and refused by the address guard: no receiver is needed).
            assert_eq!(outcome.error.as_deref(), Some("address not allowed"));
            reads.push(read.load(Ordering::SeqCst));
            if reads.last() == Some(&0) {
                return;
            }
        }
        panic!("the endpoint row was read every time: {reads:?}");
    }

    /// Issue 23, N9c: on the connection just made for it, a send whose answer is still fresh
    /// is written without another read, unless a change of its endpoint was announced since its
    /// claim (the announcements cost nothing to consult); an answer past [`FRESH_FOR`] is read
    /// again.
    #[tokio::test]
    async fn a_new_connections_send_heeds_a_change_announced_while_it_was_made() {
        let d = claimed(Event::Ping {
            endpoint: EndpointId::from_uuid(Uuid::from_u128(1)),
        });
        let (repo, reads) = counting_unchanged_reads();
        let worker = Worker::new(
            Arc::new(repo),
            Arc::new(FixedClock::new(datetime!(2026-03-10 12:00 UTC))),
            Arc::new(Zeros),
            Arc::new(Names),
            config(),
        )
        .expect("worker");
        let claimed_at = Instant::now();
        assert_eq!(
            worker.recheck(&d, claimed_at, Instant::now()).await,
            Some(true),
            "fresh, nothing announced: written"
        );
        worker
            .inner
            .changes()
            .changed(Some(d.endpoint_id), Instant::now());
        assert_eq!(
            worker.recheck(&d, claimed_at, Instant::now()).await,
            Some(false),
            "fresh, but a change was announced since the claim: given back"
        );
        assert_eq!(reads.load(Ordering::SeqCst), 0, "no row read while fresh");
        let later_claim = Instant::now();
        let old_answer = later_claim
            .checked_sub(FRESH_FOR + Duration::from_millis(1))
            .expect("an instant that long ago");
        assert_eq!(
            worker.recheck(&d, later_claim, old_answer).await,
            Some(true),
            "an answer past FRESH_FOR: the row is read again"
        );
        assert_eq!(reads.load(Ordering::SeqCst), 1, "read once when stale");
    }

    /// Issue 23, N9b'': a delivery is sent only once its endpoint's row is read at the version
    /// its claim read, whatever the announcements say (here a worker without a listener: they
    /// say nothing); when the row changed, or cannot be read, it is given back unattempted.
    /// (Its claim is older than the bound within which the claim's own read would vouch.)
    #[tokio::test]
    async fn a_delivery_whose_endpoint_row_changed_or_cannot_be_read_is_given_back() {
        let endpoint = EndpointId::from_uuid(Uuid::from_u128(1));
        for read in [Ok(false), Err(())] {
            let mut repo = MockDeliveryRepo::new();
            repo.expect_claim().returning(claims_once(
                ClaimBatch {
                    ready: vec![claimed(Event::Ping { endpoint })],
                    ..ClaimBatch::default()
                },
                true,
            ));
            repo.expect_subjects()
                .returning(|_| Ok(Subjects::default()));
            repo.expect_endpoint_unchanged()
                .withf(move |id, version| *id == endpoint && *version == 1)
                .returning(move |_, _| {
                    read.map(|unchanged| EndpointCheck {
                        unchanged,
                        sent: std::time::Instant::now(),
                    })
                    .map_err(|()| partner_domain::kernel::error::RepoError::unavailable("refused"))
                });
            let (given_tx, mut given_rx) = mpsc::unbounded_channel();
            repo.expect_release().returning(move |claims, _| {
                let _ = given_tx.send(claims.to_vec());
                Ok(1)
            });
            // Nothing recorded: no attempt was made (`record` is not expected).
            let (stop, run) = spawn_worker(
                repo,
                Arc::new(FixedClock::new(datetime!(2026-03-10 12:00 UTC))),
            );
            let given = tokio::time::timeout(Duration::from_secs(10), given_rx.recv())
                .await
                .expect("given back within 10 s")
                .expect("given back");
            assert_eq!(
                given,
                vec![(
                    DeliveryId::from_uuid(Uuid::from_u128(7)),
                    Uuid::from_u128(99)
                )],
                "{read:?}"
            );
            stop.notify_one();
            run.await.expect("the worker stops");
        }
    }

    /// Several stale claims are given back in batches (`give_back`): each exactly once, under
    /// its own lease, due at once when its endpoint changed and [`GIVEN_BACK_FOR`] later when its
    /// check failed; none is attempted.
    #[tokio::test]
    async fn stale_claims_are_given_back_in_batches_each_once_under_its_lease() {
        let endpoint = EndpointId::from_uuid(Uuid::from_u128(1));
        let now = datetime!(2026-03-10 12:00 UTC);
        // Versions 2 (the row says changed) and 3 (the read fails).
        let batch: Vec<ClaimedDelivery> = (0..5u128)
            .map(|n| ClaimedDelivery {
                id: DeliveryId::from_uuid(Uuid::from_u128(10 + n)),
                lease: Uuid::from_u128(100 + n),
                endpoint_version: if n < 3 { 2 } else { 3 },
                ..claimed(Event::Ping { endpoint })
            })
            .collect();
        let mut expected: Vec<(DeliveryId, Uuid, time::OffsetDateTime)> = batch
            .iter()
            .map(|d| {
                let due = if d.endpoint_version == 2 {
                    now
                } else {
                    now + GIVEN_BACK_FOR
                };
                (d.id, d.lease, due)
            })
            .collect();
        let mut repo = MockDeliveryRepo::new();
        repo.expect_claim().returning(claims_once(
            ClaimBatch {
                ready: batch,
                ..ClaimBatch::default()
            },
            true,
        ));
        repo.expect_subjects()
            .returning(|_| Ok(Subjects::default()));
        repo.expect_endpoint_unchanged().returning(|_, version| {
            if version == 2 {
                Ok(EndpointCheck {
                    unchanged: false,
                    sent: std::time::Instant::now(),
                })
            } else {
                Err(partner_domain::kernel::error::RepoError::unavailable(
                    "refused",
                ))
            }
        });
        let (given_tx, mut given_rx) = mpsc::unbounded_channel();
        repo.expect_release().returning(move |claims, due| {
            for (id, lease) in claims {
                let _ = given_tx.send((*id, *lease, due));
            }
            Ok(claims.len() as u64)
        });
        // Nothing recorded: no attempt was made (`record` is not expected).
        let (stop, run) = spawn_worker(repo, Arc::new(FixedClock::new(now)));
        let mut given = Vec::new();
        while given.len() < expected.len() {
            given.push(
                tokio::time::timeout(Duration::from_secs(10), given_rx.recv())
                    .await
                    .expect("given back within 10 s")
                    .expect("given back"),
            );
        }
        stop.notify_one();
        run.await.expect("the worker stops");
        // Nothing more was given back meanwhile (each once).
        assert!(given_rx.try_recv().is_err(), "given back twice");
        given.sort_by_key(|(id, ..)| id.as_uuid());
        expected.sort_by_key(|(id, ..)| id.as_uuid());
        assert_eq!(given, expected);
    }
}
