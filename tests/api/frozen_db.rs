//! Database connections that die silently (issue 23, N12): frozen by a relay that stops
//! forwarding without closing anything (no FIN, no RST), as a NAT, a firewall or a hung proxy
//! does.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::json;

use crate::delivery_engine::{SilentRelay, database_host_port};
use crate::helpers::{eventually_within, lead_body};
use crate::receiver::Receiver;

/// The bound given to each use of a pooled connection here (`PARTNER_DB_HOLD_TIMEOUT`).
const HOLD: Duration = Duration::from_secs(1);
/// The attempt timeout (`PARTNER_WEBHOOK_TIMEOUT`): SIGTERM is obeyed within it (extensions §5).
const ATTEMPT: Duration = Duration::from_secs(3);

/// N12 of issue 23: every connection the server has open to PostgreSQL is frozen. Before, what
/// ran on them waited forever: `/readyz` and requests hung, the worker sent and logged nothing,
/// and SIGTERM was ignored. Now each use of a pooled connection is bounded: a frozen one is
/// closed after the bound (logged at `warn`), its call fails as `unavailable`, and the pools open
/// fresh connections: `/readyz` answers within the bound and is ready again within a few,
/// requests are served, the worker delivers again, and SIGTERM, with every connection frozen
/// again (the worker's claim hung on one), ends the process within the attempt timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn n12_frozen_database_connections_are_replaced_and_sigterm_is_obeyed() {
    let rx = Receiver::start().await;
    let upstream = database_host_port();
    let relay = SilentRelay::start(upstream.clone());
    let through = relay.addr.clone();
    let mut server = crate::process::LoggedServer::start_through(
        "info",
        &[
            (
                "PARTNER_WEBHOOK_CA_FILE",
                rx.ca_file.to_string_lossy().into_owned(),
            ),
            ("PARTNER_WEBHOOK_ALLOW_PRIVATE", "true".into()),
            ("PARTNER_WEBHOOK_TIMEOUT", "3s".into()),
            ("PARTNER_SHUTDOWN_DRAIN", "0".into()),
            ("PARTNER_DB_HOLD_TIMEOUT", "1s".into()),
        ],
        |url| url.replacen(&upstream, &through, 1),
    )
    .await;
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(4))
        .build()
        .expect("client");
    server.seed_with_endpoint(&client, "acme", &rx.url).await;
    let ingest = || async {
        server
            .internal(&client, Method::POST, "/leads")
            .json(&lead_body("acme", json!({})))
            .send()
            .await
    };
    assert_eq!(ingest().await.expect("ingest").status(), 201);
    rx.wait_for(1).await;

    let frozen = relay.freeze_all();
    let t0 = Instant::now();
    assert!(frozen >= 3, "{frozen} connections frozen");
    // `/readyz` answers within the bound (503 while a frozen connection is being given up), and
    // is ready again once the pools opened fresh ones.
    let answers = std::sync::Mutex::new(Vec::new());
    eventually_within(Duration::from_secs(8), "/readyz ready again", || async {
        let asked = Instant::now();
        let res = client
            .get(format!("{}/readyz", server.address))
            .send()
            .await
            .unwrap_or_else(|e| panic!("/readyz unanswered after {:?}: {e}", asked.elapsed()));
        let took = asked.elapsed();
        assert!(
            took < HOLD + Duration::from_millis(1500),
            "/readyz took {took:?}"
        );
        answers
            .lock()
            .expect("lock")
            .push((res.status().as_u16(), took.as_millis()));
        (res.status() == 200).then_some(())
    })
    .await;
    let ready_after = t0.elapsed();
    // Requests are served again (a call that met a frozen connection answered 503 meanwhile).
    let unavailable = std::sync::atomic::AtomicUsize::new(0);
    eventually_within(Duration::from_secs(6), "a lead accepted", || async {
        let res = ingest().await.expect("ingest answered");
        if res.status() == 503 {
            unavailable.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        (res.status() == 201).then_some(())
    })
    .await;
    // And the worker delivers it, through connections of its own opened since.
    eventually_within(Duration::from_secs(8), "the second delivery", || async {
        (rx.received().len() >= 2).then_some(())
    })
    .await;
    let delivered_after = t0.elapsed();
    let log = server.log();
    assert!(
        log.contains("held past PARTNER_DB_HOLD_TIMEOUT"),
        "no warning of the frozen connections"
    );

    // Every connection frozen again, the worker's next claim hung on one; then SIGTERM. The
    // client's idle keep-alive connections are closed first: the HTTP servers' graceful stop
    // waits for them (their keep-alive), which is not what is measured here.
    drop(client);
    let again = relay.freeze_all();
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.sigterm();
    let signalled = Instant::now();
    let exit = tokio::time::timeout(ATTEMPT + Duration::from_secs(2), server.wait_exit()).await;
    let exited = signalled.elapsed();
    let log = server.log();
    let answers = answers.into_inner().expect("lock");
    let unavailable = unavailable.into_inner();
    let _ = server.stop().await;
    let status = exit.unwrap_or_else(|_| panic!("no exit {exited:?} after SIGTERM; log: {log}"));
    assert!(status.success(), "exit {status:?}; log: {log}");
    eprintln!(
        "n12: {frozen} connections frozen; /readyz answers {answers:?} (status, ms), ready after {ready_after:?}; {unavailable} ingest(s) answered 503 before one 201; delivered after {delivered_after:?}; {again} frozen again, exit {exited:?} after SIGTERM"
    );
}
