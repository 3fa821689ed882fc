//! The webhook findings of the pre-launch security review (issue 23, extensions.md §12): each test
//! is named after its finding.

use std::time::Duration;

use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use partner_domain::kernel::clock::{Clock, FixedClock};

use crate::helpers::{Seeded, TestApp, assert_error, body, eventually, lead_body, mid_hour_clock};
use crate::receiver::Receiver;
use crate::webhook_control::{call, wait_list};

const ENDPOINTS: &str = "/api/v1/webhook-endpoints";
const DELIVERIES: &str = "/api/v1/webhook-deliveries";

/// A connection to the test server's own database.
async fn db(app: &TestApp) -> AsyncPgConnection {
    <AsyncPgConnection as AsyncConnection>::establish(&app.config.database_url)
        .await
        .expect("connect")
}

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

async fn count(conn: &mut AsyncPgConnection, sql: &str, bind: &str) -> i64 {
    diesel::sql_query(sql)
        .bind::<Text, _>(bind)
        .get_result::<Count>(conn)
        .await
        .expect("count")
        .n
}

fn ts(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).expect("format")
}

#[tokio::test]
async fn s07_resend_on_a_disabled_endpoint_is_400() {
    let rx = Receiver::start().await;
    let app = rx.app(|_| {}).await;
    let s = app.seed("acme", false).await;
    let ep = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": rx.url, "events": ["lead.created"] }),
        )
        .await;
    let id = ep["id"].as_str().expect("id").to_owned();
    app.ingest_lead(&lead_body("acme", json!({}))).await;
    let d = wait_list(&app, &s.token, |d| {
        d.len() == 1 && d[0]["status"] == "delivered"
    })
    .await;
    let did = d[0]["id"].as_str().expect("id").to_owned();
    let (st, _) = call(
        &app,
        Method::PATCH,
        &format!("{ENDPOINTS}/{id}"),
        &s.token,
        Some(json!({ "enabled": false })),
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    let res = app
        .api(
            Method::POST,
            &format!("{DELIVERIES}/{did}/resend"),
            &s.token,
        )
        .send()
        .await
        .expect("send");
    assert_error(res, 400, "invalid_request").await;
    // The operator's resend is refused alike.
    let res = app
        .internal(
            Method::POST,
            &format!("/partners/acme/webhook-deliveries/{did}/resend"),
        )
        .send()
        .await
        .expect("send");
    assert_error(res, 400, "invalid_request").await;
    let (_, b) = call(
        &app,
        Method::GET,
        &format!("{DELIVERIES}/{did}"),
        &s.token,
        None,
    )
    .await;
    assert_eq!(b["data"]["status"], "delivered", "left as it was");
    assert_eq!(rx.received().len(), 1);
}

/// Writes `n` failed `lead.created` deliveries to the endpoint, one a millisecond apart from
/// `from` on, whose leads do not exist (a requeued one ends `failed` again without a request).
async fn failed_deliveries(
    conn: &mut AsyncPgConnection,
    endpoint: &str,
    n: i64,
    from: OffsetDateTime,
) {
    diesel::sql_query(
        "WITH ev AS ( \
           INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at) \
           SELECT gen_random_uuid(), w.partner_id, 'lead.created', gen_random_uuid()::text, '{}', $3 \
           FROM webhook_endpoints w WHERE w.id = $1::uuid RETURNING id, partner_id) \
         INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, \
           attempts, attempt_base, created_at, last_error) \
         SELECT gen_random_uuid(), $1::uuid, ev.partner_id, ev.id, 'lead.created', 'failed', 1, 0, \
           $3 + make_interval(secs => g / 1000.0), 'status 500' \
         FROM ev, generate_series(0, $2 - 1) g",
    )
    .bind::<Text, _>(endpoint)
    .bind::<BigInt, _>(n)
    .bind::<diesel::sql_types::Timestamptz, _>(from)
    .execute(conn)
    .await
    .expect("insert deliveries");
}

