//! S-12 (extensions.md §12, "Public surfaces are limited"): the catalog and the embedded view
//! admit at most `PARTNER_PUBLIC_RATE` requests a second per client address, bursts up to twice
//! that, one budget for both; the client address comes from `X-Forwarded-For` only when the peer
//! is a trusted proxy. Time is the injected clock's: nothing here sleeps.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use reqwest::{Method, Response, StatusCode};

use crate::helpers::{TestApp, assert_error, mid_hour_clock};
use crate::operate::{CLOSED_REDIS_URL, REDIS_URL};

/// The public paths, taken in turn: one budget covers them all.
const PUBLIC: [&str; 3] = [
    "/api/all-products?partner_id=acme",
    "/embed/care-services?partner_id=acme",
    "/api/weight-loss?partner_id=acme",
];

/// A client whose connections come from `from` (any address of 127.0.0.0/8 reaches the server
/// on Linux's loopback).
fn client_from(from: Ipv4Addr) -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .local_address(IpAddr::V4(from))
        .build()
        .expect("client")
}

async fn get(app: &TestApp, client: &reqwest::Client, i: usize, xff: Option<&str>) -> Response {
    let path = PUBLIC[i % PUBLIC.len()];
    let mut req = client.request(Method::GET, app.url(path));
    if let Some(xff) = xff {
        req = req.header("x-forwarded-for", xff);
    }
    req.send().await.expect("send")
}

/// Sends `n` requests, asserting none is limited.
async fn admitted(app: &TestApp, client: &reqwest::Client, n: usize, xff: Option<&str>) {
    for i in 0..n {
        let res = get(app, client, i, xff).await;
        assert_ne!(
            res.status(),
            StatusCode::TOO_MANY_REQUESTS,
            "request {} of {n} ({:?})",
            i + 1,
            PUBLIC[i % PUBLIC.len()]
        );
    }
}

/// Asserts a 429 `rate_limited` with `Retry-After` and the contract's error body.
async fn limited(res: Response) {
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS, "{}", res.url());
    let retry: u64 = res
        .headers()
        .get("retry-after")
        .expect("Retry-After")
        .to_str()
        .expect("ascii")
        .parse()
        .expect("seconds");
    assert!(retry >= 1);
    assert_error(res, 429, "rate_limited").await;
}

#[tokio::test]
async fn s12_a_burst_beyond_twice_the_rate_is_429_and_other_addresses_are_unaffected() {
    let clock = mid_hour_clock();
    let app = TestApp::spawn_full(
        |c| {
            c.public_rate = 5;
            c.public_refusal_hold = Duration::ZERO;
        },
        clock.clone(),
    )
    .await;
    let a = client_from(Ipv4Addr::new(127, 0, 0, 1));
    // The burst: twice the rate, across the catalog and the embedded view.
    admitted(&app, &a, 10, None).await;
    for i in 0..PUBLIC.len() {
        limited(get(&app, &a, i, None).await).await;
    }
    // Another address has a budget of its own.
    let b = client_from(Ipv4Addr::new(127, 0, 0, 2));
    admitted(&app, &b, 10, None).await;
    limited(get(&app, &b, 0, None).await).await;
    // The partner API is not behind this budget.
    let res = a.get(app.url("/api/v1/leads")).send().await.expect("send");
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    // A second later, the rate's worth again (not a new burst).
    clock.advance(time::Duration::seconds(1));
    admitted(&app, &a, 5, None).await;
    limited(get(&app, &a, 0, None).await).await;
}

