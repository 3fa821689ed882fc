//! Builds the application from a [`Config`]: database, migrations, services, HTTP server.

use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use actix_web::{App, web};
use anyhow::Context;
use partner_domain::account::AccountService;
use partner_domain::account::auth::AuthService;
use partner_domain::account::portal::{PortalService, PortalTtl};
use partner_domain::account::token::TokenPepper;
use partner_domain::catalog::CatalogService;
use partner_domain::coupon::CouponService;
use partner_domain::idempotency::IdempotencyService;
use partner_domain::kernel::clock::{Clock, SystemClock};
use partner_domain::kernel::cursor::CursorKey;
use partner_domain::kernel::random::{Random, SystemRandom};
use partner_domain::lead::LeadService;
use partner_domain::links::{LinkBases, LinkService};
use partner_domain::order::OrderService;
use partner_domain::payout::PayoutService;
use partner_domain::sub_account::SubAccountService;
use partner_domain::webhook::{EventFeed, WebhookService};
use partner_http::{
    AppState, PublicLimitStore, PublicLimiter, PublicQuota, RateLimitStore, RateLimiter, Surface,
};
use partner_postgres::PgStore;
use partner_webhooks::{SystemAddressCheck, Worker, WorkerConfig};

use crate::config::{Config, Role};
use crate::shutdown::{self, HTTP_DRAIN_SECS, Listening, close_when_stopping};

/// The longest `PARTNER_DB_PROBE_TIMEOUT` with which a call in flight at a freeze is answered
/// within extensions §11's second: the probe's 200 ms pause, this, and a margin.
const MOST_PROBE_FOR_A_SECOND: std::time::Duration = std::time::Duration::from_millis(800);

/// The longest a rate-limit decision waits for Redis before the in-process budgets decide.
const REDIS_DECISION_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(75);

/// A bound, ready-to-run server.
pub struct Application {
    port: u16,
    metrics_port: Option<u16>,
    server: actix_web::dev::Server,
    /// A second handle on the server's listening socket (src/shutdown.rs).
    socket: TcpListener,
    metrics_server: Option<actix_web::dev::ServerHandle>,
    internal_port: Option<u16>,
    internal_server: Option<Listening>,
    worker: Option<RunningWorker>,
    /// Set at SIGTERM: `/readyz` answers 503, answers close their connections.
    stopping: Arc<AtomicBool>,
    shutdown_drain: std::time::Duration,
}

/// The delivery worker of this process and the signal that stops it.
struct RunningWorker {
    stop: Arc<tokio::sync::Notify>,
    task: tokio::task::JoinHandle<()>,
    listener: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Application {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Application")
            .field("port", &self.port)
            .finish()
    }
}

/// Whether `build` applies pending migrations first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Migrations {
    Apply,
    Skip,
}

impl Application {
    /// Creates the database when missing, applies migrations, and binds the listener.
    pub async fn build(config: &Config, migrations: Migrations) -> anyhow::Result<Self> {
        Self::build_with_clock(config, migrations, Arc::new(SystemClock)).await
    }