#[tokio::test]
async fn s03_recover_requeues_at_most_1000_oldest_first_and_says_how_many_remain() {
    let rx = Receiver::start().await;
    let app = rx.app(|_| {}).await;
    let s = app.seed("acme", false).await;
    let ep = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": rx.url, "events": ["lead.created"] }),
        )
        .await;
    let id = ep["id"].as_str().expect("id").to_owned();
    let mut conn = db(&app).await;
    let since = OffsetDateTime::now_utc() - time::Duration::hours(1);
    failed_deliveries(&mut conn, &id, 1_005, since).await;
    let (st, b) = call(
        &app,
        Method::POST,
        &format!("{ENDPOINTS}/{id}/recover"),
        &s.token,
        Some(json!({ "since": ts(since) })),
    )
    .await;
    assert_eq!(st, StatusCode::ACCEPTED);
    assert_eq!(b["data"], json!({ "requeued": 1000, "remaining": 5 }));
    // The oldest thousand were given a fresh budget; the five newest were left alone.
    let requeued = "SELECT count(*) AS n FROM webhook_deliveries WHERE endpoint_id = $1::uuid \
                    AND attempt_base = 1";
    assert_eq!(count(&mut conn, requeued, &id).await, 1000);
    let newest_left = "SELECT count(*) AS n FROM (SELECT attempt_base FROM webhook_deliveries \
                       WHERE endpoint_id = $1::uuid ORDER BY created_at DESC LIMIT 5) d \
                       WHERE attempt_base = 0";
    assert_eq!(count(&mut conn, newest_left, &id).await, 5);
}

#[tokio::test]
async fn s03_reenabling_an_endpoint_makes_none_of_its_failed_deliveries_pending() {
    let rx = Receiver::start().await;
    let app = rx.app(|_| {}).await;
    let s = app.seed("acme", false).await;
    let ep = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": rx.url, "events": ["lead.created"] }),
        )
        .await;
    let id = ep["id"].as_str().expect("id").to_owned();
    let mut conn = db(&app).await;
    failed_deliveries(&mut conn, &id, 3, OffsetDateTime::now_utc()).await;
    for enabled in [false, true, false, true] {
        let (st, _) = call(
            &app,
            Method::PATCH,
            &format!("{ENDPOINTS}/{id}"),
            &s.token,
            Some(json!({ "enabled": enabled })),
        )
        .await;
        assert_eq!(st, StatusCode::OK);
    }
    // A requeue would be written in the transaction of the PATCH: checked once it answered.
    let pending = "SELECT count(*) AS n FROM webhook_deliveries WHERE endpoint_id = $1::uuid \
                   AND (status <> 'failed' OR attempt_base <> 0)";
    assert_eq!(count(&mut conn, pending, &id).await, 0);
}

#[tokio::test]
async fn s03_test_resend_and_recover_admit_20_calls_a_minute_per_partner() {
    let rx = Receiver::start().await;
    let clock = mid_hour_clock();
    let app = TestApp::spawn_full(|c| rx.configure(c), clock.clone()).await;
    let s = app.seed("acme", false).await;
    let beta = app.seed("beta", false).await;
    let ep = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": rx.url, "events": ["lead.created"] }),
        )
        .await;
    let id = ep["id"].as_str().expect("id").to_owned();
    let unknown = uuid::Uuid::new_v4();
    let since = ts(clock.now() - time::Duration::hours(1));
    // Twenty calls, answered 2xx or 4xx: each counts.
    for i in 0..20 {
        let (path, b) = match i % 4 {
            0 => (format!("{ENDPOINTS}/{id}/test"), None),
            1 => (format!("{DELIVERIES}/{unknown}/resend"), None),
            2 => (
                format!("{ENDPOINTS}/{id}/recover"),
                Some(json!({ "since": since })),
            ),
            _ => (
                format!("{ENDPOINTS}/{id}/recover"),
                Some(json!({ "since": "yesterday" })),
            ),
        };
        let (st, b) = call(&app, Method::POST, &path, &s.token, b).await;
        assert_ne!(st, StatusCode::TOO_MANY_REQUESTS, "call {i}: {b}");
        assert!(st.is_success() || st.is_client_error(), "call {i}: {st}");
    }
    for path in [
        format!("{ENDPOINTS}/{id}/test"),
        format!("{DELIVERIES}/{unknown}/resend"),
        format!("{ENDPOINTS}/{id}/recover"),
    ] {
        let res = app
            .api(Method::POST, &path, &s.token)
            .json(&json!({ "since": since }))
            .send()
            .await
            .expect("send");
        let retry_after: u64 = res
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
            .expect("Retry-After");
        assert_eq!(
            retry_after, 60,
            "the clock stands still: a whole window to wait"
        );
        assert_error(res, 429, "rate_limited").await;
    }
    // Another token of the same partner shares the budget; another partner has its own; the
    // operator's calls do not count.
    let (_, other_token) = app.create_token(&s.user_id).await;
    let (st, _) = call(
        &app,
        Method::POST,
        &format!("{ENDPOINTS}/{id}/test"),
        &other_token,
        None,
    )
    .await;
    assert_eq!(st, StatusCode::TOO_MANY_REQUESTS);
    let (st, _) = call(
        &app,
        Method::POST,
        &format!("{DELIVERIES}/{unknown}/resend"),
        &beta.token,
        None,
    )
    .await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let res = app
        .internal(
            Method::POST,
            &format!("/partners/acme/webhook-endpoints/{id}/test"),
        )
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    // A second instance shares the budget (it is stored, not held in memory).
    let sibling = app.sibling().await;
    let (st, _) = call(
        &sibling,
        Method::POST,
        &format!("{ENDPOINTS}/{id}/test"),
        &s.token,
        None,
    )
    .await;
    assert_eq!(st, StatusCode::TOO_MANY_REQUESTS);
    // A minute later the budget is back.
    clock.advance(time::Duration::seconds(60));
    let (st, _) = call(
        &app,
        Method::POST,
        &format!("{ENDPOINTS}/{id}/test"),
        &s.token,
        None,
    )
    .await;
    assert_eq!(st, StatusCode::ACCEPTED);
}

