//! The Prometheus registry of this process, the `/metrics` listener, and the gauges refreshed
//! from the database.

use std::net::TcpListener;
use std::sync::OnceLock;
use std::time::Duration;

use actix_web::{App, HttpResponse, web};
use anyhow::Context;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use partner_domain::kernel::clock::Clock;
use partner_postgres::PgStore;

/// How often the database gauges are refreshed.
pub const REFRESH_EVERY: Duration = Duration::from_secs(15);

const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The readiness gauge (1: the database answers), also set by `/readyz`.
pub const READY: &str = partner_http::READY_GAUGE;

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// The process-wide registry, installed as the `metrics` recorder on first use (several servers
/// in one process, as in the tests, share it).
pub fn handle() -> anyhow::Result<PrometheusHandle> {
    if let Some(h) = HANDLE.get() {
        return Ok(h.clone());
    }
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("duration_seconds".into()), LATENCY_BUCKETS)
        .context("metric buckets")?
        .build_recorder();
    let h = recorder.handle();
    if HANDLE.set(h.clone()).is_ok() {
        // Only the first caller gets here; a recorder installed by someone else stays.
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!("a metrics recorder was already installed; /metrics may be empty");
        }
        describe();
        Ok(h)
    } else {
        HANDLE
            .get()
            .cloned()
            .ok_or_else(|| anyhow::anyhow!("metrics registry missing"))
    }
}

fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        "http_requests_total",
        "HTTP requests answered, by route template, method and status"
    );
    describe_histogram!(
        "http_request_duration_seconds",
        Unit::Seconds,
        "Time to answer, by route template"
    );
    describe_counter!(
        "webhook_attempts_total",
        "Webhook delivery attempts by outcome (delivered, rejected, no_answer)"
    );
    describe_histogram!(
        "webhook_attempt_duration_seconds",
        Unit::Seconds,
        "Time of one webhook attempt"
    );
    describe_counter!(
        "webhook_claims_total",
        "Claim statements of the delivery worker by result (claimed: some deliveries, empty: none); with webhook_attempts_total, the claims per delivery"
    );
    describe_histogram!(
        "webhook_check_duration_seconds",
        Unit::Seconds,
        "Time from an attempt's ask for its endpoint-row check to the answer (issue 23, N9d)"
    );
    describe_counter!(
        "webhook_sends_vouched_total",
        "Webhook sends by what vouched for their endpoint row: the claim's own read (by=claim, sent within 5 ms of the claim) or a row check (by=check)"
    );
    describe_counter!(
        "webhook_check_reads_total",
        "Reads of an endpoint's row made by the endpoint-row checks; with webhook_attempts_total, the reads per attempt (attempts that ask while an answer is recent share it)"
    );
    describe_counter!(
        "webhook_checks_late_total",
        "Endpoint-row checks whose answer was older than 50 ms from its read's start, so it vouched for nothing and was asked again"
    );
    describe_gauge!(
        "webhook_deliveries_pending",
        "Deliveries not yet delivered or failed (whole database)"
    );
    describe_gauge!(
        "webhook_oldest_pending_age_seconds",
        Unit::Seconds,
        "Age of the oldest pending delivery (0 when none)"
    );
    describe_gauge!(
        "db_pool_connections",
        "Connections of this process's pool by state (idle, in_use, waiting, max)"
    );
    describe_histogram!(
        "db_probe_duration_seconds",
        Unit::Seconds,
        "Time the database liveness probe's SELECT 1 took to be answered (PARTNER_DB_PROBE_TIMEOUT: unanswered that long marks the database unreachable)"
    );
    describe_counter!(
        "db_unreachable_total",
        "Times the liveness probe marked the database unreachable (pooled connections closed, calls answered 503 until it answers again)"
    );
    metrics::counter!("db_unreachable_total").increment(0);
    describe_gauge!(
        READY,
        "1 when this process's database answers (as `/readyz`), else 0, and 0 from SIGTERM on (the drain); refreshed every 15 s and on each `/readyz`"
    );
    describe_counter!(
        "rate_limit_rejections_total",
        "Requests answered 429, by endpoint group (`public`: the catalog and embedded view, per client address; `webhook_endpoints` includes the test/resend/recover bound)"
    );
    describe_counter!(
        "rate_limiter_errors_total",
        "Rate-limit decisions that could not use Redis (decided in-process)"
    );
    describe_counter!(
        partner_http::audit::CROSS_READS,
        "Reads by an admin token of a partner other than its own (each one also logged, target audit)"
    );
    // Exported from the start, at 0 (Prometheus' instrumentation guide: a series known to exist
    // is exported before its first event), so dashboards show 0 and an alert needs no `absent()`.
    metrics::counter!(partner_http::audit::CROSS_READS).increment(0);
    for outcome in ["delivered", "rejected", "no_answer"] {
        metrics::counter!("webhook_attempts_total", "outcome" => outcome).increment(0);
    }
    for result in ["claimed", "empty"] {
        metrics::counter!("webhook_claims_total", "result" => result).increment(0);
    }
    metrics::counter!("webhook_check_reads_total").increment(0);
    // Registering the histogram exports its buckets, `_sum` and `_count` at 0.
    let _ = metrics::histogram!("webhook_attempt_duration_seconds");
    metrics::counter!("rate_limiter_errors_total").increment(0);
    // Every group's 429 series, and the public surfaces', exist before the first 429.
    {
        use partner_domain::rate_limit::Group;
        for group in [
            Group::Leads,
            Group::Links,
            Group::Coupons,
            Group::Orders,
            Group::Payouts,
            Group::SubAccounts,
            Group::WebhookEndpoints,
        ] {
            metrics::counter!("rate_limit_rejections_total", "group" => group.as_str())
                .increment(0);
        }
        metrics::counter!("rate_limit_rejections_total", "group" => "public").increment(0);
    }
    describe_counter!(
        crate::edge::REJECTED,
        "Requests refused before parsing (request line, header size or count, slow or malformed head), by reason"
    );
    crate::edge::export_rejections();
}

