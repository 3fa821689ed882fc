//! The delivery engine: fairness between endpoints, the attempt budget under worker death, lease
//! fencing, retention, the address guard, URL-free errors, and the process roles. Behaviour is
//! asserted; the only timings are generous upper bounds.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use partner_domain::kernel::ids::EndpointId;
use partner_domain::webhook::ports::DeliveryRepo;
use partner_domain::webhook::{AttemptOutcome, ClaimRequest, ClaimedDelivery, NextStep, RowHint};
use partner_postgres::PgStore;
use partner_server::config::Role;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::helpers::{Seeded, TestApp, assert_error, body, eventually, lead_body};
use crate::receiver::Receiver;

const ENDPOINTS: &str = "/api/v1/webhook-endpoints";

async fn endpoint(app: &TestApp, token: &str, url: &str) -> String {
    app.create_webhook_endpoint(token, &json!({ "url": url, "events": ["lead.created"] }))
        .await["id"]
        .as_str()
        .expect("id")
        .to_owned()
}

async fn log(app: &TestApp, partner: &str) -> Vec<Value> {
    let b = body(
        app.internal(
            Method::GET,
            &format!("/partners/{partner}/webhook-deliveries?limit=200"),
        )
        .send()
        .await
        .expect("send"),
    )
    .await;
    b["data"].as_array().expect("data").clone()
}

/// A TLS port that accepts connections and never answers: the hanging endpoint.
async fn hanging_endpoint() -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!(
        "https://127.0.0.1:{}/hang",
        listener.local_addr().expect("addr").port()
    );
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            held.push(s);
        }
    });
    (url, task)
}

/// How many of `partner`'s deliveries a worker holds (claimed: leased and pending). The API
/// does not show it: an attempt in flight is not counted until it is made.
async fn claimed(app: &TestApp, partner: &str) -> i64 {
    use diesel::sql_types::{BigInt, Text};
    use diesel_async::RunQueryDsl;
    #[derive(diesel::QueryableByName)]
    struct Count {
        #[diesel(sql_type = BigInt)]
        n: i64,
    }
    let mut conn = app.db().await;
    diesel::sql_query(
        "SELECT count(*) AS n FROM webhook_deliveries \
         WHERE partner_id = $1 AND status = 'pending' AND lease_token IS NOT NULL",
    )
    .bind::<Text, _>(partner)
    .get_result::<Count>(&mut conn)
    .await
    .expect("count")
    .n
}

fn store(app: &TestApp) -> PgStore {
    PgStore::new(&app.config.database_url, 2).expect("pool")
}

fn claim_at(now: OffsetDateTime, lease: Duration) -> ClaimRequest {
    ClaimRequest {
        now,
        lease_until: now + lease,
        limit: 100,
        per_endpoint: 8,
        room: vec![],
        max_attempts: 3,
    }
}

#[tokio::test]
async fn a_hanging_endpoint_never_delays_another_partners_delivery() {
    let rx = Receiver::start().await;
    // Few slots and a long timeout: with a first-come claim the hanging endpoint's backlog would
    // hold every slot for 30 s.
    let app = rx
        .app(|c| {
            c.webhook_timeout = Duration::from_secs(30);
            c.webhook_concurrency = 4;
            c.webhook_endpoint_concurrency = 2;
        })
        .await;
    let slow = app.seed("slow", false).await;
    let fast = app.seed("fast", false).await;
    let (hang_url, _hang) = hanging_endpoint().await;
    endpoint(&app, &slow.token, &hang_url).await;
    endpoint(&app, &fast.token, &rx.url).await;
    for _ in 0..30 {
        app.ingest_lead(&lead_body("slow", json!({}))).await;
    }
    // The hanging endpoint holds its slots before the other partner's lead arrives.
    eventually("the hanging endpoint's share to be in flight", || async {
        (claimed(&app, "slow").await >= 2).then_some(())
    })
    .await;
    app.ingest_lead(&lead_body("fast", json!({}))).await;

    let got = rx.wait_for(1).await;
    assert_eq!(got[0].header("x-partner-event"), Some("lead.created"));
    // The hanging endpoint holds at most its share: 2 in flight and 2 ready.
    let slow_log = log(&app, "slow").await;
    assert_eq!(slow_log.len(), 30);
    let held = claimed(&app, "slow").await;
    assert!(
        held <= 4,
        "{held} of the hanging endpoint's deliveries were claimed"
    );
    assert!(slow_log.iter().all(|d| d["status"] == "pending"));
}

#[tokio::test]
async fn attempts_count_when_claimed_so_a_delivery_whose_worker_keeps_dying_ends_failed() {
    let rx = Receiver::start().await;
    // No worker in this process: the test plays the workers that die.
    let app = rx.app(|c| c.role = Role::Api).await;
    let s = app.seed("acme", false).await;
    endpoint(&app, &s.token, &rx.url).await;
    app.ingest_lead(&lead_body("acme", json!({}))).await;
    let repo = store(&app);
    let mut now = OffsetDateTime::now_utc() + Duration::from_secs(1);
    for attempt in 1..=3 {
        let claimed = repo
            .claim(&claim_at(now, Duration::from_secs(1)))
            .await
            .expect("claim")
            .ready;
        assert_eq!(claimed.len(), 1, "attempt {attempt}");
        assert_eq!(claimed[0].attempt, attempt);
        // The worker dies: no outcome. The lease runs out.
        now += Duration::from_secs(2);
    }
    assert!(
        repo.claim(&claim_at(now, Duration::from_secs(1)))
            .await
            .expect("claim")
            .is_empty(),
        "the budget (1 + 2 retries) is spent"
    );
    assert_eq!(
        repo.fail_exhausted(now, 3, "interrupted")
            .await
            .expect("sweep"),
        1
    );
    let d = log(&app, "acme").await;
    assert_eq!(
        (
            d[0]["status"].clone(),
            d[0]["attempts"].clone(),
            d[0]["lastError"].clone()
        ),
        (json!("failed"), json!(3), json!("interrupted"))
    );
    assert!(
        rx.received().is_empty(),
        "nothing was sent by an API-only process"
    );
}

#[tokio::test]
async fn an_outcome_is_recorded_only_under_the_lease_that_claimed_it() {
    let rx = Receiver::start().await;
    let app = rx.app(|c| c.role = Role::Api).await;
    let s = app.seed("acme", false).await;
    endpoint(&app, &s.token, &rx.url).await;
    app.ingest_lead(&lead_body("acme", json!({}))).await;
    let repo = store(&app);
    let t0 = OffsetDateTime::now_utc() + Duration::from_secs(1);
    let first = repo
        .claim(&claim_at(t0, Duration::from_secs(1)))
        .await
        .expect("claim")
        .ready
        .remove(0);
    // The first worker stalls past its lease; a second one takes the delivery over.
    let t1 = t0 + Duration::from_secs(2);
    let second = repo
        .claim(&claim_at(t1, Duration::from_secs(60)))
        .await
        .expect("claim")
        .ready
        .remove(0);
    assert_eq!(first.id, second.id);
    assert_ne!(first.lease, second.lease);
    // Each claim hands out where it left the row (a new version each time), for the outcome.
    assert!(first.row != RowHint::NONE && second.row != RowHint::NONE);
    assert_ne!(first.row, second.row);
    let outcome = |claim: &ClaimedDelivery, next, code| AttemptOutcome {
        id: first.id,
        lease: claim.lease,
        row: claim.row,
        at: t1,
        status_code: Some(code),
        error: None,
        duration_ms: Some(5),
        next,
    };
    assert_eq!(
        repo.record(&[outcome(&first, NextStep::GiveUp, 500)], None)
            .await
            .expect("record"),
        0,
        "the stale worker's outcome is fenced off"
    );
    assert_eq!(log(&app, "acme").await[0]["status"], "pending");
    assert_eq!(
        repo.record(&[outcome(&second, NextStep::Delivered, 200)], None)
            .await
            .expect("record"),
        1
    );
    let d = log(&app, "acme").await;
    assert_eq!(
        (
            d[0]["status"].clone(),
            d[0]["attempts"].clone(),
            d[0]["lastStatusCode"].clone()
        ),
        (json!("delivered"), json!(2), json!(200))
    );
    // Recording again under the same lease changes nothing: the delivery is finished.
    assert_eq!(
        repo.record(&[outcome(&second, NextStep::GiveUp, 500)], None)
            .await
            .expect("record"),
        0
    );
}