/// Partners acme and beta on one server, each with an endpoint at the same receiver.
async fn two_tenants() -> (Receiver, TestApp, Seeded, Seeded, Value, Value) {
    let rx = Receiver::start().await;
    let app = rx.app(|_| {}).await;
    let acme = app.seed("acme", false).await;
    let beta = app.seed("beta", false).await;
    let a = app
        .create_webhook_endpoint(
            &acme.token,
            &json!({ "url": rx.url, "events": ["lead.created"] }),
        )
        .await;
    let b = app
        .create_webhook_endpoint(
            &beta.token,
            &json!({ "url": rx.url, "events": ["lead.created"] }),
        )
        .await;
    (rx, app, acme, beta, a, b)
}

#[tokio::test]
async fn s06_a_delivery_whose_subject_cannot_be_read_fails_alone() {
    let (rx, app, acme, beta, a, b) = two_tenants().await;
    // In one statement, so that one claim takes both: acme's delivery of an event whose stored
    // subject does not parse, and beta's ping.
    let mut conn = db(&app).await;
    diesel::sql_query(
        "WITH bad AS ( \
           INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at) \
           VALUES (gen_random_uuid(), 'acme', 'lead.created', 'not-a-lead-id', '{}', now()) \
           RETURNING id), \
         good AS ( \
           INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at) \
           VALUES (gen_random_uuid(), 'beta', 'ping', $2, '{}', now()) RETURNING id), \
         d1 AS ( \
           INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, \
             attempts, next_attempt_at, created_at) \
           SELECT gen_random_uuid(), $1::uuid, 'acme', bad.id, 'lead.created', 'pending', 0, \
             now(), now() FROM bad RETURNING id) \
         INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, \
           attempts, next_attempt_at, created_at) \
         SELECT gen_random_uuid(), $2::uuid, 'beta', good.id, 'ping', 'pending', 0, now(), now() \
         FROM good",
    )
    .bind::<Text, _>(a["id"].as_str().expect("id"))
    .bind::<Text, _>(b["id"].as_str().expect("id"))
    .execute(&mut conn)
    .await
    .expect("insert");
    let d = wait_list(&app, &beta.token, |d| {
        d.len() == 1 && d[0]["status"] == "delivered"
    })
    .await;
    assert_eq!(d[0]["event"], "ping");
    let d = wait_list(&app, &acme.token, |d| {
        d.len() == 1 && d[0]["status"] == "failed"
    })
    .await;
    assert_eq!(
        (d[0]["lastError"].clone(), d[0]["lastStatusCode"].clone()),
        (json!("subject unreadable"), Value::Null)
    );
    let received = rx.received();
    assert_eq!(received.len(), 1, "only beta's ping was sent");
    assert_eq!(received[0].json()["event"], "ping");
}

/// An operator ping (operator calls spend no partner budget) and the request it caused.
async fn operator_ping(app: &TestApp, rx: &Receiver, ep: &str) -> crate::receiver::Received {
    let n = rx.received().len();
    let res = app
        .internal(
            Method::POST,
            &format!("/partners/acme/webhook-endpoints/{ep}/test"),
        )
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    rx.wait_for(n + 1).await.remove(n)
}

