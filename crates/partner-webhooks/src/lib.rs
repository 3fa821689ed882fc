//! Webhook delivery worker (reqwest + rustls): claims, signs, sends, records.
//!
//! Deliveries are rows written with the change that caused them (the outbox). The worker is woken
//! as soon as one commits (the store's `LISTEN`, through [`Worker::waker`]), with a slow poll kept
//! as the fallback for retries falling due. It claims in batches, fairly: at most
//! `endpoint_concurrency` attempts per endpoint are in flight (and as many more claimed, ready to
//! go, so a fast endpoint is never idle waiting for the database), `concurrency` in all, and the
//! claim itself gives each endpoint at most its room, so one endpoint's backlog never takes every
//! slot. An endpoint that keeps timing out is backed off as a whole (a circuit breaker) so it
//! cannot hold slots that others could use.
//!
//! Claiming counts the attempt and leases the row under a fencing token; outcomes are recorded in
//! batches, each only while its row still holds that token. A worker that dies leaves its
//! deliveries due again after the lease (at-least-once, same `X-Partner-Delivery`), and a delivery
//! whose workers keep dying still ends `failed` after its budget. Payloads are built from the
//! domain's event model when claimed, serialized once, signed over those exact bytes, and posted
//! over HTTPS on reused connections without following redirects; only a 2xx ends a delivery.
//! Names resolve through a filter that refuses every address that is not global unicast, at
//! connect time, unless allowed. Logs and `lastError` carry short reasons, never a URL's query.
#![cfg_attr(test, allow(clippy::expect_used, clippy::indexing_slicing))]

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use partner_domain::kernel::clock::Clock;
use partner_domain::kernel::ids::EndpointId;
use partner_domain::kernel::random::Random;
use partner_domain::webhook::ports::{AddressCheck, DeliveryRepo};
use partner_domain::webhook::{
    AttemptOutcome, ClaimRequest, ClaimedDelivery, NextStep, SubjectIds, after_failure,
    attempt_budget, delivery_body, honour_retry_after, is_internal, parse_retry_after, payload,
    signature_header_with,
};
use tokio::sync::{Notify, Semaphore, mpsc};

/// Worker settings.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Delays after the first, second… failed attempt.
    pub retry_schedule: Vec<Duration>,
    /// One attempt's timeout.
    pub timeout: Duration,
    /// Let endpoints resolve to loopback and private addresses (tests, development).
    pub allow_private: bool,
    /// Extra PEM root certificates trusted for deliveries.
    pub extra_roots_pem: Option<Vec<u8>>,
    /// How often the worker looks for due deliveries when nothing woke it (retries falling due).
    pub poll_interval: Duration,
    /// Attempts in flight at once in this process.
    pub concurrency: usize,
    /// Attempts in flight at once per endpoint in this process.
    pub endpoint_concurrency: usize,
    /// Delivered and failed deliveries older than this are deleted.
    pub retention: Duration,
    /// How often exhausted deliveries are ended and old ones pruned.
    pub maintenance_interval: Duration,
    /// An endpoint whose attempts all failed for this long is disabled (`None`: never).
    pub disable_after: Option<Duration>,
}