#[tokio::test]
async fn finished_deliveries_and_their_events_are_pruned_after_the_retention() {
    let rx = Receiver::start().await;
    let app = rx.app(|_| {}).await;
    let s = app.seed("acme", false).await;
    endpoint(&app, &s.token, &rx.url).await;
    app.ingest_lead(&lead_body("acme", json!({}))).await;
    rx.wait_for(1).await;
    eventually("the delivery to be recorded as delivered", || async {
        (log(&app, "acme").await[0]["status"] == "delivered").then_some(())
    })
    .await;
    let repo = store(&app);
    let now = OffsetDateTime::now_utc();
    let prune = async |before: OffsetDateTime| {
        let d = repo
            .prune_deliveries(before, None, 500)
            .await
            .expect("prune");
        let e = repo.prune_events(before, None, 500).await.expect("prune");
        assert_eq!((d.next, e.next), (None, None), "less than a batch: the end");
        (d.deleted, e.deleted)
    };
    assert_eq!(
        prune(now - Duration::from_secs(3600)).await,
        (0, 0),
        "younger than the retention: kept"
    );
    assert_eq!(
        prune(now + Duration::from_secs(1)).await,
        (1, 1),
        "the delivery and its event"
    );
    assert!(log(&app, "acme").await.is_empty());
}

#[tokio::test]
async fn endpoint_addresses_must_be_global_unicast() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    for url in [
        "https://[64:ff9b::7f00:1]/h",
        "https://[64:ff9b:1::a00:1]/h",
        "https://[2002:7f00:1::1]/h",
        "https://[2001::1]/h",
        "https://[::ffff:0:7f00:1]/h",
        "https://[fec0::1]/h",
        "https://[100::1]/h",
        "https://localhost./h",
    ] {
        let res = app
            .api(Method::POST, ENDPOINTS, &s.token)
            .json(&json!({ "url": url, "events": ["lead.created"] }))
            .send()
            .await
            .expect("send");
        assert_error(res, 400, "invalid_request").await;
    }
    assert_eq!(
        app.get_ok(ENDPOINTS, &s.token).await["data"],
        json!([]),
        "nothing saved"
    );
}

#[tokio::test]
async fn a_failed_attempt_reports_a_short_reason_without_the_urls_query() {
    let rx = Receiver::start().await;
    let app = rx
        .app(|c| {
            c.webhook_retry_schedule = vec![Duration::from_millis(100)];
        })
        .await;
    let s = app.seed("acme", false).await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    endpoint(
        &app,
        &s.token,
        &format!("https://127.0.0.1:{port}/h?token=SECRET-IN-QUERY"),
    )
    .await;
    app.ingest_lead(&lead_body("acme", json!({}))).await;
    let d = eventually("the delivery to end failed", || async {
        let d = log(&app, "acme").await;
        d.first()
            .is_some_and(|x| x["status"] == "failed")
            .then_some(d)
    })
    .await;
    assert_eq!(d[0]["lastError"], "connection refused");
    assert!(d[0]["lastStatusCode"].is_null());
    assert!(!serde_json::to_string(&d).expect("json").contains("SECRET"));
}

#[tokio::test]
async fn an_api_process_sends_nothing_and_a_worker_process_serves_no_api() {
    let rx = Receiver::start().await;
    let api = rx.app(|c| c.role = Role::Api).await;
    // Nothing can show that an absent sender never sends; the process has no worker to send.
    assert!(!api.runs_worker, "an API process starts no delivery worker");
    let s = api.seed("acme", false).await;
    endpoint(&api, &s.token, &rx.url).await;
    api.ingest_lead(&lead_body("acme", json!({}))).await;
    let queued = log(&api, "acme").await;
    assert_eq!(
        (
            queued.len(),
            queued[0]["status"].clone(),
            queued[0]["attempts"].clone()
        ),
        (1, json!("pending"), json!(0)),
        "queued, and claimed by nobody"
    );
    assert!(rx.received().is_empty());

    // A worker process on the same database delivers what the API process queued, once.
    let mut config = api.config.clone();
    config.role = Role::Worker;
    let worker = TestApp::on_database(config).await;
    assert!(worker.runs_worker);
    let got = rx.wait_for(1).await;
    assert_eq!(got[0].header("x-partner-event"), Some("lead.created"));
    let done = eventually("the delivery to be recorded as delivered", || async {
        let d = log(&api, "acme").await;
        (d[0]["status"] == "delivered").then_some(d)
    })
    .await;
    assert_eq!(done[0]["attempts"], 1);
    assert_eq!(rx.received().len(), 1);
    assert_eq!(worker.get_health().await, StatusCode::OK);
    let res = worker
        .api(Method::GET, "/api/v1/leads", &s.token)
        .send()
        .await
        .expect("send");
    assert_error(res, 404, "not_found").await;
    let res = worker
        .internal(Method::GET, "/partners/acme/webhook-deliveries")
        .send()
        .await
        .expect("send");
    assert_error(res, 404, "not_found").await;
    let _keep = Arc::new(api);
}

/// The endpoint's marker in `webhook_endpoint_queue` (migration 000011), as the due time in
/// microseconds since the epoch, if any.
async fn marker(app: &TestApp, endpoint: &str) -> Option<i64> {
    use diesel::sql_types::{BigInt, Text};
    use diesel_async::RunQueryDsl;
    #[derive(diesel::QueryableByName)]
    struct Due {
        #[diesel(sql_type = BigInt)]
        us: i64,
    }
    let mut conn = app.db().await;
    diesel::sql_query(
        "SELECT (extract(epoch FROM due_at) * 1000000)::int8 AS us \
         FROM webhook_endpoint_queue WHERE endpoint_id = $1::uuid",
    )
    .bind::<Text, _>(endpoint)
    .load::<Due>(&mut conn)
    .await
    .expect("marker")
    .into_iter()
    .next()
    .map(|d| d.us)
}

fn micros(t: OffsetDateTime) -> i64 {
    i64::try_from(t.unix_timestamp_nanos() / 1000).expect("micros")
}

