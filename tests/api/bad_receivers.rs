//! Drill 6 of issue 24: receivers that misbehave worse than hanging. Each costs one bounded
//! attempt with the right `lastError`, the answer body is read only up to a small cap, and an
//! endpoint of another partner is delivered meanwhile as if nothing happened.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{TestApp, eventually_within};
use crate::receiver::{Misbehaviour, Receiver};
use crate::webhook_control::call;

const ENDPOINTS: &str = "/api/v1/webhook-endpoints";

/// Sends a `ping` to `url` through a new endpoint of `token`'s partner; the delivery's id.
async fn ping_to(app: &TestApp, token: &str, url: &str) -> String {
    let ep = app
        .create_webhook_endpoint(token, &json!({ "url": url, "events": ["lead.created"] }))
        .await;
    let id = ep["id"].as_str().expect("id");
    let (st, b) = call(
        app,
        Method::POST,
        &format!("{ENDPOINTS}/{id}/test"),
        token,
        None,
    )
    .await;
    assert_eq!(st, StatusCode::ACCEPTED);
    b["data"]["id"].as_str().expect("delivery id").to_owned()
}

/// The delivery once its first attempt is recorded.
async fn first_attempt(app: &TestApp, token: &str, delivery: &str, within: Duration) -> Value {
    eventually_within(
        within,
        &format!("the first attempt of {delivery}"),
        || async {
            let (st, b) = call(
                app,
                Method::GET,
                &format!("/api/v1/webhook-deliveries/{delivery}"),
                token,
                None,
            )
            .await;
            assert_eq!(st, StatusCode::OK);
            let d = b["data"].clone();
            d["attemptLog"]
                .as_array()
                .is_some_and(|a| !a.is_empty())
                .then_some(d)
        },
    )
    .await
}

/// Resident memory of this process (the server runs in it), in bytes.
fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

#[tokio::test]
async fn misbehaving_receivers_each_cost_one_bounded_attempt_and_others_are_unaffected() {
    let good = Receiver::start().await;
    let trickle = Receiver::start_misbehaving(Misbehaviour::Trickle).await;
    let huge = Receiver::start_misbehaving(Misbehaviour::HugeBody).await;
    let reset = Receiver::start_misbehaving(Misbehaviour::ResetMidRequest).await;
    // A port that accepts TCP and never speaks TLS.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let silent_url = format!(
        "https://127.0.0.1:{}/",
        silent.local_addr().expect("addr").port()
    );
    let _hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = silent.accept().await {
            held.push(s);
        }
    });
    // Each stub has its own self-signed certificate: the server trusts them all.
    let bundle = std::env::temp_dir().join(format!("drill6-{}.pem", uuid::Uuid::new_v4()));
    let mut pem = String::new();
    for r in [&good, &trickle, &huge, &reset] {
        pem.push_str(&std::fs::read_to_string(&r.ca_file).expect("pem"));
    }
    std::fs::write(&bundle, pem).expect("bundle");
    let app = good
        .app(|c| {
            c.webhook_ca_file = Some(bundle.clone());
            // One attempt each within the drill: the next would come an hour later.
            c.webhook_retry_schedule = vec![Duration::from_secs(3600)];
        })
        .await;
    let bad = app.seed("bad", false).await;
    let fine = app.seed("fine", false).await;

    let before = rss();
    let started = Instant::now();
    let cases = [
        (
            "trickle",
            ping_to(&app, &bad.token, &trickle.url).await,
            "timeout",
        ),
        (
            "100 MB body",
            ping_to(&app, &bad.token, &huge.url).await,
            "",
        ),
        (
            "reset",
            ping_to(&app, &bad.token, &reset.url).await,
            "connection",
        ),
        (
            "no TLS",
            ping_to(&app, &bad.token, &silent_url).await,
            "timeout",
        ),
        (
            "name that does not resolve",
            ping_to(&app, &bad.token, "https://no-such-host.invalid/hook").await,
            "dns error: name not resolved",
        ),
    ];
    // Meanwhile the other partner's endpoint gets its pings at once.
    for _ in 0..3 {
        ping_to(&app, &fine.token, &good.url).await;
    }
    good.wait_for(3).await;

    // The attempt timeout is 3 s (Receiver::configure): every attempt ends within it.
    for (what, delivery, error) in &cases {
        let d = first_attempt(&app, &bad.token, delivery, Duration::from_secs(15)).await;
        let log = d["attemptLog"].as_array().expect("log");
        assert_eq!(log.len(), 1, "{what}: one attempt: {d}");
        let ms = log[0]["durationMs"].as_i64().unwrap_or(0);
        // Shown with --nocapture; docs/reliability.md quotes it.
        eprintln!("drill 6: {what}: {ms} ms, lastError {}", d["lastError"]);
        assert!(ms <= 3_500, "{what}: the attempt took {ms} ms: {d}");
        match *what {
            "100 MB body" => {
                assert_eq!(d["status"], "delivered", "{what}: {d}");
                assert_eq!(log[0]["statusCode"], 200, "{what}: {d}");
            }
            _ => {
                let got = d["lastError"].as_str().unwrap_or_default();
                assert!(
                    got.contains(error) && !got.is_empty(),
                    "{what}: lastError {got:?}, wanted {error:?}: {d}"
                );
                assert!(
                    !got.contains("127.0.0.1") && !got.contains(".invalid"),
                    "{what}: no URL in {got:?}"
                );
            }
        }
    }
    assert!(started.elapsed() < Duration::from_secs(20));
    // The 100 MB answer was not read: memory did not grow by anything like it.
    let grown = rss().saturating_sub(before);
    assert!(grown < 20 * 1024 * 1024, "RSS grew {grown} bytes");
    let _ = std::fs::remove_file(bundle);
}
