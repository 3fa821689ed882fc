//! Operating the service (extensions.md §5): shared rate limits through Redis, fail-open when
//! Redis is unreachable.

use partner_domain::kernel::clock::Clock;
use reqwest::{Method, Response, StatusCode};

use crate::helpers::{TestApp, assert_error, eventually, mid_hour_clock};

const LEADS: &str = "/api/v1/leads";
pub const REDIS_URL: &str = "redis://127.0.0.1:6379";
/// Nothing listens there (port 1 is privileged and unused).
pub const CLOSED_REDIS_URL: &str = "redis://127.0.0.1:1";

fn redis_quota(limit: u32) -> partner_http::Quota {
    partner_http::Quota {
        limit,
        window_secs: 3600,
    }
}

fn header(res: &Response, name: &str) -> i64 {
    res.headers()[name]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("integer")
}

#[tokio::test]
async fn two_instances_on_one_redis_share_a_tokens_budget() {
    // Keys of this test only, so tests running in parallel on the same Redis do not collide.
    let prefix = format!("test:{}:", uuid::Uuid::new_v4().simple());
    // Both instances on one clock in the middle of an hour: one window holds every call.
    let clock = mid_hour_clock();
    let a = TestApp::spawn_full(
        |c| {
            c.rate_limit = redis_quota(5);
            c.redis_url = Some(REDIS_URL.into());
            c.redis_key_prefix = prefix.clone();
        },
        clock.clone(),
    )
    .await;
    let b = a.sibling().await;
    let s = a.seed("acme", false).await;
    let now = clock.now().unix_timestamp();
    for (i, app) in [&a, &b, &a, &b, &b].into_iter().enumerate() {
        let res = app
            .api(Method::GET, LEADS, &s.token)
            .send()
            .await
            .expect("send");
        assert_eq!(res.status(), StatusCode::OK, "call {}", i + 1);
        assert_eq!(header(&res, "x-ratelimit-limit"), 5);
        assert_eq!(
            header(&res, "x-ratelimit-remaining"),
            4 - i64::try_from(i).expect("small"),
            "one budget across instances"
        );
        // The window is aligned as with the in-process limiter.
        let reset = header(&res, "x-ratelimit-reset");
        assert_eq!(reset % 3600, 0);
        assert_eq!(reset, now + 1800);
    }
    for app in [&a, &b] {
        let res = app
            .api(Method::GET, LEADS, &s.token)
            .send()
            .await
            .expect("send");
        assert_eq!(header(&res, "x-ratelimit-remaining"), 0);
        assert!(header(&res, "retry-after") >= 1);
        assert_error(res, 429, "rate_limited").await;
    }
    // Another group's budget is whole.
    let res = b
        .api(Method::GET, "/api/v1/sub-accounts", &s.token)
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(header(&res, "x-ratelimit-remaining"), 4);
}

#[tokio::test]
async fn an_unreachable_redis_fails_open_quickly() {
    let app = TestApp::spawn_with(|c| {
        c.rate_limit = redis_quota(100);
        c.redis_url = Some(CLOSED_REDIS_URL.into());
    })
    .await;
    let s = app.seed("acme", false).await;
    let started = std::time::Instant::now();
    for _ in 0..10 {
        let res = app
            .api(Method::GET, LEADS, &s.token)
            .send()
            .await
            .expect("send");
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(header(&res, "x-ratelimit-limit"), 100);
        assert!(header(&res, "x-ratelimit-remaining") < 100);
    }
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "no stall on the limiter: {:?}",
        started.elapsed()
    );
}

/// `GET /metrics`, checked line by line: comments, or `name{labels} value` with a number.
async fn scrape(app: &TestApp) -> Vec<(String, f64)> {
    let url = format!(
        "{}/metrics",
        app.metrics_address.as_deref().expect("metrics listener")
    );
    let res = app.client.get(url).send().await.expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    let ct = res.headers()["content-type"]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert!(ct.starts_with("text/plain"), "{ct}");
    let text = res.text().await.expect("text");
    let mut out = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let (series, value) = line.rsplit_once(' ').expect("name value");
        let name_end = series.find('{').unwrap_or(series.len());
        let name = &series[..name_end];
        assert!(
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "metric name in {line}"
        );
        if name_end < series.len() {
            assert!(series.ends_with('}'), "labels in {line}");
        }
        let v: f64 = value.parse().expect("numeric value");
        out.push((series.to_owned(), v));
    }
    out
}