#[tokio::test]
async fn the_claim_follows_each_endpoints_due_marker_through_leases_retries_and_the_end() {
    let rx = Receiver::start().await;
    let app = rx.app(|c| c.role = Role::Api).await;
    let s = app.seed("acme", false).await;
    let ep = endpoint(&app, &s.token, &rx.url).await;
    assert_eq!(marker(&app, &ep).await, None, "no delivery, no marker");
    app.ingest_lead(&lead_body("acme", json!({}))).await;
    let due = marker(&app, &ep)
        .await
        .expect("the outbox marks the endpoint");
    let repo = store(&app);
    let t0 = OffsetDateTime::now_utc() + Duration::from_secs(1);
    assert!(due <= micros(t0));
    let lease = Duration::from_secs(60);
    let first = repo.claim(&claim_at(t0, lease)).await.expect("claim").ready;
    assert_eq!(first.len(), 1);
    // Nothing else is due: the marker moves to the end of the lease (once the claim's advance,
    // which runs after the claim returns, is done).
    repo.claims_settled().await;
    assert_eq!(marker(&app, &ep).await, Some(micros(t0 + lease)));
    assert!(
        repo.claim(&claim_at(t0, lease))
            .await
            .expect("claim")
            .ready
            .is_empty()
    );
    // A retry due before the lease ends moves the marker back (the trigger on the record).
    let retry_at = t0 + Duration::from_secs(10);
    let outcome = |claim: &ClaimedDelivery, at, next| AttemptOutcome {
        id: first[0].id,
        lease: claim.lease,
        row: claim.row,
        at,
        status_code: Some(500),
        error: None,
        duration_ms: Some(5),
        next,
    };
    let recorded = repo
        .record(&[outcome(&first[0], t0, NextStep::RetryAt(retry_at))], None)
        .await
        .expect("record");
    assert_eq!(recorded, 1);
    repo.claims_settled().await;
    assert_eq!(marker(&app, &ep).await, Some(micros(retry_at)));
    assert!(
        repo.claim(&claim_at(t0 + Duration::from_secs(5), lease))
            .await
            .expect("claim")
            .ready
            .is_empty(),
        "not due yet"
    );
    let t1 = retry_at + Duration::from_secs(1);
    // The marker of an endpoint that gave rows is advanced at most every 50 ms
    // (`claim::TRAILING_EVERY`; the first claim's was advanced at once).
    tokio::time::sleep(Duration::from_millis(60)).await;
    let second = repo.claim(&claim_at(t1, lease)).await.expect("claim").ready;
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].id, first[0].id);
    // Its advance moves the marker to the end of the second lease (an advance that ran only
    // after the outcome below would remove it: nothing would be pending then).
    repo.claims_settled().await;
    repo.record(&[outcome(&second[0], t1, NextStep::Delivered)], None)
        .await
        .expect("record");
    // The marker is stale (the end of the second lease); the first claim after it removes it.
    assert_eq!(marker(&app, &ep).await, Some(micros(t1 + lease)));
    let t2 = t1 + lease + Duration::from_secs(1);
    assert!(
        repo.claim(&claim_at(t2, lease))
            .await
            .expect("claim")
            .ready
            .is_empty()
    );
    repo.claims_settled().await;
    assert_eq!(marker(&app, &ep).await, None);
    // A new delivery marks the endpoint again.
    app.ingest_lead(&lead_body("acme", json!({}))).await;
    assert!(marker(&app, &ep).await.is_some());
}

/// A trickle's claims leave the markers of the endpoints they took rows from early, and have
/// them advanced at most every window (50 ms; 2 s here), gathered: an endpoint drained within
/// the window is advanced by the first claim after it that takes rows, even one that does not
/// visit that endpoint; one visited with nothing due is advanced at once.
#[tokio::test]
async fn a_trickles_markers_are_gathered_and_advanced_at_most_every_window() {
    let rx = Receiver::start().await;
    let app = rx.app(|c| c.role = Role::Api).await;
    let a = app.seed("acme", false).await;
    let b = app.seed("bravo", false).await;
    let ep_a = endpoint(&app, &a.token, &rx.url).await;
    let ep_b = endpoint(&app, &b.token, &rx.url).await;
    // A window of 2 s, which the steps below cannot overrun on a loaded machine.
    let window = Duration::from_secs(2);
    let repo = store(&app).with_trailing_every(window);
    let lease = Duration::from_secs(60);
    let claim = |at: OffsetDateTime, room: Vec<(EndpointId, u32)>| {
        let repo = repo.clone();
        async move {
            let got = repo
                .claim(&ClaimRequest {
                    room,
                    ..claim_at(at, lease)
                })
                .await
                .expect("claim")
                .ready
                .len();
            repo.claims_settled().await;
            got
        }
    };
    // The first claim that takes rows has its markers advanced at once.
    app.ingest_lead(&lead_body("acme", json!({}))).await;
    let t0 = OffsetDateTime::now_utc() + Duration::from_secs(1);
    assert_eq!(claim(t0, vec![]).await, 1);
    assert_eq!(marker(&app, &ep_a).await, Some(micros(t0 + lease)));
    // Within the window, bravo's drained marker is gathered and stays early.
    app.ingest_lead(&lead_body("bravo", json!({}))).await;
    let early = marker(&app, &ep_b).await.expect("marked");
    assert_eq!(claim(t0, vec![]).await, 1);
    assert_eq!(marker(&app, &ep_b).await, Some(early), "left early");
    // After the window, a claim that takes acme's new delivery and cannot visit bravo (no room
    // there) has bravo's marker advanced too.
    tokio::time::sleep(window).await;
    app.ingest_lead(&lead_body("acme", json!({}))).await;
    let t1 = OffsetDateTime::now_utc() + Duration::from_secs(1);
    let bravo = EndpointId::parse(&ep_b).expect("id");
    assert_eq!(claim(t1, vec![(bravo, 0)]).await, 1);
    assert_eq!(
        marker(&app, &ep_b).await,
        Some(micros(t0 + lease)),
        "advanced, gathered"
    );
    // Within the new window: bravo drained again, left early; the next claim visits it with
    // nothing due and has it advanced at once.
    app.ingest_lead(&lead_body("bravo", json!({}))).await;
    let early = marker(&app, &ep_b).await.expect("marked");
    let t2 = OffsetDateTime::now_utc() + Duration::from_secs(1);
    assert_eq!(claim(t2, vec![]).await, 1);
    assert_eq!(marker(&app, &ep_b).await, Some(early), "left early");
    assert_eq!(claim(t2, vec![]).await, 0);
    assert_eq!(
        marker(&app, &ep_b).await,
        Some(micros(t0 + lease)),
        "visited, advanced"
    );
}

/// The earliest due time among `partner`'s pending deliveries (µs).
async fn earliest_pending(app: &TestApp, partner: &str) -> Option<i64> {
    delivery_rows(app, partner)
        .await
        .into_values()
        .filter(|r| r.2 == "pending")
        .filter_map(|r| r.3)
        .min()
}