/// Errors of building a worker.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("PARTNER_WEBHOOK_CA_FILE holds no usable PEM certificate")]
    Roots(#[source] Option<reqwest::Error>),
    #[error("cannot build the HTTPS client")]
    Client(#[source] reqwest::Error),
}

/// The resolver's refusal, recognised in reqwest's error chain as `address not allowed`.
#[derive(Debug, thiserror::Error)]
#[error("the name resolves only to addresses that are not allowed, or not at all")]
struct AddressNotAllowed;

/// Resolves names for reqwest, dropping every address that is not global unicast unless they are
/// allowed. Doing this at connect time (not only when an endpoint is saved) defeats DNS rebinding.
#[derive(Debug, Clone, Copy)]
struct FilteringResolver {
    allow_private: bool,
}

impl reqwest::dns::Resolve for FilteringResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allow_private = self.allow_private;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = addrs
                .into_iter()
                .filter(|a| allow_private || !is_internal(a.ip()))
                .collect();
            if allowed.is_empty() {
                return Err(Box::new(AddressNotAllowed) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// [`AddressCheck`] through the system resolver.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemAddressCheck;

#[async_trait::async_trait]
impl AddressCheck for SystemAddressCheck {
    async fn resolves_internal(&self, host: &str, port: u16) -> bool {
        let lookup = |name: &str| {
            let name = name.to_owned();
            async move {
                match tokio::time::timeout(
                    Duration::from_secs(3),
                    tokio::net::lookup_host((name.as_str(), port)),
                )
                .await
                {
                    Ok(Ok(addrs)) => addrs.into_iter().any(|a| is_internal(a.ip())),
                    _ => false,
                }
            }
        };
        // `name.` and `name` may resolve differently (search domains, hosts files): both count.
        let bare = host.trim_end_matches('.');
        lookup(host).await || (bare != host && !bare.is_empty() && lookup(bare).await)
    }
}

/// Consecutive timeouts after which an endpoint's circuit opens.
const BREAKER_THRESHOLD: u32 = 5;
const BREAKER_BASE: Duration = Duration::from_secs(10);
const BREAKER_MAX: Duration = Duration::from_secs(300);
/// Outcomes recorded in one statement at most.
const RECORD_BATCH: usize = 1000;
/// How long the recorder waits for more outcomes after the first of a batch.
const RECORD_LINGER: Duration = Duration::from_millis(5);
/// Deliveries claimed in one statement at most.
const CLAIM_BATCH: usize = 512;
/// The `lastError` of a delivery whose last budgeted attempt never reported back.
const INTERRUPTED: &str = "interrupted";

/// A circuit breaker per endpoint: after [`BREAKER_THRESHOLD`] consecutive timeouts the endpoint
/// gets no claims for a cool-down (doubling up to [`BREAKER_MAX`]), then one probe at a time until
/// an attempt is answered.
#[derive(Debug, Clone)]
struct Breaker {
    timeouts: u32,
    open_until: Option<Instant>,
    cooldown: Duration,
}

impl Default for Breaker {
    fn default() -> Self {
        Self {
            timeouts: 0,
            open_until: None,
            cooldown: BREAKER_BASE,
        }
    }
}

impl Breaker {
    fn is_closed(&self) -> bool {
        self.timeouts < BREAKER_THRESHOLD
    }

    /// How many more of this endpoint's deliveries may be claimed, given `held` already are.
    fn room(&self, per_endpoint: usize, held: usize, now: Instant) -> usize {
        if self.open_until.is_some_and(|t| t > now) {
            0
        } else if self.is_closed() {
            per_endpoint.saturating_sub(held)
        } else {
            1usize.saturating_sub(held) // half-open: one probe
        }
    }

    fn answered(&mut self) {
        *self = Self::default();
    }

    fn timed_out(&mut self, now: Instant) {
        self.timeouts = self.timeouts.saturating_add(1);
        if !self.is_closed() {
            self.open_until = Some(now + self.cooldown);
            self.cooldown = (self.cooldown * 2).min(BREAKER_MAX);
        }
    }
}

/// One endpoint's share of this worker.
#[derive(Debug)]
struct Lane {
    /// Attempts in flight.
    sending: Arc<Semaphore>,
    /// Deliveries claimed and not finished (sending or ready).
    held: usize,
    breaker: Breaker,
    /// Recent answer time (exponentially weighted), once the endpoint has answered.
    latency: Option<Duration>,
}

/// Ready deliveries per in-flight slot, at most: how far ahead of a fast endpoint the claim runs.
const MAX_DEPTH: u32 = 16;

impl Lane {
    fn new(endpoint_concurrency: usize) -> Self {
        Self {
            sending: Arc::new(Semaphore::new(endpoint_concurrency)),
            held: 0,
            breaker: Breaker::default(),
            latency: None,
        }
    }

    /// How many deliveries this endpoint may hold: its in-flight share, plus as many ready ones
    /// as it answers in half an attempt timeout (so a ready delivery never waits long enough for
    /// its lease to run out), between one more round and [`MAX_DEPTH`] rounds. A fast endpoint is
    /// never left idle waiting for the database; a slow one holds little it cannot send soon.
    fn capacity(&self, endpoint_concurrency: usize, timeout: Duration) -> usize {
        let rounds = match self.latency {
            None => 2,
            Some(l) => {
                let fit = timeout.as_secs_f64() / 2.0 / l.as_secs_f64().max(0.000_1);
                // Saturating float-to-int cast; `fit` is positive.
                (1 + fit.min(f64::from(MAX_DEPTH)) as u32).clamp(2, MAX_DEPTH)
            }
        };
        endpoint_concurrency.saturating_mul(usize::try_from(rounds).unwrap_or(2))
    }

    /// How many more of this endpoint's deliveries to claim now. A busy endpoint is topped up only
    /// once half its capacity is free, so it is claimed for in batches, not one row per answer.
    fn room(&self, endpoint_concurrency: usize, timeout: Duration, now: Instant) -> usize {
        let cap = self.capacity(endpoint_concurrency, timeout);
        let room = self.breaker.room(cap, self.held, now);
        if self.breaker.is_closed() && room * 2 < cap {
            0
        } else {
            room
        }
    }

    fn observe(&mut self, took: Duration) {
        self.latency = Some(match self.latency {
            None => took,
            Some(l) => l.mul_f64(0.8) + took.mul_f64(0.2),
        });
    }
}

#[derive(Debug, Default)]
struct Lanes {
    by_endpoint: HashMap<EndpointId, Lane>,
    held: usize,
}

struct Inner {
    repo: Arc<dyn DeliveryRepo>,
    clock: Arc<dyn Clock>,
    rng: Arc<dyn Random>,
    client: reqwest::Client,
    config: WorkerConfig,
    wake: Arc<Notify>,
    sending: Arc<Semaphore>,
    lanes: Mutex<Lanes>,
    /// Signalled whenever the last held delivery finishes (shutdown waits for it).
    idle: Notify,
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

/// How one send ended.
enum Sent {
    /// The status, and the wait a `429` or `503` asked for with `Retry-After`.
    Answered(u16, Option<time::Duration>),
    /// No answer; `timed_out` feeds the circuit breaker.
    NoAnswer {
        error: &'static str,
        timed_out: bool,
    },
}

impl Worker {
    pub fn new(
        repo: Arc<dyn DeliveryRepo>,
        clock: Arc<dyn Clock>,
        rng: Arc<dyn Random>,
        config: WorkerConfig,
    ) -> Result<Self, WorkerError> {
        // reqwest is built without a default crypto provider; ring is the one this workspace uses.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .pool_idle_timeout(Duration::from_secs(60))
            .tcp_nodelay(true)
            .user_agent(concat!(
                "partner-portal-webhooks/",
                env!("CARGO_PKG_VERSION")
            ))
            .dns_resolver(FilteringResolver {
                allow_private: config.allow_private,
            });
        if let Some(pem) = &config.extra_roots_pem {
            let certs = reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| WorkerError::Roots(Some(e)))?;
            if certs.is_empty() {
                return Err(WorkerError::Roots(None));
            }
            builder = builder.tls_certs_merge(certs);
        }
        let client = builder.build().map_err(WorkerError::Client)?;
        let concurrency = config.concurrency.max(1);
        Ok(Self {
            inner: Arc::new(Inner {
                repo,
                clock,
                rng,
                client,
                wake: Arc::new(Notify::new()),
                sending: Arc::new(Semaphore::new(concurrency)),
                lanes: Mutex::new(Lanes::default()),
                idle: Notify::new(),
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

    /// Runs until `shutdown` completes; then stops claiming, lets in-flight attempts finish within
    /// the attempt timeout, records their outcomes, and returns. What is still unfinished then is
    /// abandoned to its lease and attempted again later.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let recorder = tokio::spawn(record_loop(
            self.inner.repo.clone(),
            rx,
            self.inner.config.disable_after,
        ));
        let maintenance = tokio::spawn(self.clone().maintain());
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            tokio::select! {
                biased;
                () = &mut shutdown => break,
                () = self.inner.wake.notified() => {}
                () = tokio::time::sleep(self.inner.config.poll_interval) => {}
            }
            self.claim_round(&tx).await;
        }
        maintenance.abort();
        let deadline = self.inner.config.timeout + Duration::from_secs(1);
        let drained = tokio::time::timeout(deadline, async {
            loop {
                let idle = self.inner.idle.notified();
                if self.inner.lanes().held == 0 {
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

    /// Claims while there is room and the store has due deliveries.
    async fn claim_round(&self, tx: &mpsc::UnboundedSender<AttemptOutcome>) {
        let c = &self.inner.config;
        // An endpoint this worker holds nothing of yet: its in-flight share plus as many ready.
        let per_endpoint =
            Lane::new(c.endpoint_concurrency).capacity(c.endpoint_concurrency, c.timeout);
        let ceiling = c.concurrency.saturating_mul(2);
        loop {
            let now_mono = Instant::now();
            let (limit, room) = {
                let lanes = self.inner.lanes();
                let limit = ceiling.saturating_sub(lanes.held).min(CLAIM_BATCH);
                let room: Vec<(EndpointId, u32)> = lanes
                    .by_endpoint
                    .iter()
                    .map(|(id, l)| {
                        let r = l.room(c.endpoint_concurrency, c.timeout, now_mono);
                        (*id, u32::try_from(r).unwrap_or(u32::MAX))
                    })
                    .collect();
                (limit, room)
            };
            if limit == 0 {
                return;
            }
            let now = self.inner.clock.now();
            // Long enough for a ready delivery to wait its turn (about half an attempt timeout at
            // most, see `Lane::capacity`) and then make its own attempt; `attempt` gives up one
            // whose lease would run out mid-send. Short enough that a dead worker's deliveries
            // are soon due again.
            let lease_until = now + c.timeout * 2 + Duration::from_secs(5);
            let req = ClaimRequest {
                now,
                lease_until,
                limit: u32::try_from(limit).unwrap_or(u32::MAX),
                per_endpoint: u32::try_from(per_endpoint).unwrap_or(u32::MAX),
                room,
                max_attempts: attempt_budget(&c.retry_schedule),
            };
            let claimed = match self.inner.repo.claim(&req).await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "claiming webhook deliveries failed");
                    return;
                }
            };
            let n = claimed.len();
            if n == 0 {
                return;
            }
            {
                let mut lanes = self.inner.lanes();
                lanes.held += n;
                for d in &claimed {
                    let lane = lanes
                        .by_endpoint
                        .entry(d.endpoint_id)
                        .or_insert_with(|| Lane::new(c.endpoint_concurrency));
                    lane.held += 1;
                }
            }
            tokio::spawn(self.clone().dispatch(claimed, lease_until, tx.clone()));
            if n < limit {
                return;
            }
        }
    }

    /// Builds the batch's payloads (one query per subject kind) and starts each attempt.
    async fn dispatch(
        self,
        batch: Vec<ClaimedDelivery>,
        lease_until: time::OffsetDateTime,
        tx: mpsc::UnboundedSender<AttemptOutcome>,
    ) {
        let wanted = SubjectIds::of(batch.iter().map(|d| &d.event));
        let subjects = match self.inner.repo.subjects(&wanted).await {
            Ok(s) => s,
            Err(e) => {
                // Left to their leases: attempted again later.
                tracing::warn!(error = %e, deliveries = batch.len(), "reading webhook subjects failed");
                for d in &batch {
                    self.finish(d.endpoint_id, None);
                }
                return;
            }
        };
        for d in batch {
            let data = payload(&d.event, &subjects);
            let me = self.clone();
            let tx = tx.clone();
            match data {
                Some(data) => {
                    let body = delivery_body(d.id, d.event.kind(), d.event_created_at, data);
                    tokio::spawn(async move { me.attempt(d, body, lease_until, tx).await });
                }
                None => {
                    // The record is gone; retrying cannot bring it back.
                    let _ = tx.send(AttemptOutcome {
                        id: d.id,
                        lease: d.lease,
                        at: self.inner.clock.now(),
                        status_code: None,
                        error: Some("subject not found".into()),
                        duration_ms: None,
                        next: NextStep::GiveUp,
                    });
                    me.finish(d.endpoint_id, None);
                }
            }
        }
    }

    /// Waits for a slot of the endpoint and a global one, sends, and reports the outcome.
    async fn attempt(
        self,
        d: ClaimedDelivery,
        body: Vec<u8>,
        lease_until: time::OffsetDateTime,
        tx: mpsc::UnboundedSender<AttemptOutcome>,
    ) {
        let lane = self
            .inner
            .lanes()
            .by_endpoint
            .get(&d.endpoint_id)
            .map(|l| l.sending.clone());
        let Some(lane) = lane else {
            self.finish(d.endpoint_id, None);
            return;
        };
        let (Ok(_endpoint_slot), Ok(_slot)) = (
            lane.acquire_owned().await,
            self.inner.sending.clone().acquire_owned().await,
        ) else {
            self.finish(d.endpoint_id, None);
            return;
        };
        // Too close to the end of the lease: another worker may take it over mid-send, so leave
        // it to that worker rather than risk two attempts at once.
        let start = self.inner.clock.now();
        if start + self.inner.config.timeout > lease_until {
            self.finish(d.endpoint_id, None);
            return;
        }
        let started = Instant::now();
        let sent = self.send(&d, body).await;
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
        };
        let outcome = match (&error, status_code) {
            (None, _) => "delivered",
            (Some(_), Some(_)) => "rejected",
            (Some(_), None) => "no_answer",
        };
        metrics::counter!("webhook_attempts_total", "outcome" => outcome).increment(1);
        metrics::histogram!("webhook_attempt_duration_seconds")
            .record(started.elapsed().as_secs_f64());
        if let Some(error) = &error {
            // The endpoint is named by id, never by URL (its query may carry a credential).
            tracing::info!(
                delivery = %d.id,
                endpoint = %d.endpoint_id,
                attempt = d.attempt,
                status = status_code,
                error = %error,
                elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                retry = matches!(next, NextStep::RetryAt(_)),
                "webhook attempt failed"
            );
        }
        let _ = tx.send(AttemptOutcome {
            id: d.id,
            lease: d.lease,
            at,
            status_code,
            error,
            duration_ms: Some(u32::try_from(started.elapsed().as_millis()).unwrap_or(u32::MAX)),
            next,
        });
        self.finish(d.endpoint_id, Some((&sent, started.elapsed())));
    }

    /// A held delivery is done (sent, or given up by this worker): frees its place, updates the
    /// endpoint's breaker, and wakes the claimer when that opened room to claim into (waking it
    /// on every answer would cost a claim per delivery).
    fn finish(&self, endpoint: EndpointId, sent: Option<(&Sent, Duration)>) {
        let c = &self.inner.config;
        let mut lanes = self.inner.lanes();
        let mut wake = lanes.held == c.concurrency.saturating_mul(2);
        lanes.held = lanes.held.saturating_sub(1);
        let now = Instant::now();
        if let Some(lane) = lanes.by_endpoint.get_mut(&endpoint) {
            let before = lane.room(c.endpoint_concurrency, c.timeout, now);
            lane.held = lane.held.saturating_sub(1);
            match sent {
                Some((Sent::Answered(..), took)) => {
                    lane.breaker.answered();
                    lane.observe(took);
                }
                Some((
                    Sent::NoAnswer {
                        timed_out: true, ..
                    },
                    took,
                )) => {
                    lane.breaker.timed_out(now);
                    lane.observe(took);
                }
                Some((Sent::NoAnswer { .. }, _)) | None => {}
            }
            wake |= before == 0 && lane.room(c.endpoint_concurrency, c.timeout, now) > 0;
            if lane.held == 0 && lane.breaker.is_closed() {
                lanes.by_endpoint.remove(&endpoint);
            }
        }
        let idle = lanes.held == 0;
        drop(lanes);
        if idle {
            self.inner.idle.notify_waiters();
        }
        if wake {
            self.inner.wake.notify_one();
        }
    }

    fn jitter(&self) -> f64 {
        let mut b = [0u8; 4];
        self.inner.rng.fill(&mut b);
        f64::from(u32::from_le_bytes(b)) / f64::from(u32::MAX)
    }

    async fn send(&self, d: &ClaimedDelivery, body: Vec<u8>) -> Sent {
        let no_answer = |error| Sent::NoAnswer {
            error,
            timed_out: false,
        };
        let Ok(url) = url::Url::parse(&d.url) else {
            return no_answer("invalid url");
        };
        // Literal addresses skip the resolver, so they are checked here.
        let literal = match url.host() {
            Some(url::Host::Ipv4(ip)) => Some(std::net::IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => Some(std::net::IpAddr::V6(ip)),
            _ => None,
        };
        if literal.is_some_and(is_internal) && !self.inner.config.allow_private {
            return no_answer("address not allowed");
        }
        let mut req = self
            .inner
            .client
            .post(url)
            .header("Content-Type", "application/json")
            .header("X-Partner-Event", d.event.kind().as_str())
            .header("X-Partner-Delivery", d.id.to_string());
        if let Some(secret) = &d.secret {
            // During a rotation's overlap, a second `v1` under the previous secret.
            let secrets: Vec<&partner_domain::webhook::WebhookSecret> = std::iter::once(secret)
                .chain(d.previous_secret.as_ref())
                .collect();
            req = req.header(
                "X-Partner-Signature",
                signature_header_with(&secrets, self.inner.clock.now().unix_timestamp(), &body),
            );
        }
        if let Some(h) = &d.custom_header {
            req = req.header(h.name(), h.value());
        }
        match req.body(body).send().await {
            Ok(mut res) => {
                let code = res.status().as_u16();
                let retry_after = if code == 429 || code == 503 {
                    res.headers()
                        .get(reqwest::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| parse_retry_after(v, self.inner.clock.now()))
                } else {
                    None
                };
                // Read a little of the answer so the connection can be reused; a receiver that
                // sends more gets its connection closed instead.
                let mut read = 0usize;
                while read < 16 * 1024 {
                    match res.chunk().await {
                        Ok(Some(c)) => read += c.len(),
                        Ok(None) | Err(_) => break,
                    }
                }
                Sent::Answered(code, retry_after)
            }
            Err(e) => classify(&e),
        }
    }

    /// Ends deliveries whose budget dead workers spent, and prunes old ones, every interval.
    async fn maintain(self) {
        let c = &self.inner.config;
        let budget = attempt_budget(&c.retry_schedule);
        loop {
            tokio::time::sleep(c.maintenance_interval).await;
            let now = self.inner.clock.now();
            match self
                .inner
                .repo
                .fail_exhausted(now, budget, INTERRUPTED)
                .await
            {
                Ok(0) => {}
                Ok(n) => tracing::warn!(
                    deliveries = n,
                    "webhook deliveries ended failed: their last attempt never reported back"
                ),
                Err(e) => tracing::warn!(error = %e, "ending exhausted webhook deliveries failed"),
            }
            let Some(before) = time::Duration::try_from(c.retention)
                .ok()
                .and_then(|r| now.checked_sub(r))
            else {
                continue;
            };
            // Small batches until nothing is left, yielding between them.
            for _ in 0..1000 {
                match self.inner.repo.prune(before, 500).await {
                    Ok(0) => break,
                    Ok(_) => tokio::task::yield_now().await,
                    Err(e) => {
                        tracing::warn!(error = %e, "pruning webhook deliveries failed");
                        break;
                    }
                }
            }
        }
    }
}

impl Inner {
    fn lanes(&self) -> MutexGuard<'_, Lanes> {
        // A panic while holding the lock leaves counts that are still usable.
        self.lanes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Records outcomes in batches: whatever arrived while the previous batch was being written, and
/// for a few milliseconds after the first (an outcome waits a little; the slot it held is free
/// already, and the database writes one statement instead of many).
async fn record_loop(
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
        let mut tries = 0u32;
        loop {
            match repo.record(&batch, disable_after).await {
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
                    break;
                }
                Err(e) if tries < 3 => {
                    tries += 1;
                    tracing::warn!(error = %e, tries, "recording webhook outcomes failed; retrying");
                    tokio::time::sleep(Duration::from_millis(200) * tries).await;
                }
                Err(e) => {
                    // The leases run out and the deliveries are attempted again: at-least-once.
                    tracing::warn!(error = %e, outcomes = batch.len(), "recording webhook outcomes failed; left to their leases");
                    break;
                }
            }
        }
        batch.clear();
    }
}

/// A short, URL-free reason for a request that got no answer.
fn classify(e: &reqwest::Error) -> Sent {
    let no_answer = |error| Sent::NoAnswer {
        error,
        timed_out: error == "timeout",
    };
    if e.is_timeout() {
        return no_answer("timeout");
    }
    // `io::Error::source` skips the error it wraps, so wrapped errors are visited explicitly.
    let mut stack: Vec<&(dyn std::error::Error + 'static)> = vec![e];
    while let Some(err) = stack.pop() {
        if err.is::<AddressNotAllowed>() {
            return no_answer("address not allowed");
        }
        if err.is::<rustls::Error>() {
            return no_answer("tls error");
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::ConnectionRefused => return no_answer("connection refused"),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted => {
                    return no_answer("connection reset");
                }
                std::io::ErrorKind::TimedOut => return no_answer("timeout"),
                _ => {}
            }
            if let Some(inner) = io.get_ref() {
                stack.push(inner);
            }
        }
        if let Some(source) = err.source() {
            stack.push(source);
        }
    }
    no_answer("connection error")
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use reqwest::dns::{Name, Resolve};

    use super::*;

    #[tokio::test]
    async fn the_resolver_refuses_names_that_resolve_to_internal_addresses() {
        let refusing = FilteringResolver {
            allow_private: false,
        };
        let name = Name::from_str("localhost").expect("name");
        assert!(
            refusing.resolve(name).await.is_err(),
            "localhost is internal"
        );
        let allowing = FilteringResolver {
            allow_private: true,
        };
        let addrs: Vec<SocketAddr> = allowing
            .resolve(Name::from_str("localhost").expect("name"))
            .await
            .expect("resolves")
            .collect();
        assert!(addrs.iter().all(|a| a.ip().is_loopback()));
    }

    #[tokio::test]
    async fn the_save_time_check_reports_internal_names() {
        assert!(SystemAddressCheck.resolves_internal("localhost", 443).await);
        assert!(
            SystemAddressCheck
                .resolves_internal("localhost.", 443)
                .await
        );
        assert!(
            !SystemAddressCheck
                .resolves_internal("name.invalid", 443)
                .await,
            "unresolvable: not refused here"
        );
    }

    #[test]
    fn the_breaker_opens_after_repeated_timeouts_and_half_opens_after_its_cooldown() {
        let t0 = Instant::now();
        let mut b = Breaker::default();
        assert_eq!(b.room(8, 3, t0), 5);
        for _ in 0..BREAKER_THRESHOLD - 1 {
            b.timed_out(t0);
        }
        assert_eq!(b.room(8, 0, t0), 8, "still closed");
        b.timed_out(t0);
        assert_eq!(b.room(8, 0, t0), 0, "open");
        let later = t0 + BREAKER_BASE + Duration::from_millis(1);
        assert_eq!(b.room(8, 0, later), 1, "half-open: one probe");
        assert_eq!(b.room(8, 1, later), 0);
        b.timed_out(later);
        assert_eq!(
            b.room(8, 0, later + BREAKER_BASE + Duration::from_millis(1)),
            0,
            "the cool-down doubled"
        );
        b.answered();
        assert_eq!(b.room(8, 0, later), 8, "an answer closes it");
    }

    #[tokio::test]
    async fn errors_are_classified_without_the_url() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("client");
        // A closed port on loopback: refused at once.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        drop(listener);
        let e = client
            .post(format!("https://127.0.0.1:{port}/h?token=SECRET"))
            .send()
            .await
            .expect_err("refused");
        match classify(&e) {
            Sent::NoAnswer { error, timed_out } => {
                assert_eq!(error, "connection refused");
                assert!(!timed_out);
            }
            Sent::Answered(..) => panic!("no answer expected"),
        }
    }
}