fn value(metrics: &[(String, f64)], series: &str) -> f64 {
    metrics
        .iter()
        .find(|(s, _)| s == series)
        .map(|(_, v)| *v)
        .unwrap_or(0.0)
}

#[tokio::test]
async fn metrics_listener_serves_prometheus_text_and_counters_move() {
    let app = TestApp::spawn_full(
        |c| {
            c.metrics_bind = Some("127.0.0.1:0".into());
            c.rate_limit = redis_quota(1);
        },
        mid_hour_clock(),
    )
    .await;
    let s = app.seed("acme", false).await;
    let ok = r#"http_requests_total{route="/api/v1/leads",method="GET",status="200"}"#;
    let limited = r#"http_requests_total{route="/api/v1/leads",method="GET",status="429"}"#;
    let rejections = r#"rate_limit_rejections_total{group="leads"}"#;
    let before = scrape(&app).await;
    for _ in 0..3 {
        app.api(Method::GET, LEADS, &s.token)
            .send()
            .await
            .expect("send");
    }
    // A path that matches no route is labelled as such, never by its raw path.
    app.request(Method::GET, "/no/such/place/123")
        .send()
        .await
        .expect("send");
    let after = scrape(&app).await;
    assert!(value(&after, ok) >= value(&before, ok) + 1.0);
    assert!(value(&after, limited) >= value(&before, limited) + 2.0);
    assert!(value(&after, rejections) >= value(&before, rejections) + 2.0);
    assert!(after.iter().any(|(s, _)| {
        s.starts_with(r#"http_request_duration_seconds_bucket{route="/api/v1/leads",le="#)
    }));
    assert!(
        after
            .iter()
            .any(|(s, _)| s.contains(r#"route="unmatched""#))
    );
    assert!(!after.iter().any(|(s, _)| s.contains("/no/such/place")));
    // Series that exist before their first event are exported from the start (at 0).
    for series in [
        "webhook_deliveries_pending",
        "webhook_oldest_pending_age_seconds",
        r#"db_pool_connections{state="max"}"#,
        r#"webhook_attempts_total{outcome="delivered"}"#,
        r#"webhook_attempts_total{outcome="rejected"}"#,
        r#"webhook_attempts_total{outcome="no_answer"}"#,
        r#"webhook_claims_total{result="claimed"}"#,
        r#"webhook_claims_total{result="empty"}"#,
        "webhook_attempt_duration_seconds_count",
        "rate_limiter_errors_total",
    ] {
        assert!(
            after.iter().any(|(s, _)| s == series),
            "{series} is exported"
        );
    }
    // The gauge's ceiling is the whole configured size, split between one pool per HTTP
    // worker and the shared pool.
    let workers = std::thread::available_parallelism().map_or(2, usize::from);
    let (per_worker, shared) = partner_postgres::split_pool(app.config.db_pool_size, workers);
    assert_eq!(
        value(&after, r#"db_pool_connections{state="max"}"#),
        (per_worker * workers + shared) as f64
    );
    // The partner API is not served on the metrics listener, nor /metrics on the API's.
    let res = app
        .request(Method::GET, "/metrics")
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
}

/// Found by the black-box run (tests/attack/bbapi): `rate_limit_rejections_total` was missing
/// until a group's first 429, and the 429s of the test/resend/recover bound (extensions §12)
/// were not counted at all.
#[tokio::test]
async fn rate_limit_rejections_are_exported_per_group_from_the_start_and_count_the_control_bound() {
    let app = TestApp::spawn_full(
        |c| c.metrics_bind = Some("127.0.0.1:0".into()),
        mid_hour_clock(),
    )
    .await;
    let before = scrape(&app).await;
    for group in [
        "leads",
        "links",
        "coupons",
        "orders",
        "payouts",
        "sub_accounts",
        "webhook_endpoints",
        "public",
    ] {
        let series = format!(r#"rate_limit_rejections_total{{group="{group}"}}"#);
        assert!(
            before.iter().any(|(s, _)| *s == series),
            "{series} is exported before any 429"
        );
    }
    let s = app.seed("acme", false).await;
    let unknown = uuid::Uuid::new_v4();
    let resend = format!("/api/v1/webhook-deliveries/{unknown}/resend");
    // Twenty calls answered 404 use the partner's bound; the 21st is refused.
    for _ in 0..20 {
        let res = app
            .api(Method::POST, &resend, &s.token)
            .send()
            .await
            .expect("send");
        assert_eq!(res.status(), StatusCode::NOT_FOUND);
    }
    let series = r#"rate_limit_rejections_total{group="webhook_endpoints"}"#;
    let at_20 = value(&scrape(&app).await, series);
    let res = app
        .api(Method::POST, &resend, &s.token)
        .send()
        .await
        .expect("send");
    assert_error(res, 429, "rate_limited").await;
    assert!(value(&scrape(&app).await, series) >= at_20 + 1.0);
}

#[tokio::test]
async fn an_unreachable_redis_is_counted_in_metrics() {
    let app = TestApp::spawn_with(|c| {
        c.metrics_bind = Some("127.0.0.1:0".into());
        c.redis_url = Some(CLOSED_REDIS_URL.into());
    })
    .await;
    let s = app.seed("acme", false).await;
    let before = value(&scrape(&app).await, "rate_limiter_errors_total");
    for _ in 0..3 {
        let res = app
            .api(Method::GET, LEADS, &s.token)
            .send()
            .await
            .expect("send");
        assert_eq!(res.status(), StatusCode::OK);
    }
    let after = value(&scrape(&app).await, "rate_limiter_errors_total");
    assert!(after >= before + 3.0, "{before} -> {after}");
}

#[tokio::test]
async fn the_operator_api_can_have_a_listener_of_its_own() {
    let app = TestApp::spawn_with(|c| c.internal_bind = Some("127.0.0.1:0".into())).await;
    let internal = app.internal_address.clone().expect("internal listener");
    // `seed` goes through the operator API, on its own listener.
    let s = app.seed("acme", false).await;
    // On PARTNER_BIND, the operator API does not exist.
    let res = app
        .request(Method::GET, "/internal/v1/partners/acme")
        .bearer_auth(crate::helpers::INTERNAL_TOKEN)
        .send()
        .await
        .expect("send");
    assert_error(res, 404, "not_found").await;
    // The partner API is served on PARTNER_BIND only.
    let res = app
        .api(Method::GET, LEADS, &s.token)
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    let res = app
        .client
        .get(format!("{internal}{LEADS}"))
        .bearer_auth(&s.token)
        .send()
        .await
        .expect("send");
    assert_error(res, 404, "not_found").await;
    // The operator guard still applies there.
    let res = app
        .client
        .get(format!("{internal}/internal/v1/partners/acme"))
        .bearer_auth("internal-test-token-0123456789abcdeF")
        .send()
        .await
        .expect("send");
    assert_error(res, 401, "invalid_token").await;
}

#[tokio::test]
async fn webhook_attempts_are_counted() {
    let rx = crate::receiver::Receiver::start().await;
    let ca = rx.ca_file.clone();
    let app = TestApp::spawn_with(move |c| {
        c.metrics_bind = Some("127.0.0.1:0".into());
        c.webhook_allow_private = true;
        c.webhook_ca_file = Some(ca);
        c.webhook_poll_interval = std::time::Duration::from_millis(25);
    })
    .await;
    let delivered = r#"webhook_attempts_total{outcome="delivered"}"#;
    let claimed = r#"webhook_claims_total{result="claimed"}"#;
    let (before, claims_before) = {
        let m = scrape(&app).await;
        (value(&m, delivered), value(&m, claimed))
    };
    let s = app.seed("acme", false).await;
    let res = app
        .api(Method::POST, "/api/v1/webhook-endpoints", &s.token)
        .json(&serde_json::json!({ "url": rx.url, "events": ["lead.created"] }))
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::CREATED);
    app.ingest_lead(&crate::helpers::lead_body("acme", serde_json::json!({})))
        .await;
    rx.wait_for(1).await;
    // The attempt is counted once its answer is in, just after the receiver saw it.
    let m = eventually(
        r#"webhook_attempts_total{outcome="delivered"} to move"#,
        || async {
            let m = scrape(&app).await;
            (value(&m, delivered) > before).then_some(m)
        },
    )
    .await;
    assert!(value(&m, "webhook_attempt_duration_seconds_count") >= 1.0);
    assert!(
        value(&m, claimed) > claims_before,
        "the claim that took the delivery is counted"
    );
}