/// A backlog's claims fill their room, and each has the endpoint's marker raised to its earliest
/// pending delivery (the claim's scan starts at the marker, so the dead versions the claims left
/// stay behind it, unwalked); a marker found later than a pending delivery (which the marking
/// rules out) is lowered once nothing is pending from it on.
#[tokio::test]
async fn a_backlogs_marker_follows_its_claims_and_a_late_marker_heals() {
    let rx = Receiver::start().await;
    let app = rx.app(|c| c.role = Role::Api).await;
    let s = app.seed("acme", false).await;
    let ep = endpoint(&app, &s.token, &rx.url).await;
    for _ in 0..5 {
        app.ingest_lead(&lead_body("acme", json!({}))).await;
    }
    let repo = store(&app);
    let t0 = OffsetDateTime::now_utc() + Duration::from_secs(1);
    let lease = Duration::from_secs(60);
    let room2 = ClaimRequest {
        per_endpoint: 2,
        ..claim_at(t0, lease)
    };
    let mut claimed = Vec::new();
    for round in 0..2 {
        // A backlog's marker is advanced at most every 50 ms (`claim::TRAILING_EVERY`).
        tokio::time::sleep(Duration::from_millis(60)).await;
        let got = repo.claim(&room2).await.expect("claim").ready;
        assert_eq!(got.len(), 2, "round {round}: the room is filled");
        claimed.extend(got);
        repo.claims_settled().await;
        let earliest = earliest_pending(&app, "acme").await;
        assert!(earliest.is_some_and(|e| e < micros(t0)), "one is still due");
        assert_eq!(marker(&app, &ep).await, earliest, "round {round}");
    }
    let delivered: Vec<_> = claimed
        .iter()
        .map(|d| AttemptOutcome {
            id: d.id,
            lease: d.lease,
            row: d.row,
            at: t0,
            status_code: Some(200),
            error: None,
            duration_ms: Some(5),
            next: NextStep::Delivered,
        })
        .collect();
    assert_eq!(repo.record(&delivered, None).await.expect("record"), 4);
    // The one left is due before the marker: as if a writer had not marked it.
    let last = earliest_pending(&app, "acme").await.expect("one pending");
    exec(
        &app,
        "UPDATE webhook_endpoint_queue SET due_at = due_at + interval '1 millisecond'",
    )
    .await;
    assert_eq!(marker(&app, &ep).await, Some(last + 1000));
    assert!(
        repo.claim(&room2).await.expect("claim").ready.is_empty(),
        "the scan starts at the marker"
    );
    repo.claims_settled().await;
    assert_eq!(marker(&app, &ep).await, Some(last), "healed");
    assert_eq!(repo.claim(&room2).await.expect("claim").ready.len(), 1);
}

/// Runs `sql` on the test's database, as an operator's hand would.
async fn exec(app: &TestApp, sql: &str) {
    use diesel_async::RunQueryDsl;
    let mut conn = app.db().await;
    diesel::sql_query(sql)
        .execute(&mut conn)
        .await
        .expect("statement");
}

/// A pending delivery its endpoint's marker hides (the marker gone, or later than it while a
/// later delivery keeps the advance from reading below the marker) is found again after the
/// maintenance round's upkeep, which leaves markers in order alone.
#[tokio::test]
async fn the_upkeep_restores_a_marker_that_hides_a_pending_delivery() {
    let rx = Receiver::start().await;
    let app = rx.app(|c| c.role = Role::Api).await;
    let s = app.seed("acme", false).await;
    let ep = endpoint(&app, &s.token, &rx.url).await;
    for _ in 0..2 {
        app.ingest_lead(&lead_body("acme", json!({}))).await;
    }
    let repo = store(&app);
    assert_eq!(repo.upkeep().await.expect("upkeep"), 0, "all in order");
    let first = earliest_pending(&app, "acme").await.expect("pending");
    let t0 = OffsetDateTime::now_utc() + Duration::from_secs(1);
    let lease = Duration::from_secs(60);

    exec(&app, "DELETE FROM webhook_endpoint_queue").await;
    assert!(
        repo.claim(&claim_at(t0, lease))
            .await
            .expect("claim")
            .ready
            .is_empty(),
        "no marker: nothing is found"
    );
    assert_eq!(repo.upkeep().await.expect("upkeep"), 1);
    assert_eq!(marker(&app, &ep).await, Some(first), "restored");

    exec(
        &app,
        "UPDATE webhook_endpoint_queue SET due_at = due_at + interval '1 microsecond'",
    )
    .await;
    let later = repo.claim(&claim_at(t0, lease)).await.expect("claim").ready;
    assert_eq!(later.len(), 1, "only the delivery after the marker");
    repo.claims_settled().await;
    assert!(
        marker(&app, &ep).await.is_some_and(|m| m > first),
        "the advance reads from the marker on: the first stays hidden"
    );
    assert_eq!(repo.upkeep().await.expect("upkeep"), 1);
    assert_eq!(marker(&app, &ep).await, Some(first), "lowered");
    let found = repo.claim(&claim_at(t0, lease)).await.expect("claim").ready;
    assert_eq!(found.len(), 1);
    assert_ne!(found[0].id, later[0].id);
    repo.claims_settled().await;
    assert_eq!(repo.upkeep().await.expect("upkeep"), 0, "in order again");
}

/// Each delivery's lease, attempts, status and due time (µs), by id.
async fn delivery_rows(
    app: &TestApp,
    partner: &str,
) -> std::collections::HashMap<uuid::Uuid, (Option<uuid::Uuid>, i32, String, Option<i64>)> {
    use diesel::sql_types::{BigInt, Integer, Nullable, Text, Uuid as SqlUuid};
    use diesel_async::RunQueryDsl;
    #[derive(diesel::QueryableByName)]
    struct Row {
        #[diesel(sql_type = SqlUuid)]
        id: uuid::Uuid,
        #[diesel(sql_type = Nullable<SqlUuid>)]
        lease_token: Option<uuid::Uuid>,
        #[diesel(sql_type = Integer)]
        attempts: i32,
        #[diesel(sql_type = Text)]
        status: String,
        #[diesel(sql_type = Nullable<BigInt>)]
        due_us: Option<i64>,
    }
    let mut conn = app.db().await;
    diesel::sql_query(
        "SELECT id, lease_token, attempts, status, \
           (extract(epoch FROM next_attempt_at) * 1000000)::int8 AS due_us \
         FROM webhook_deliveries WHERE partner_id = $1",
    )
    .bind::<Text, _>(partner)
    .load::<Row>(&mut conn)
    .await
    .expect("deliveries")
    .into_iter()
    .map(|r| (r.id, (r.lease_token, r.attempts, r.status, r.due_us)))
    .collect()
}

/// The worker gives a changed endpoint's claims back in one statement (`partner-webhooks`
/// `give_back`): a batch gives back exactly the rows still pending under the lease named for
/// them, due at the time given, their attempt not counted; a row named under another lease (taken
/// over by another worker), one already finished, and one not named are left as they are.
#[tokio::test]
async fn a_batch_gives_back_exactly_the_claims_still_pending_under_their_leases() {
    let rx = Receiver::start().await;
    let app = rx.app(|c| c.role = Role::Api).await;
    let s = app.seed("acme", false).await;
    endpoint(&app, &s.token, &rx.url).await;
    for _ in 0..5 {
        app.ingest_lead(&lead_body("acme", json!({}))).await;
    }
    let repo = store(&app);
    let t0 = OffsetDateTime::now_utc() + Duration::from_secs(1);
    let lease = Duration::from_secs(60);
    let mut d = repo.claim(&claim_at(t0, lease)).await.expect("claim").ready;
    assert_eq!(d.len(), 5);
    d.sort_by_key(|c| c.id.as_uuid());
    // d[4] is finished under its lease before the give-back.
    let done = AttemptOutcome {
        id: d[4].id,
        lease: d[4].lease,
        row: d[4].row,
        at: t0,
        status_code: Some(200),
        error: None,
        duration_ms: Some(5),
        next: NextStep::Delivered,
    };
    assert_eq!(repo.record(&[done], None).await.expect("record"), 1);
    let before = delivery_rows(&app, "acme").await;
    let now = t0 + Duration::from_secs(2);
    let batch = [
        (d[0].id, d[0].lease),
        (d[1].id, d[1].lease),
        // Named under a lease it does not hold (another worker's, or an older one).
        (d[3].id, uuid::Uuid::new_v4()),
        (d[4].id, d[4].lease),
    ];
    assert_eq!(
        repo.release(&batch, now).await.expect("release"),
        2,
        "d0 and d1 only"
    );
    let after = delivery_rows(&app, "acme").await;
    for (i, c) in d.iter().enumerate() {
        let id = c.id.as_uuid();
        if i < 2 {
            assert_eq!(
                after[&id],
                (None, 0, "pending".to_owned(), Some(micros(now))),
                "d{i}: given back, due now, its attempt not counted"
            );
        } else {
            assert_eq!(after[&id], before[&id], "d{i}: left as it was");
        }
    }
    assert_eq!(before[&d[2].id.as_uuid()].0, Some(d[2].lease));
    // The next claim takes exactly the two given back, as first attempts.
    let again = repo
        .claim(&claim_at(now, lease))
        .await
        .expect("claim")
        .ready;
    let mut ids: Vec<_> = again.iter().map(|c| (c.id, c.attempt)).collect();
    ids.sort_by_key(|(id, _)| id.as_uuid());
    assert_eq!(ids, vec![(d[0].id, 1), (d[1].id, 1)]);
}