/// Whether `secret` verifies the request's signature.
fn signs(r: &crate::receiver::Received, secret: &str) -> bool {
    let header = r.header("x-partner-signature").expect("signature");
    crate::helpers::verify_signature(
        header,
        &r.body,
        secret,
        OffsetDateTime::now_utc().unix_timestamp(),
    )
    .is_ok()
}

/// Sends the `PATCH`es together (released by one barrier) and answers their bodies in order.
async fn patch_together(app: &TestApp, token: &str, ep: &str, bodies: Vec<Value>) -> Vec<Value> {
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(bodies.len()));
    let tasks: Vec<_> = bodies
        .into_iter()
        .map(|b| {
            let req = app
                .api(Method::PATCH, &format!("{ENDPOINTS}/{ep}"), token)
                .json(&b);
            let barrier = barrier.clone();
            tokio::spawn(async move {
                barrier.wait().await;
                let res = req.send().await.expect("send");
                assert_eq!(res.status(), StatusCode::OK);
                body(res).await
            })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.expect("task"));
    }
    out
}

#[tokio::test]
async fn s05_concurrent_patches_of_one_endpoint_apply_one_after_another() {
    let rx = Receiver::start().await;
    let app = rx.app(|_| {}).await;
    let s = app.seed("acme", false).await;
    let ep = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": rx.url, "events": ["lead.created"], "secret": true }),
        )
        .await;
    let id = ep["id"].as_str().expect("id").to_owned();
    let events = [
        json!(["lead.created"]),
        json!(["lead.created", "order.created"]),
    ];
    for trial in 0..15 {
        // A rotation racing an unrelated change: both apply, and the returned secret signs.
        let want = events[trial % 2].clone();
        let got = patch_together(
            &app,
            &s.token,
            &id,
            vec![json!({ "secret": true }), json!({ "events": want })],
        )
        .await;
        let secret = got[0]["data"]["secret"]
            .as_str()
            .expect("secret")
            .to_owned();
        let r = operator_ping(&app, &rx, &id).await;
        assert!(
            signs(&r, &secret),
            "trial {trial}: the returned secret does not sign"
        );
        let (_, e) = call(&app, Method::GET, ENDPOINTS, &s.token, None).await;
        assert_eq!(e["data"][0]["events"], want, "trial {trial}");
        // Two rotations at once: each returned secret signs (one as the previous).
        let got = patch_together(
            &app,
            &s.token,
            &id,
            vec![json!({ "secret": true }), json!({ "secret": true })],
        )
        .await;
        let r = operator_ping(&app, &rx, &id).await;
        for g in &got {
            let secret = g["data"]["secret"].as_str().expect("secret");
            assert!(
                signs(&r, secret),
                "trial {trial}: a returned secret does not sign"
            );
        }
    }
}

#[tokio::test]
async fn s05_a_health_change_by_delivery_is_undone_only_by_a_patch_naming_enabled() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    let ep = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": "https://hooks.acme.example/in", "events": ["lead.created"] }),
        )
        .await;
    let id = ep["id"].as_str().expect("id").to_owned();
    let url = app.config.database_url.clone();
    for trial in 0..20 {
        // What a worker writes on a 410 (a compare-and-set of the health it read), racing an
        // unrelated PATCH.
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(2));
        let gone = {
            let (barrier, url, id) = (barrier.clone(), url.clone(), id.clone());
            tokio::spawn(async move {
                let mut conn = <AsyncPgConnection as AsyncConnection>::establish(&url)
                    .await
                    .expect("connect");
                barrier.wait().await;
                diesel::sql_query(
                    "UPDATE webhook_endpoints SET disabled_at = now(), disabled_reason = 'gone' \
                     WHERE id = $1::uuid AND disabled_at IS NULL",
                )
                .bind::<Text, _>(id)
                .execute(&mut conn)
                .await
                .expect("disable")
            })
        };
        let patch = app
            .api(Method::PATCH, &format!("{ENDPOINTS}/{id}"), &s.token)
            .json(&json!({ "events": ["lead.created", "payout.created"] }));
        barrier.wait().await;
        let res = patch.send().await.expect("send");
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(gone.await.expect("task"), 1);
        let (_, e) = call(&app, Method::GET, ENDPOINTS, &s.token, None).await;
        assert_eq!(
            (
                e["data"][0]["status"].clone(),
                e["data"][0]["disabledReason"].clone()
            ),
            (json!("disabled"), json!("gone")),
            "trial {trial}"
        );
        let (st, _) = call(
            &app,
            Method::PATCH,
            &format!("{ENDPOINTS}/{id}"),
            &s.token,
            Some(json!({ "enabled": true })),
        )
        .await;
        assert_eq!(st, StatusCode::OK);
    }
}