#[tokio::test]
async fn s12_x_forwarded_for_is_honoured_only_from_a_trusted_proxy() {
    let clock = mid_hour_clock();
    let a = client_from(Ipv4Addr::new(127, 0, 0, 1));
    // No trusted proxy: a spoofed header changes nothing, whatever it says.
    let app = TestApp::spawn_full(
        |c| {
            c.public_rate = 5;
            c.public_refusal_hold = Duration::ZERO;
        },
        clock.clone(),
    )
    .await;
    for i in 0..10 {
        let xff = format!("198.51.100.{i}");
        let res = get(&app, &a, i, Some(&xff)).await;
        assert_ne!(res.status(), StatusCode::TOO_MANY_REQUESTS, "request {i}");
    }
    limited(get(&app, &a, 0, Some("198.51.100.77")).await).await;

    // 127.0.0.1 is a trusted proxy; 127.0.0.2 is not.
    let app = TestApp::spawn_full(
        |c| {
            c.public_rate = 5;
            c.public_refusal_hold = Duration::ZERO;
            c.trusted_proxies =
                partner_http::TrustedProxies::parse("127.0.0.1/32, 10.0.0.0/8").expect("list");
        },
        clock.clone(),
    )
    .await;
    admitted(&app, &a, 10, Some("198.51.100.1")).await;
    limited(get(&app, &a, 0, Some("198.51.100.1")).await).await;
    // The right-most hop that is not a trusted proxy is the client: what it wrote to its left
    // does not buy it a budget, trusted hops to its right are skipped.
    limited(get(&app, &a, 1, Some("203.0.113.5, 198.51.100.1")).await).await;
    limited(get(&app, &a, 2, Some("198.51.100.1, 10.1.2.3")).await).await;
    // Another client behind the proxy, and the proxy's own requests, are unaffected.
    admitted(&app, &a, 10, Some("198.51.100.2")).await;
    admitted(&app, &a, 10, None).await;
    // From an untrusted peer the header is ignored: its own budget, whatever it claims.
    let b = client_from(Ipv4Addr::new(127, 0, 0, 2));
    for i in 0..10 {
        let res = get(&app, &b, i, Some("198.51.100.3")).await;
        assert_ne!(res.status(), StatusCode::TOO_MANY_REQUESTS, "request {i}");
    }
    limited(get(&app, &b, 0, Some("198.51.100.4")).await).await;
    admitted(&app, &a, 10, Some("198.51.100.3")).await;
}

#[tokio::test]
async fn s12_the_public_budget_is_shared_through_redis_and_fails_open_to_in_process() {
    let prefix = format!("test:{}:", uuid::Uuid::new_v4().simple());
    let clock = mid_hour_clock();
    let one = TestApp::spawn_full(
        |c| {
            c.public_rate = 5;
            c.public_refusal_hold = Duration::ZERO;
            c.redis_url = Some(REDIS_URL.into());
            c.redis_key_prefix = prefix.clone();
        },
        clock.clone(),
    )
    .await;
    let two = one.sibling().await;
    let a = client_from(Ipv4Addr::new(127, 0, 0, 1));
    admitted(&one, &a, 5, None).await;
    admitted(&two, &a, 5, None).await;
    limited(get(&one, &a, 0, None).await).await;
    limited(get(&two, &a, 1, None).await).await;
    clock.advance(time::Duration::seconds(1));
    admitted(&two, &a, 5, None).await;
    limited(get(&one, &a, 0, None).await).await;

    // Redis unreachable: served, and still limited by this process's budgets.
    let down = TestApp::spawn_full(
        |c| {
            c.public_rate = 5;
            c.public_refusal_hold = Duration::ZERO;
            c.redis_url = Some(CLOSED_REDIS_URL.into());
        },
        clock,
    )
    .await;
    admitted(&down, &a, 10, None).await;
    limited(get(&down, &a, 0, None).await).await;
}

#[tokio::test]
async fn s12_a_refusal_is_held_so_a_flooding_connection_asks_less_often() {
    let hold = Duration::from_millis(300);
    let app = TestApp::spawn_full(
        |c| {
            c.public_rate = 1;
            c.public_refusal_hold = hold;
        },
        mid_hour_clock(),
    )
    .await;
    let a = client_from(Ipv4Addr::new(127, 0, 0, 1));
    admitted(&app, &a, 2, None).await;
    let started = Instant::now();
    limited(get(&app, &a, 0, None).await).await;
    assert!(
        started.elapsed() >= hold,
        "answered after {:?}",
        started.elapsed()
    );
}