/// An app whose endpoint (at `url`, which hangs) has one attempt in flight and one more delivery
/// claimed and waiting for the endpoint's only slot: one attempt at a time, a 3 s timeout, and
/// retries an hour away (a retry of the hung attempt would otherwise reach a new URL too).
async fn two_claimed_behind_a_hung_attempt(rx: &Receiver, url: &str) -> (TestApp, Seeded, String) {
    two_claimed_behind_a_hung_attempt_with(rx, url, |_| {}).await
}

/// [`two_claimed_behind_a_hung_attempt`] on a server whose settings `tweak` changes after that.
/// [`two_claimed_behind_a_hung_attempt_with`] with the app's database connections through a
/// [`SilentRelay`] (to freeze or slow the listener) and a 6 s attempt timeout.
async fn relayed_two_claimed_behind_a_hung_attempt(
    rx: &Receiver,
    old: &str,
) -> (TestApp, Seeded, String, SilentRelay) {
    let upstream = database_host_port();
    let relay = SilentRelay::start(upstream.clone());
    let through = relay.addr.clone();
    let (app, s, id) = two_claimed_behind_a_hung_attempt_with(rx, old, move |c| {
        c.database_url = c.database_url.replacen(&upstream, &through, 1);
        c.webhook_timeout = Duration::from_secs(6);
    })
    .await;
    assert!(app.config.database_url.contains(&relay.addr), "relayed");
    (app, s, id, relay)
}

async fn two_claimed_behind_a_hung_attempt_with(
    rx: &Receiver,
    url: &str,
    tweak: impl FnOnce(&mut partner_server::Config),
) -> (TestApp, Seeded, String) {
    let app = rx
        .app(|c| {
            c.webhook_endpoint_concurrency = 1;
            c.webhook_timeout = Duration::from_secs(3);
            c.webhook_retry_schedule = vec![Duration::from_secs(3600)];
            tweak(c);
        })
        .await;
    let s = app.seed("acme", false).await;
    let id = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": url, "events": ["lead.created"], "secret": true }),
        )
        .await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    for _ in 0..2 {
        app.ingest_lead(&lead_body("acme", json!({}))).await;
    }
    eventually("both deliveries claimed", || async {
        (claimed(&app, "acme").await == 2).then_some(())
    })
    .await;
    (app, s, id)
}

/// Issue 23, N1: a delivery claimed before its endpoint changed is not sent with what the claim
/// read. Here the first delivery hangs in flight on the old URL (one slot per endpoint) while the
/// second waits in its lane, claimed; then the partner moves the endpoint to a working receiver
/// and rotates its secret. The waiting delivery goes to the new URL, signed with the new secret,
/// instead of timing out on the old one.
#[tokio::test]
async fn a_delivery_claimed_before_its_endpoint_changed_is_sent_as_the_endpoint_is_now() {
    let rx = Receiver::start().await;
    let (hang, _hold) = hanging_endpoint().await;
    let (app, s, id) = two_claimed_behind_a_hung_attempt(&rx, &hang).await;

    let new_secret = move_to_and_rotate(&app, &s, &id, &rx.url).await;

    let got = signed_with(&rx, &new_secret).await;
    let sent = eventually("the delivery recorded as delivered", || async {
        log(&app, "acme")
            .await
            .into_iter()
            .find(|d| d["id"] == got.json()["id"] && d["status"] == "delivered")
    })
    .await;
    assert_eq!(
        sent["attempts"], 1,
        "the given-back claim did not count as an attempt"
    );
}

/// A TLS port that accepts connections and never answers, counting the connections (attempts).
async fn counting_hanging_endpoint() -> (
    String,
    Arc<std::sync::atomic::AtomicUsize>,
    tokio::task::JoinHandle<()>,
) {
    let (url, hits, _release, task) = releasable_hanging_endpoint().await;
    (url, hits, task)
}

/// [`counting_hanging_endpoint`] whose held connections are closed when `release` is notified
/// (the attempts hung on them then fail at once); later connections are held again.
async fn releasable_hanging_endpoint() -> (
    String,
    Arc<std::sync::atomic::AtomicUsize>,
    Arc<tokio::sync::Notify>,
    tokio::task::JoinHandle<()>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!(
        "https://127.0.0.1:{}/old",
        listener.local_addr().expect("addr").port()
    );
    let hits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = hits.clone();
    let release = Arc::new(tokio::sync::Notify::new());
    let released = release.clone();
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let Ok((s, _)) = accepted else { return };
                    counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    held.push(s);
                }
                () = released.notified() => held.clear(),
            }
        }
    });
    (url, hits, release, task)
}

/// Lets connections to the test's database be made (`true`) or refused (`false`, superusers
/// included), from a connection to another database. Connections already open stay.
async fn allow_connections(app: &TestApp, allow: bool) {
    use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
    let url = &app.config.database_url;
    let (server, db) = url.rsplit_once('/').expect("a database in the URL");
    let db = db.split('?').next().unwrap_or(db);
    let mut conn = AsyncPgConnection::establish(&format!("{server}/postgres"))
        .await
        .expect("connect");
    diesel::sql_query(format!(
        "ALTER DATABASE \"{db}\" WITH ALLOW_CONNECTIONS {allow}"
    ))
    .execute(&mut conn)
    .await
    .expect("alter database");
}