#[tokio::test]
async fn s05_an_expired_previous_secret_is_erased_by_the_next_change_or_delivery() {
    let rx = Receiver::start().await;
    let clock = std::sync::Arc::new(FixedClock::new(OffsetDateTime::now_utc()));
    let app = TestApp::spawn_full(
        |c| {
            rx.configure(c);
            c.webhook_secret_overlap = Duration::from_secs(3600);
        },
        clock.clone(),
    )
    .await;
    let s = app.seed("acme", false).await;
    let ep = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": rx.url, "events": ["lead.created"], "secret": true }),
        )
        .await;
    let id = ep["id"].as_str().expect("id").to_owned();
    let mut conn = db(&app).await;
    let stored = "SELECT count(*) AS n FROM webhook_endpoints WHERE id = $1::uuid \
                  AND previous_secret IS NOT NULL";
    // Erased by a change.
    let (st, _) = call(
        &app,
        Method::PATCH,
        &format!("{ENDPOINTS}/{id}"),
        &s.token,
        Some(json!({ "secret": true })),
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(count(&mut conn, stored, &id).await, 1);
    clock.advance(time::Duration::hours(2));
    let (st, _) = call(
        &app,
        Method::PATCH,
        &format!("{ENDPOINTS}/{id}"),
        &s.token,
        Some(json!({ "events": ["lead.created", "order.created"] })),
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(count(&mut conn, stored, &id).await, 0, "erased by a change");
    // Erased by a delivery.
    let (st, _) = call(
        &app,
        Method::PATCH,
        &format!("{ENDPOINTS}/{id}"),
        &s.token,
        Some(json!({ "secret": true })),
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    clock.advance(time::Duration::hours(2));
    assert_eq!(count(&mut conn, stored, &id).await, 1, "stored until used");
    operator_ping(&app, &rx, &id).await;
    assert_eq!(
        count(&mut conn, stored, &id).await,
        0,
        "erased by a delivery"
    );
}

/// S-09: the custom header's value is write-only. The answer to the `POST` or `PATCH` (partner or
/// operator API) that set it carries `{ name, value }`; every other answer carries
/// `{ name, valueHint }` (`…` and the last 4 characters, `…` alone for 8 or fewer).
#[tokio::test]
async fn s09_a_custom_header_value_is_shown_only_in_the_answer_that_set_it() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    let secret_value = "Bearer sk_live_9f3a";
    let created = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": "https://hooks.acme.invalid/x", "events": ["lead.created"],
                     "customHeader": { "name": "X-Api-Key", "value": secret_value } }),
        )
        .await;
    assert_eq!(
        created["customHeader"],
        json!({ "name": "X-Api-Key", "value": secret_value }),
        "the POST that set it"
    );
    let id = created["id"].as_str().expect("id").to_owned();
    let hinted = json!({ "name": "X-Api-Key", "valueHint": "…9f3a" });
    let listed = app.get_ok("/api/v1/webhook-endpoints", &s.token).await;
    assert_eq!(listed["data"][0]["customHeader"], hinted, "the listing");
    let res = app
        .internal(Method::GET, "/partners/acme/webhook-endpoints")
        .send()
        .await
        .expect("send");
    assert_eq!(
        body(res).await["data"][0]["customHeader"],
        hinted,
        "the operator's listing"
    );
    let path = format!("/api/v1/webhook-endpoints/{id}");
    let res = app
        .api(Method::PATCH, &path, &s.token)
        .json(&json!({ "events": ["lead.created", "payout.created"] }))
        .send()
        .await
        .expect("send");
    assert_eq!(
        body(res).await["data"]["customHeader"],
        hinted,
        "a PATCH of other fields"
    );
    let res = app
        .api(Method::PATCH, &path, &s.token)
        .json(&json!({ "customHeader": { "name": "X-Key", "value": "short" } }))
        .send()
        .await
        .expect("send");
    assert_eq!(
        body(res).await["data"]["customHeader"],
        json!({ "name": "X-Key", "value": "short" }),
        "the PATCH that set it"
    );
    let res = app
        .internal(
            Method::PATCH,
            &format!("/partners/acme/webhook-endpoints/{id}"),
        )
        .json(&json!({ "enabled": false }))
        .send()
        .await
        .expect("send");
    assert_eq!(
        body(res).await["data"]["customHeader"],
        json!({ "name": "X-Key", "valueHint": "…" }),
        "8 characters or fewer: no character shown"
    );
    let listed = app.get_ok("/api/v1/webhook-endpoints", &s.token).await;
    assert!(!listed.to_string().contains("short"), "{listed}");
}