    /// As [`Application::build`], with an injected clock (tests move time forward with it).
    pub async fn build_with_clock(
        config: &Config,
        migrations: Migrations,
        clock: Arc<dyn Clock>,
    ) -> anyhow::Result<Self> {
        prepare_database(config, migrations).await?;
        // One HTTP worker per core, each with a pool of its own (`PgStore::attach_worker`); a
        // process that serves no API has only the shared pool.
        let http_workers = match config.role {
            Role::All | Role::Api => std::thread::available_parallelism().map_or(2, usize::from),
            Role::Worker => 0,
        };
        let store = Arc::new(PgStore::with_bound(
            &config.database_url,
            config.db_pool_size,
            http_workers,
            partner_postgres::Bound(config.db_hold_timeout),
        )?);
        // Extensions §11: a database that stops answering (frozen, its peer still acknowledging)
        // fails calls within a second, not after the hold bound (`liveness.rs`).
        store.probe_liveness(partner_postgres::Probe(config.db_probe_timeout));
        // Accepted (an operator may trade §11's second for fewer false alarms), but said.
        match config.db_probe_timeout {
            None => tracing::warn!(
                "PARTNER_DB_PROBE_TIMEOUT=0: no liveness probe; a frozen database fails calls only after PARTNER_DB_HOLD_TIMEOUT, not within the 1 s of extensions §11"
            ),
            Some(t) if t > MOST_PROBE_FOR_A_SECOND => tracing::warn!(
                probe_ms = u64::try_from(t.as_millis()).unwrap_or(u64::MAX),
                "PARTNER_DB_PROBE_TIMEOUT above 800 ms: a frozen database fails calls later than the 1 s of extensions §11"
            ),
            Some(_) => {}
        }
        let rng: Arc<dyn Random> = Arc::new(SystemRandom::new());
        let pepper = config
            .token_pepper
            .as_deref()
            .map(|p| TokenPepper::new(p.as_bytes()));
        // Cursors are signed with a key derived from the pepper, so every instance accepts the
        // others' cursors. Without a pepper nothing authenticates, so any key will do.
        let cursor_key = match &pepper {
            Some(p) => CursorKey::new(&p.derive("lead-cursor")),
            None => {
                let mut k = [0u8; 32];
                rng.fill(&mut k);
                CursorKey::new(&k)
            }
        };
        // The delivery log's cursors have a key of their own, so a leads cursor is no position
        // in it.
        let delivery_cursor_key = match &pepper {
            Some(p) => CursorKey::new(&p.derive("webhook-delivery-cursor")),
            None => {
                let mut k = [0u8; 32];
                rng.fill(&mut k);
                CursorKey::new(&k)
            }
        };
        // The events feed's cursors too: a listing's cursor is no feed position.
        let feed_cursor_key = match &pepper {
            Some(p) => CursorKey::new(&p.derive("events-feed-cursor")),
            None => {
                let mut k = [0u8; 32];
                rng.fill(&mut k);
                CursorKey::new(&k)
            }
        };
        // The partner API's budgets and the public surfaces' live in the same store.
        let public_quota = PublicQuota::per_second(config.public_rate);
        let (limiter, public_limiter): (Arc<dyn RateLimitStore>, Arc<dyn PublicLimitStore>) =
            match &config.redis_url {
                None => (
                    Arc::new(RateLimiter::new(config.rate_limit)),
                    Arc::new(PublicLimiter::new(public_quota)),
                ),
                Some(url) => {
                    let limiter = partner_redis::RedisRateLimiter::new(
                        url,
                        &config.redis_key_prefix,
                        config.rate_limit,
                        REDIS_DECISION_TIMEOUT,
                    )
                    .context("PARTNER_REDIS_URL")?
                    .with_public_quota(public_quota);
                    limiter.warm_up().await;
                    let limiter = Arc::new(limiter);
                    (limiter.clone(), limiter)
                }
            };
        let stopping = Arc::new(AtomicBool::new(false));
        let state = web::Data::new(AppState {
            auth: AuthService::new(store.clone(), pepper.clone(), clock.clone()),
            accounts: AccountService::new(
                store.clone(),
                pepper.clone(),
                clock.clone(),
                rng.clone(),
            ),
            portal: PortalService::new(
                store.clone(),
                pepper,
                clock.clone(),
                rng.clone(),
                PortalTtl {
                    code: time::Duration::try_from(config.portal_code_ttl)
                        .context("PARTNER_PORTAL_CODE_TTL")?,
                    session: time::Duration::try_from(config.portal_session_ttl)
                        .context("PARTNER_PORTAL_SESSION_TTL")?,
                },
            ),
            base_url: config.base_url.clone(),
            catalog_url: config.catalog_url.clone(),
            sub_accounts: SubAccountService::new(store.clone(), clock.clone(), rng.clone()),
            leads: LeadService::new(
                store.clone(),
                store.clone(),
                clock.clone(),
                rng.clone(),
                cursor_key,
            ),
            orders: OrderService::new(store.clone(), store.clone(), clock.clone(), rng.clone()),
            payouts: PayoutService::new(store.clone(), store.clone(), clock.clone(), rng.clone()),
            links: LinkService::new(
                store.clone(),
                store.clone(),
                store.clone(),
                LinkBases {
                    intake: config.intake_url.clone(),
                    legacy_intake: config.legacy_intake_url.clone(),
                    care_services: config.care_services_url.clone(),
                },
            ),
            catalog: CatalogService::new(store.clone(), store.clone(), clock.clone()),
            coupons: CouponService::new(store.clone(), store.clone(), clock.clone(), rng.clone()),
            webhooks: WebhookService::new(
                store.clone(),
                store.clone(),
                Arc::new(SystemAddressCheck),
                clock.clone(),
                rng.clone(),
                config.webhook_allow_private,
            )
            .with_delivery_cursors(delivery_cursor_key)
            .with_secret_overlap(config.webhook_secret_overlap),
            idempotency: IdempotencyService::new(store.clone(), clock.clone()),
            feed: EventFeed::new(
                store.clone(),
                clock.clone(),
                feed_cursor_key,
                config.event_retention,
            ),
            care_services_enabled: config.care_services_enabled,
            readiness: store.clone(),
            stopping: stopping.clone(),
            clock: clock.clone(),
            limiter,
            public_limiter,
            trusted_proxies: config.trusted_proxies.clone(),
            public_refusal_hold: config.public_refusal_hold,
            internal_token: config
                .internal_token
                .clone()
                .map(partner_http::OperatorToken::new),
        });
        let extra_roots_pem = match &config.webhook_ca_file {
            Some(p) => Some(std::fs::read(p).with_context(|| format!("reading {}", p.display()))?),
            None => None,
        };
        if config.role != Role::Worker {
            // Kept idempotent answers past their 24 hours are pruned by the processes that
            // keep them (any number of instances may: each batch deletes what it finds).
            tokio::spawn(prune_idempotency_keys(state.idempotency.clone()));
            // Workers of other instances learn of this process's writes.
            tokio::spawn(partner_postgres::announce_deliveries(
                config.database_url.clone(),
                store.deliveries_written(),
            ));
        }
        let gauge_clock = clock.clone();
        let worker = match config.role {
            Role::Api => None,
            Role::All | Role::Worker => {
                let worker = Worker::new(
                    store.clone(),
                    clock,
                    rng,
                    // Deliveries carry the records as the API's answers show them.
                    Arc::new(partner_http::WebhookData),
                    WorkerConfig {
                        retry_schedule: config.webhook_retry_schedule.clone(),
                        timeout: config.webhook_timeout,
                        allow_private: config.webhook_allow_private,
                        extra_roots_pem,
                        poll_interval: config.webhook_poll_interval,
                        concurrency: config.webhook_concurrency,
                        endpoint_concurrency: config.webhook_endpoint_concurrency,
                        retention: config.webhook_retention,
                        event_retention: config.event_retention,
                        maintenance_interval: config.webhook_maintenance_interval,
                        disable_after: config.webhook_disable_after,
                    },
                )?;
                // New deliveries wake the worker as soon as their transaction commits: this
                // process's own writes directly, other instances' through LISTEN.
                let waker = worker.waker();
                let mut written = store.deliveries_written();
                let local = waker.clone();
                tokio::spawn(async move {
                    while written.changed().await.is_ok() {
                        local.notify_one();
                    }
                });
                let changes = worker.clone();
                let heard = worker.clone();
                let proven = worker.clone();
                // Until the listener listens, no claim is proven fresh by its announcements.
                worker.listening(false);
                let listener = tokio::spawn(partner_postgres::listen_for_deliveries(
                    config.database_url.clone(),
                    move || waker.notify_one(),
                    move |endpoint| changes.endpoint_changed(endpoint),
                    move |on| heard.listening(on),
                    move |until| proven.heard_until(until),
                ));
                let stop = Arc::new(tokio::sync::Notify::new());
                let stopped = stop.clone();
                let task = tokio::spawn(worker.run(async move { stopped.notified().await }));
                Some(RunningWorker {
                    stop,
                    task,
                    listener,
                })
            }
        };
        let (metrics_port, metrics_server) = match &config.metrics_bind {
            None => (None, None),
            Some(bind) => {
                let handle = crate::observability::handle()?;
                let listener = TcpListener::bind(bind)
                    .with_context(|| format!("PARTNER_METRICS_BIND: cannot bind {bind}"))?;
                let port = listener.local_addr()?.port();
                let server = crate::observability::serve(listener, handle.clone())?;
                let server_handle = server.handle();
                tokio::spawn(server);
                crate::observability::refresh_once(&store, gauge_clock.as_ref(), &stopping).await;
                tokio::spawn(crate::observability::refresh_gauges(
                    (*store).clone(),
                    gauge_clock,
                    handle,
                    stopping.clone(),
                ));
                (Some(port), Some(server_handle))
            }
        };
        let listener = TcpListener::bind(&config.bind)
            .with_context(|| {
                format!(
                    "PARTNER_BIND: cannot listen on {} (another process may hold it: set PARTNER_BIND to another host:port, or :0 for any free port)",
                    config.bind
                )
            })?;
        let port = listener.local_addr()?.port();
        // The operator API gets a listener of its own when asked (a worker serves none).
        let (internal_port, internal_server) = match (&config.internal_bind, config.role) {
            (Some(bind), Role::All | Role::Api) => {
                let listener = TcpListener::bind(bind)
                    .with_context(|| format!("PARTNER_INTERNAL_BIND: cannot bind {bind}"))?;
                let port = listener.local_addr()?.port();
                let socket = listener.try_clone()?;
                let state = state.clone();
                let stopping = stopping.clone();
                let server = crate::edge::serve(listener, 2, HTTP_DRAIN_SECS, false, move || {
                    App::new()
                        .wrap_fn(close_when_stopping(stopping.clone()))
                        .configure(|cfg| {
                            partner_http::configure_surface(cfg, state.clone(), Surface::Internal)
                        })
                })?;
                let handle = server.handle();
                tokio::spawn(server);
                (Some(port), Some(Listening { handle, socket }))
            }
            _ => (None, None),
        };
        let surface = match config.role {
            Role::All | Role::Api if internal_port.is_some() => Surface::Public,
            Role::All | Role::Api => Surface::Full,
            Role::Worker => Surface::HealthOnly,
        };
        let worker_store = store.clone();
        let socket = listener.try_clone()?;
        let stop_flag = stopping.clone();
        // Request heads pass the guard of `edge` before actix parses them. Signals are handled
        // by `run_until_stopped`.
        let server = crate::edge::serve(
            listener,
            http_workers.max(1),
            HTTP_DRAIN_SECS,
            false,
            move || {
                // Runs on each worker thread as it starts.
                worker_store.attach_worker();
                App::new()
                    .wrap_fn(close_when_stopping(stop_flag.clone()))
                    .configure(|cfg| partner_http::configure_surface(cfg, state.clone(), surface))
            },
        )?;
        Ok(Self {
            port,
            metrics_port,
            metrics_server,
            internal_port,
            internal_server,
            server,
            socket,
            worker,
            stopping,
            shutdown_drain: config.shutdown_drain,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The port of the operator API's own listener, when there is one.
    pub fn internal_port(&self) -> Option<u16> {
        self.internal_port
    }

    /// The port of the `/metrics` listener, when there is one.
    pub fn metrics_port(&self) -> Option<u16> {
        self.metrics_port
    }

    /// Whether this process runs a delivery worker (its role is `all` or `worker`).
    pub fn runs_worker(&self) -> bool {
        self.worker.is_some()
    }

    /// Serves until SIGTERM or SIGINT, then stops as src/shutdown.rs describes: `/readyz`
    /// answers 503 at once and the delivery worker claims nothing more (it finishes its attempts
    /// in flight within the attempt timeout); the listeners serve on for `PARTNER_SHUTDOWN_DRAIN`,
    /// then stop accepting, answer what is queued (503) and what they accepted (at most 10 s).
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        let mut listening = vec![Listening {
            handle: self.server.handle(),
            socket: self.socket,
        }];
        listening.extend(self.internal_server);
        let mut served = tokio::spawn(self.server);
        let ended_by_itself = tokio::select! {
            r = &mut served => Some(r),
            signal = shutdown::signal() => {
                tracing::info!(
                    signal,
                    drain_ms = u64::try_from(self.shutdown_drain.as_millis()).unwrap_or(u64::MAX),
                    "stopping: /readyz answers 503; serving on for the drain, then answering what is in flight"
                );
                None
            }
        };
        self.stopping.store(true, Ordering::Relaxed);
        // A scrape during the drain must see what `/readyz` answers, not the last refresh.
        metrics::gauge!(crate::observability::READY).set(0.0);
        if let Some(w) = &self.worker {
            w.listener.abort();
            // `notify_one` keeps a permit, so the worker stops even if it is not waiting yet.
            w.stop.notify_one();
        }
        if ended_by_itself.is_none() {
            tokio::time::sleep(self.shutdown_drain).await;
        }
        shutdown::stop(listening).await;
        if let Some(m) = self.metrics_server {
            m.stop(true).await;
        }
        if let Some(w) = self.worker
            && let Err(e) = w.task.await
        {
            tracing::warn!(error = %e, "the webhook worker ended abnormally");
        }
        let served = match ended_by_itself {
            Some(r) => r,
            None => served.await,
        };
        served.unwrap_or_else(|e| Err(std::io::Error::other(e)))
    }
}

/// Creates the database when it is missing and, unless told not to, applies migrations.
pub async fn prepare_database(config: &Config, migrations: Migrations) -> anyhow::Result<()> {
    partner_postgres::ensure_database(&config.database_url)
        .await
        .context("preparing the database")?;
    if migrations == Migrations::Apply {
        let applied = partner_postgres::migrate(&config.database_url)
            .await
            .context("applying migrations")?;
        for m in applied {
            tracing::info!(migration = %m, "applied migration");
        }
    }
    Ok(())
}

/// Deletes expired idempotency keys every minute, in batches of 500 (extensions §8.3).
async fn prune_idempotency_keys(service: IdempotencyService) {
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(60)).await;
        match service.prune(500, 1000).await {
            Ok(0) => {}
            Ok(n) => tracing::debug!(keys = n, "expired idempotency keys pruned"),
            Err(e) => tracing::warn!(error = %e, "pruning idempotency keys failed"),
        }
    }
}