/// N9 of issue 23's re-try: the worker's `LISTEN` connection is lost just before the endpoint
/// changes, so the change's announcement is lost with it. A delivery claimed before the change
/// (waiting in its lane behind an attempt hung on the old URL) used to go out as claimed, to the
/// old URL, once its turn came. Now a claim the announcements cannot prove fresh is sent only if
/// the endpoint's row is still the version the claim read: it is given back and claimed again,
/// and goes to the new URL, signed with the new secret. The listener cannot reconnect meanwhile
/// (connections to the database are refused; those the server holds stay).
#[tokio::test]
async fn n9_after_a_lost_listener_a_claimed_delivery_is_not_sent_with_the_endpoint_as_it_was() {
    use diesel::sql_types::BigInt;
    use diesel_async::RunQueryDsl;
    #[derive(diesel::QueryableByName)]
    struct Count {
        #[diesel(sql_type = BigInt)]
        n: i64,
    }
    let rx = Receiver::start().await;
    let (old, old_hits, _hold) = counting_hanging_endpoint().await;
    let (app, s, id) = two_claimed_behind_a_hung_attempt(&rx, &old).await;
    let mut conn = app.db().await;
    // The server's pool holds its connections (4) before new ones are refused.
    futures_util::future::join_all((0..8).map(|_| app.get_ok(ENDPOINTS, &s.token))).await;

    // The listener's connection is lost, and cannot come back until the end.
    allow_connections(&app, false).await;
    let killed: Count = diesel::sql_query(
        "SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity \
         WHERE datname = current_database() AND query LIKE 'LISTEN webhook_deliveries%'",
    )
    .get_result(&mut conn)
    .await
    .expect("terminate the listener");
    assert_eq!(killed.n, 1, "one listening connection");
    let res = app
        .api(Method::PATCH, &format!("{ENDPOINTS}/{id}"), &s.token)
        .json(&json!({ "url": rx.url, "secret": true, "expirePrevious": true }))
        .send()
        .await
        .expect("send");
    let status = res.status();
    let new_secret = body(res).await["data"]["secret"]
        .as_str()
        .map(str::to_owned);
    crate::helpers::eventually_within(
        Duration::from_secs(20),
        "the waiting delivery sent (to either URL)",
        || async {
            (std::sync::atomic::AtomicUsize::load(&old_hits, std::sync::atomic::Ordering::SeqCst)
                >= 2
                || !rx.received().is_empty())
            .then_some(())
        },
    )
    .await;
    allow_connections(&app, true).await;
    assert_eq!(status, StatusCode::OK);
    let new_secret = new_secret.expect("new secret");
    assert_eq!(
        std::sync::atomic::AtomicUsize::load(&old_hits, std::sync::atomic::Ordering::SeqCst),
        1,
        "after the PATCH answered, a delivery went to the old URL"
    );
    signed_with(&rx, &new_secret).await;
}

/// `PATCH {url, secret: true, expirePrevious: true}` of endpoint `id`, answered 200: the new
/// secret.
async fn move_to_and_rotate(app: &TestApp, s: &Seeded, id: &str, url: &str) -> String {
    let res = app
        .api(Method::PATCH, &format!("{ENDPOINTS}/{id}"), &s.token)
        .json(&json!({ "url": url, "secret": true, "expirePrevious": true }))
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    body(res).await["data"]["secret"]
        .as_str()
        .expect("new secret")
        .to_owned()
}

/// The first delivery `rx` receives, signed with `secret`.
async fn signed_with(rx: &Receiver, secret: &str) -> crate::receiver::Received {
    nth_signed_with(rx, 0, secret).await
}

/// The delivery `rx` receives after its first `n`, signed with `secret`.
async fn nth_signed_with(rx: &Receiver, n: usize, secret: &str) -> crate::receiver::Received {
    let got = rx.wait_for(n + 1).await.swap_remove(n);
    let sig = got.header("x-partner-signature").expect("signed");
    assert_eq!(
        crate::helpers::verify_signature(
            sig,
            &got.body,
            secret,
            OffsetDateTime::now_utc().unix_timestamp()
        ),
        Ok(()),
        "signed with the secret of the endpoint as it is now"
    );
    got
}

/// Waits until the first of [`two_claimed_behind_a_hung_attempt`]'s deliveries hangs at the
/// old URL (its connection accepted): a change made before that reaches it as well, and nothing
/// at all goes to the old URL.
async fn hung_at_the_old_url(old_hits: &std::sync::atomic::AtomicUsize) {
    eventually("the first attempt hung at the old URL", || async {
        (old_hits.load(Ordering::SeqCst) == 1).then_some(())
    })
    .await;
}

/// Once the waiting delivery is sent (to either URL), the old URL has had only the hung attempt.
async fn went_to_the_old_url_once(old_hits: &std::sync::atomic::AtomicUsize, rx: &Receiver) {
    crate::helpers::eventually_within(
        Duration::from_secs(30),
        "the waiting delivery sent (to either URL)",
        || async {
            (old_hits.load(Ordering::SeqCst) >= 2 || !rx.received().is_empty()).then_some(())
        },
    )
    .await;
    assert_eq!(
        old_hits.load(Ordering::SeqCst),
        1,
        "after the PATCH answered, a delivery went to the old URL (with the erased secret)"
    );
}

/// `host:port` of the test's PostgreSQL, for a relay in front of it.
pub(crate) fn database_host_port() -> String {
    let server = crate::database::server_url();
    server
        .rsplit_once('@')
        .map_or(server.as_str(), |(_, h)| h)
        .trim_start_matches("postgres://")
        .to_owned()
}

/// One relayed connection.
#[derive(Default)]
struct RelayedConn {
    /// It has sent a `LISTEN`.
    listens: AtomicBool,
    /// Nothing more is forwarded.
    frozen: AtomicBool,
    /// Frozen once a chunk from the server that carries a probe's echo has been forwarded.
    frozen_after_an_echo: AtomicBool,
    /// How long what the server sends is held (milliseconds).
    delay: AtomicU64,
}

/// A TCP relay in front of the test's PostgreSQL that can make the connections that `LISTEN`
/// silently dead: they stay open, but nothing more is forwarded either way (no FIN, no RST), as
/// when a NAT or a firewall drops the flow; or slow: what the server sends them is held a while
/// (in order), as by a congested or delaying proxy. Connections made after that are relayed as
/// usual.
pub(crate) struct SilentRelay {
    /// `host:port` of the relay.
    pub(crate) addr: String,
    /// Every relayed connection.
    conns: Arc<std::sync::Mutex<Vec<Arc<RelayedConn>>>>,
    /// While `true`, nothing is forwarded on any connection, old or new (new ones are still
    /// accepted): a database whose processes are stopped (`SIGSTOP`) while its kernel keeps
    /// acknowledging. What was held is forwarded once it turns `false`, as a resumed server reads
    /// what waited in its sockets.
    paused: Arc<tokio::sync::watch::Sender<bool>>,
}