/// A delivery committed for an endpoint after its disable looked (a `test`, `recover` or ingest
/// racing `PATCH {enabled: false}`) is ended by maintenance, not left pending forever: written
/// here straight into the table for a disabled endpoint, as the race leaves it.
#[tokio::test]
async fn a_pending_delivery_of_a_disabled_endpoint_is_ended_by_maintenance() {
    let app = TestApp::spawn_with(|c| {
        c.webhook_maintenance_interval = Duration::from_millis(50);
    })
    .await;
    let s = app.seed("acme", false).await;
    let e = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": "https://hooks.acme.invalid/x", "events": ["lead.created"] }),
        )
        .await;
    let id = e["id"].as_str().expect("id").to_owned();
    let res = app
        .api(
            Method::PATCH,
            &format!("/api/v1/webhook-endpoints/{id}"),
            &s.token,
        )
        .json(&json!({ "enabled": false }))
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    let mut conn = db(&app).await;
    diesel::sql_query(
        "WITH ev AS ( \
           INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at) \
           VALUES (gen_random_uuid(), 'acme', 'ping', $1, '{}', now()) RETURNING id) \
         INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, \
           attempts, next_attempt_at, created_at) \
         SELECT gen_random_uuid(), $1::uuid, 'acme', ev.id, 'ping', 'pending', 0, now(), now() \
         FROM ev",
    )
    .bind::<Text, _>(&id)
    .execute(&mut conn)
    .await
    .expect("insert");
    let ended = "SELECT count(*) AS n FROM webhook_deliveries WHERE endpoint_id = $1::uuid \
                 AND status = 'failed' AND last_error = 'endpoint disabled'";
    let url = app.config.database_url.clone();
    eventually("the raced delivery ends failed", || {
        let (id, url) = (id.clone(), url.clone());
        async move {
            let mut conn = <AsyncPgConnection as AsyncConnection>::establish(&url)
                .await
                .expect("connect");
            (count(&mut conn, ended, &id).await == 1).then_some(())
        }
    })
    .await;
}

/// S-06, second form (the attacker re-try): a record that is found but no longer parses (a lead
/// whose stored `origin` is not one this service writes) fails its own delivery alone
/// (`subject unreadable`); another partner's delivery claimed with it is sent.
#[tokio::test]
async fn s06_a_delivery_whose_record_cannot_be_read_fails_alone() {
    let (rx, app, acme, beta, a, b) = two_tenants().await;
    let mut conn = db(&app).await;
    // The lead is corrupted and both deliveries written in one statement, so one claim takes
    // them together.
    diesel::sql_query(
        "WITH lead AS ( \
           INSERT INTO leads (id, partner_id, first_name, last_name, email, email_consent, \
             sms_consent, origin, location, is_test, created_at, updated_at) \
           VALUES (gen_random_uuid(), 'acme', 'A', 'B', 'a@b.co', true, true, 'Bad Origin!', \
             'X', false, now(), now()) RETURNING id), \
         bad AS ( \
           INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at) \
           SELECT gen_random_uuid(), 'acme', 'lead.created', lead.id::text, '{}', now() \
           FROM lead RETURNING id), \
         good AS ( \
           INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at) \
           VALUES (gen_random_uuid(), 'beta', 'ping', $2, '{}', now()) RETURNING id), \
         d1 AS ( \
           INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, \
             attempts, next_attempt_at, created_at) \
           SELECT gen_random_uuid(), $1::uuid, 'acme', bad.id, 'lead.created', 'pending', 0, \
             now(), now() FROM bad RETURNING id) \
         INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, \
           attempts, next_attempt_at, created_at) \
         SELECT gen_random_uuid(), $2::uuid, 'beta', good.id, 'ping', 'pending', 0, now(), now() \
         FROM good",
    )
    .bind::<Text, _>(a["id"].as_str().expect("id"))
    .bind::<Text, _>(b["id"].as_str().expect("id"))
    .execute(&mut conn)
    .await
    .expect("insert");
    let d = wait_list(&app, &beta.token, |d| {
        d.len() == 1 && d[0]["status"] == "delivered"
    })
    .await;
    assert_eq!(d[0]["event"], "ping");
    let d = wait_list(&app, &acme.token, |d| {
        d.len() == 1 && d[0]["status"] == "failed"
    })
    .await;
    assert_eq!(d[0]["lastError"], json!("subject unreadable"));
    let received = rx.received();
    assert_eq!(received.len(), 1, "only beta's ping was sent");
}