/// Serves `GET /metrics` on `listener`, behind the same guard as the API (`crate::edge`).
pub fn serve(
    listener: TcpListener,
    handle: PrometheusHandle,
) -> std::io::Result<actix_web::dev::Server> {
    crate::edge::serve(listener, 1, 1, false, move || {
        let handle = handle.clone();
        App::new().route(
            "/metrics",
            web::get().to(move || {
                let body = handle.render();
                async move {
                    HttpResponse::Ok()
                        .content_type("text/plain; version=0.0.4; charset=utf-8")
                        .body(body)
                }
            }),
        )
    })
}

/// Refreshes the pool and backlog gauges every [`REFRESH_EVERY`], forever.
pub async fn refresh_gauges(
    store: PgStore,
    clock: std::sync::Arc<dyn Clock>,
    handle: PrometheusHandle,
    stopping: std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    let mut tick = tokio::time::interval(REFRESH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        refresh_once(&store, clock.as_ref(), &stopping).await;
        handle.run_upkeep();
    }
}

/// One refresh of the database gauges. Once the process is stopping, readiness stays 0
/// whatever the database says, as `/readyz` answers 503: a scrape during the drain must not
/// show a stopping process as ready.
pub async fn refresh_once(
    store: &PgStore,
    clock: &dyn Clock,
    stopping: &std::sync::atomic::AtomicBool,
) {
    let p = store.pool_state();
    for (state, n) in [
        ("idle", p.idle),
        ("in_use", p.in_use),
        ("waiting", p.waiting),
        ("max", p.max),
    ] {
        metrics::gauge!("db_pool_connections", "state" => state).set(n as f64);
    }
    let backlog = store.webhook_backlog().await;
    let ready = backlog.is_ok() && !stopping.load(std::sync::atomic::Ordering::Relaxed);
    metrics::gauge!(READY).set(if ready { 1.0 } else { 0.0 });
    match backlog {
        Ok(b) => {
            metrics::gauge!("webhook_deliveries_pending").set(b.pending as f64);
            let age = b
                .oldest
                .map(|t| (clock.now() - t).as_seconds_f64().max(0.0))
                .unwrap_or(0.0);
            metrics::gauge!("webhook_oldest_pending_age_seconds").set(age);
        }
        Err(e) => tracing::warn!(error = %e, "could not read the webhook backlog for metrics"),
    }
}