impl SilentRelay {
    /// Starts the relay on a thread and runtime of its own: the server may wait for a
    /// connection synchronously on the test's runtime.
    pub(crate) fn start(upstream: String) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("addr").to_string();
        let conns: Arc<std::sync::Mutex<Vec<_>>> = Arc::default();
        let all = conns.clone();
        let paused = Arc::new(tokio::sync::watch::Sender::new(false));
        let pause = paused.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                while let Ok((client, _)) = listener.accept().await {
                    let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else {
                        continue;
                    };
                    let conn = Arc::new(RelayedConn::default());
                    all.lock().expect("lock").push(conn.clone());
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    tokio::spawn(Self::pump(cr, sw, conn.clone(), true, pause.subscribe()));
                    tokio::spawn(Self::pump(sr, cw, conn, false, pause.subscribe()));
                }
            });
        });
        Self {
            addr,
            conns,
            paused,
        }
    }

    /// Forwards nothing more on any connection, old or new, until [`SilentRelay::resume`]; the
    /// sockets stay open and the kernel keeps acknowledging (a `SIGSTOP`ped PostgreSQL).
    pub(crate) fn pause(&self) {
        self.paused.send_replace(true);
    }

    /// Forwards again, what was held first.
    pub(crate) fn resume(&self) {
        self.paused.send_replace(false);
    }

    /// Copies `from` to `to` until either closes; what the server sends (`!to_server`) is held
    /// `conn.delay` from its reading (in order). Once `conn` is frozen, forwards nothing more
    /// and holds both ends open. Marks `conn` as listening when a `LISTEN` passes to the server.
    async fn pump(
        mut from: tokio::net::tcp::OwnedReadHalf,
        mut to: tokio::net::tcp::OwnedWriteHalf,
        conn: Arc<RelayedConn>,
        to_server: bool,
        mut paused: tokio::sync::watch::Receiver<bool>,
    ) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (held, mut due) =
            tokio::sync::mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
        tokio::spawn(async move {
            while let Some((at, chunk)) = due.recv().await {
                tokio::time::sleep_until(at).await;
                if to.write_all(&chunk).await.is_err() {
                    return;
                }
            }
        });
        let mut buf = vec![0_u8; 64 * 1024];
        loop {
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if conn.frozen.load(Ordering::SeqCst) {
                // Swallowed, and the sockets held open (no FIN, no RST) until the test ends.
                std::future::pending::<()>().await;
            }
            // Held (and nothing more read) while the relay is paused; forwarded as usual once the
            // relay is gone.
            let _ = paused.wait_for(|p| !*p).await;
            let chunk = &buf[..n];
            let has = |word: &[u8]| chunk.windows(word.len()).any(|w| w == word);
            let hold = if to_server {
                if has(b"LISTEN") {
                    conn.listens.store(true, Ordering::SeqCst);
                }
                0
            } else {
                if conn.frozen_after_an_echo.load(Ordering::SeqCst) && has(b"webhook_probe") {
                    conn.frozen.store(true, Ordering::SeqCst);
                }
                conn.delay.load(Ordering::SeqCst)
            };
            let at = tokio::time::Instant::now() + Duration::from_millis(hold);
            if held.send((at, chunk.to_vec())).is_err() {
                return;
            }
        }
    }

    /// Makes every connection relayed so far silently dead (issue 23, N12); returns how many.
    pub(crate) fn freeze_all(&self) -> usize {
        let conns = self.conns.lock().expect("lock");
        for c in conns.iter() {
            c.frozen.store(true, Ordering::SeqCst);
        }
        conns.len()
    }

    /// Makes every connection that has listened so far silently dead; returns how many.
    fn freeze_listeners(&self) -> usize {
        self.listeners(|c| c.frozen.store(true, Ordering::SeqCst))
    }

    /// Makes every connection that has listened so far silently dead right after it hears its
    /// next probe echo (when it has the longest trust it can have); returns once that happened.
    async fn freeze_listeners_after_an_echo(&self) {
        assert_eq!(
            self.listeners(|c| c.frozen_after_an_echo.store(true, Ordering::SeqCst)),
            1,
            "one listening connection"
        );
        eventually("the listener frozen after an echo", || async {
            let conns = self.conns.lock().expect("lock");
            conns
                .iter()
                .any(|c| c.frozen.load(Ordering::SeqCst))
                .then_some(())
        })
        .await
    }

    /// Holds what the server sends every connection that has listened so far `delay` (they stay
    /// alive, only late); returns how many.
    fn slow_listeners(&self, delay: Duration) -> usize {
        let ms = u64::try_from(delay.as_millis()).expect("a delay in milliseconds");
        self.listeners(|c| c.delay.store(ms, Ordering::SeqCst))
    }

    fn listeners(&self, mut f: impl FnMut(&RelayedConn)) -> usize {
        let conns = self.conns.lock().expect("lock");
        let mut n = 0;
        for c in conns.iter().filter(|c| c.listens.load(Ordering::SeqCst)) {
            f(c);
            n += 1;
        }
        n
    }
}

/// N9b of issue 23's re-try: the worker's `LISTEN` connection dies silently (no FIN, no RST:
/// the stream never ends) just before the endpoint changes, so the change's announcement never
/// arrives and nothing says so. A delivery claimed before the change (waiting behind an attempt
/// hung on the old URL) used to go out as claimed: to the old URL, signed only with the secret
/// the `PATCH {secret, expirePrevious}` had just erased. Now the listener's probes go unechoed,
/// it counts itself deaf within 2 s, and the claim is sent only if the endpoint's row is
/// still the version it read: it is given back and goes to the new URL with the new secret.
#[tokio::test]
async fn n9b_after_the_listener_dies_silently_a_claimed_delivery_is_not_sent_with_the_endpoint_as_it_was()
 {
    let rx = Receiver::start().await;
    let (old, old_hits, _hold) = counting_hanging_endpoint().await;
    // The waiting delivery's turn comes when the hung attempt times out: late enough that
    // the listener has found itself deaf by then, however loaded the machine.
    let (app, s, id, relay) = relayed_two_claimed_behind_a_hung_attempt(&rx, &old).await;
    hung_at_the_old_url(&old_hits).await;
    assert_eq!(relay.freeze_listeners(), 1, "one listening connection");
    let new_secret = move_to_and_rotate(&app, &s, &id, &rx.url).await;
    went_to_the_old_url_once(&old_hits, &rx).await;
    signed_with(&rx, &new_secret).await;
}

/// N9b' of issue 23's re-try: the worker's `LISTEN` connection dies silently 0.3 s before the
/// endpoint changes, and the delivery claimed before the change gets its turn 1 s after the
/// death: before the listener can have found itself deaf (1-2 s), so the claim used to go out
/// as claimed, to the old URL and signed only with the erased secret. Now a claim is sent
/// unchecked only while the listener's latest probe echo holds (750 ms from the probe's asking,
/// all of it before the death): past that, the endpoint's row is checked first, so the
/// delivery is given back and goes to the new URL with the new secret.
#[tokio::test]
async fn n9b_prime_a_claim_sent_before_a_silent_death_is_found_is_not_sent_with_the_endpoint_as_it_was()
 {
    let rx = Receiver::start().await;
    let (old, old_hits, release, _hold) = releasable_hanging_endpoint().await;
    // The hung attempt ends when the test releases it, not by its timeout.
    let (app, s, id, relay) = relayed_two_claimed_behind_a_hung_attempt(&rx, &old).await;
    hung_at_the_old_url(&old_hits).await;
    let died = std::time::Instant::now();
    assert_eq!(relay.freeze_listeners(), 1, "one listening connection");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let new_secret = move_to_and_rotate(&app, &s, &id, &rx.url).await;
    // The waiting delivery's turn: 1 s after the death (past the last echo's 750 ms).
    tokio::time::sleep(Duration::from_secs(1).saturating_sub(died.elapsed())).await;
    release.notify_one();
    went_to_the_old_url_once(&old_hits, &rx).await;
    signed_with(&rx, &new_secret).await;
}

/// N9b' residual of issue 23's re-try: the worker's `LISTEN` connection dies silently right
/// after a probe's echo, 0.2 s before the endpoint changes, and the delivery claimed before the change gets its turn at once
/// after the `PATCH` is answered: while the listener's last probe echo still vouches for it (it
/// holds 750 ms from its asking), so it used to go out as claimed, to the old URL and signed
/// only with the erased secret (16 of 20 changes in the re-try). Now every attempt is sent only
/// once a read of the endpoint's row, begun when the attempt was ready, finds it unchanged: the
/// delivery is given back and goes to the new URL with the new secret.
#[tokio::test]
async fn n9b_prime_residual_a_claim_sent_right_after_a_silent_death_and_a_change_is_not_sent_as_it_was()
 {
    let rx = Receiver::start().await;
    let (old, old_hits, release, _hold) = releasable_hanging_endpoint().await;
    // The hung attempt ends when the test releases it, not by its timeout.
    let (app, s, id, relay) = relayed_two_claimed_behind_a_hung_attempt(&rx, &old).await;
    hung_at_the_old_url(&old_hits).await;
    relay.freeze_listeners_after_an_echo().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let new_secret = move_to_and_rotate(&app, &s, &id, &rx.url).await;
    // The waiting delivery's turn: now, well within the last echo's 750 ms.
    release.notify_one();
    went_to_the_old_url_once(&old_hits, &rx).await;
    signed_with(&rx, &new_secret).await;
}