/// A lead event whose stored subject names the lead in another form a UUID parses from (32 hex
/// digits, no hyphens) is sent with its lead: the claim statement looks leads up by the
/// hyphenated form only, and the worker reads the others after it.
#[tokio::test]
async fn a_lead_named_in_another_uuid_form_is_read_after_the_claim() {
    let (rx, app, _acme, _beta, a, _b) = two_tenants().await;
    let mut conn = db(&app).await;
    diesel::sql_query(
        "WITH lead AS ( \
           INSERT INTO leads (id, partner_id, first_name, last_name, email, email_consent, \
             sms_consent, origin, location, is_test, created_at, updated_at) \
           VALUES (gen_random_uuid(), 'acme', 'Ann', 'Lee', 'ann@example.com', true, true, \
             'managed-website', 'Austin, TX', false, now(), now()) RETURNING id), \
         ev AS ( \
           INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at) \
           SELECT gen_random_uuid(), 'acme', 'lead.created', replace(lead.id::text, '-', ''), \
             '{}', now() FROM lead RETURNING id) \
         INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, \
           attempts, next_attempt_at, created_at) \
         SELECT gen_random_uuid(), $1::uuid, 'acme', ev.id, 'lead.created', 'pending', 0, now(), \
           now() FROM ev",
    )
    .bind::<Text, _>(a["id"].as_str().expect("id"))
    .execute(&mut conn)
    .await
    .expect("insert");
    eventually("the lead delivered", || async {
        (rx.received().len() == 1).then_some(())
    })
    .await;
    let sent = rx.received()[0].json();
    assert_eq!(sent["event"], "lead.created");
    assert_eq!(sent["data"]["lead"]["firstName"], "Ann", "{sent}");
}

/// "Attempts made so far" (extensions §1): a delivery whose attempt is in flight (claimed,
/// leased, its outcome not recorded) does not count it yet, so the log never shows `attempts: 1`
/// beside `lastAttemptAt: null` and an empty attempt log.
#[tokio::test]
async fn an_attempt_in_flight_is_not_counted_until_it_is_made() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    let e = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": "https://hooks.acme.invalid/x", "events": ["lead.created"] }),
        )
        .await;
    let mut conn = db(&app).await;
    // As a claim leaves a row: attempts counted, leased, pending, nothing recorded.
    diesel::sql_query(
        "WITH ev AS ( \
           INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at) \
           VALUES (gen_random_uuid(), 'acme', 'ping', $1, '{}', now()) RETURNING id) \
         INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, \
           attempts, next_attempt_at, lease_token, created_at) \
         SELECT gen_random_uuid(), $1::uuid, 'acme', ev.id, 'ping', 'pending', 1, \
           now() + interval '1 hour', gen_random_uuid(), now() FROM ev",
    )
    .bind::<Text, _>(e["id"].as_str().expect("id"))
    .execute(&mut conn)
    .await
    .expect("insert");
    let listed = app.get_ok("/api/v1/webhook-deliveries", &s.token).await;
    let d = &listed["data"][0];
    assert_eq!(
        (d["attempts"].clone(), d["lastAttemptAt"].clone()),
        (json!(0), Value::Null)
    );
    let detail = app
        .get_ok(
            &format!(
                "/api/v1/webhook-deliveries/{}",
                d["id"].as_str().expect("id")
            ),
            &s.token,
        )
        .await;
    assert_eq!(detail["data"]["attempts"], 0);
    assert_eq!(detail["data"]["attemptLog"], json!([]));
}