/// N9b'' of issue 23's re-try: the worker's `LISTEN` connection is slow, not dead: what the
/// server sends it arrives 0.3 s late. Its probes' echoes come back within the 1 s they are
/// allowed, so it is never found deaf, and it vouched for every claim while each change's
/// announcement was still on its way: a delivery claimed before a change and sent within the
/// delay after the change's answer went out as claimed (7 of 8 changes leaked in the re-try).
/// Here, change after change, the endpoint is moved from a hanging URL (one attempt hung there,
/// one more claimed behind it) to the receiver with a rotated secret (`expirePrevious`), and the
/// hung attempt is ended as soon as the `PATCH` answers, so the waiting delivery's turn comes
/// within the delay: each time it goes to the new URL, signed with the secret just returned.
#[tokio::test]
async fn n9b_second_prime_a_slow_listener_connection_never_leaks_an_old_secret() {
    const CHANGES: usize = 6;
    let rx = Receiver::start().await;
    let (old, old_hits, release, _hold) = releasable_hanging_endpoint().await;
    // The hung attempts end when the test releases them, not by their timeout.
    let (app, s, id, relay) = relayed_two_claimed_behind_a_hung_attempt(&rx, &old).await;
    assert_eq!(
        relay.slow_listeners(Duration::from_millis(300)),
        1,
        "one listening connection"
    );
    for change in 0..CHANGES {
        if change > 0 {
            // Back to the hanging URL (the secret unchanged), its announcement heard (late)
            // before the next two deliveries are claimed.
            let res = app
                .api(Method::PATCH, &format!("{ENDPOINTS}/{id}"), &s.token)
                .json(&json!({ "url": old }))
                .send()
                .await
                .expect("send");
            assert_eq!(res.status(), StatusCode::OK);
            tokio::time::sleep(Duration::from_millis(600)).await;
            for _ in 0..2 {
                app.ingest_lead(&lead_body("acme", json!({}))).await;
            }
        }
        eventually(
            "one attempt hung at the old URL, one claimed behind it",
            || async {
                (claimed(&app, "acme").await == 2 && old_hits.load(Ordering::SeqCst) == change + 1)
                    .then_some(())
            },
        )
        .await;
        let new_secret = move_to_and_rotate(&app, &s, &id, &rx.url).await;
        // The waiting delivery's turn: now, while the change's announcement is on its way.
        release.notify_one();
        crate::helpers::eventually_within(
            Duration::from_secs(30),
            "the waiting delivery sent (to either URL)",
            || async {
                (old_hits.load(Ordering::SeqCst) > change + 1 || rx.received().len() > change)
                    .then_some(())
            },
        )
        .await;
        assert_eq!(
            old_hits.load(Ordering::SeqCst),
            change + 1,
            "change {change}: after the PATCH answered, a delivery went to the old URL"
        );
        nth_signed_with(&rx, change, &new_secret).await;
    }
    // Slow all along, never found deaf: the listener is the one first relayed.
    assert_eq!(relay.slow_listeners(Duration::from_millis(300)), 1);
}

/// A TCP relay to the receiver at `to` that holds each connection `hold` before relaying it, so
/// the client's TLS handshake waits that long (as the owner of an old URL can make it wait): its
/// URL (the receiver's certificate still matches), and how many connections it accepted.
async fn handshake_holding_relay(to: &str, hold: Duration) -> (String, Arc<AtomicUsize>) {
    let upstream = to
        .trim_start_matches("https://")
        .split('/')
        .next()
        .expect("host:port")
        .to_owned();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!(
        "https://127.0.0.1:{}/held",
        listener.local_addr().expect("addr").port()
    );
    let accepted = Arc::new(AtomicUsize::new(0));
    let counted = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            let upstream = upstream.clone();
            tokio::spawn(async move {
                tokio::time::sleep(hold).await;
                let Ok(mut server) = tokio::net::TcpStream::connect(&upstream).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
            });
        }
    });
    (url, accepted)
}

/// An app whose endpoint (secret set; its URL relayed to `rx` with each TLS handshake held 2 s)
/// has one delivery whose attempt is connecting, its handshake held: the app, the seed, the
/// endpoint's id and secret, and the relay's count of connections.
async fn one_attempt_with_its_handshake_held(
    rx: &Receiver,
) -> (TestApp, Seeded, String, String, Arc<AtomicUsize>) {
    let (held, accepted) = handshake_holding_relay(&rx.url, Duration::from_secs(2)).await;
    let app = rx.app(|c| c.webhook_timeout = Duration::from_secs(6)).await;
    let s = app.seed("acme", false).await;
    let created = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": held, "events": ["lead.created"], "secret": true }),
        )
        .await;
    let id = created["id"].as_str().expect("id").to_owned();
    let secret = created["secret"].as_str().expect("secret").to_owned();
    app.ingest_lead(&lead_body("acme", json!({}))).await;
    eventually("the attempt connecting, its handshake held", || async {
        (accepted.load(Ordering::SeqCst) == 1).then_some(())
    })
    .await;
    (app, s, id, secret, accepted)
}

/// N9c of issue 23's re-try (attack5): the endpoint-row check ran before the connection was
/// made, so the owner of the old URL could hold the TLS handshake past a change's answer and
/// still receive the attempt, signed only with the secret the `PATCH {secret, expirePrevious}`
/// had just erased (every change leaked, 1.8-2.0 s after its answer with a 3 s hold). Now a send
/// that needs a new connection writes nothing until it is up and the row is read again: the
/// delivery is given back, and the request the receiver gets is signed with the new secret only.
#[tokio::test]
async fn n9c_an_attempt_whose_handshake_is_held_across_a_rotation_gets_only_the_new_secret() {
    let rx = Receiver::start().await;
    let (app, s, id, old_secret, _) = one_attempt_with_its_handshake_held(&rx).await;
    let res = app
        .api(Method::PATCH, &format!("{ENDPOINTS}/{id}"), &s.token)
        .json(&json!({ "secret": true, "expirePrevious": true }))
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    let new_secret = body(res).await["data"]["secret"]
        .as_str()
        .expect("new secret")
        .to_owned();
    assert!(
        rx.received().is_empty(),
        "answered while the handshake was held"
    );
    let got = signed_with(&rx, &new_secret).await;
    let sig = got.header("x-partner-signature").expect("signed");
    assert!(
        crate::helpers::verify_signature(
            sig,
            &got.body,
            &old_secret,
            OffsetDateTime::now_utc().unix_timestamp()
        )
        .is_err(),
        "after the PATCH answered, a request signed with the erased secret"
    );
}

/// N9c, disabled: the attempt whose handshake was held when `PATCH {enabled: false}` answered
/// is given back once its connection is up, and the disabled endpoint gets nothing.
#[tokio::test]
async fn n9c_an_attempt_whose_handshake_is_held_across_a_disable_sends_nothing() {
    let rx = Receiver::start().await;
    let (app, s, id, _, accepted) = one_attempt_with_its_handshake_held(&rx).await;
    let res = app
        .api(Method::PATCH, &format!("{ENDPOINTS}/{id}"), &s.token)
        .json(&json!({ "enabled": false }))
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    assert!(
        rx.received().is_empty(),
        "answered while the handshake was held"
    );
    // Given back (or, as before, sent and recorded): no longer claimed either way.
    crate::helpers::eventually_within(Duration::from_secs(20), "the attempt ended", || async {
        (claimed(&app, "acme").await == 0).then_some(())
    })
    .await;
    assert_eq!(
        rx.received().len(),
        0,
        "after the PATCH answered, a request reached the disabled endpoint"
    );
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "no new connection");
}
