//! Webhook endpoints and signed HTTPS deliveries to a real receiver.

use std::sync::Arc;

use partner_domain::kernel::clock::FixedClock;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::helpers::{TestApp, assert_error, body, eventually, lead_body, verify_signature};
use crate::receiver::Receiver;

const ENDPOINTS: &str = "/api/v1/webhook-endpoints";

async fn app_for(receiver: &Receiver, clock: Option<Arc<FixedClock>>) -> TestApp {
    match clock {
        Some(c) => TestApp::spawn_full(|cfg| receiver.configure(cfg), c).await,
        None => receiver.app(|_| {}).await,
    }
}

async fn deliveries(app: &TestApp, partner: &str) -> Vec<Value> {
    let b = body(
        app.internal(
            Method::GET,
            &format!("/partners/{partner}/webhook-deliveries"),
        )
        .send()
        .await
        .expect("send"),
    )
    .await;
    b["data"].as_array().expect("data").clone()
}

/// Polls the delivery log until `pred` holds ([`eventually`]).
async fn wait_log(app: &TestApp, partner: &str, pred: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    eventually("the delivery log to match", || async {
        let d = deliveries(app, partner).await;
        pred(&d).then_some(d)
    })
    .await
}

#[tokio::test]
async fn endpoints_crud_and_validation() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    let other = app.seed("beta", false).await;
    let created = app.create_webhook_endpoint(&s.token, &json!({ "url": "https://hooks.example.com/in", "events": ["lead.created", "order.created"], "secret": true,
                "leadCreatedDelay": "5m", "customHeader": { "name": "X-Api-Key", "value": "k 1" } }),
    )
    .await;
    let secret = created["secret"]
        .as_str()
        .expect("secret shown once")
        .to_owned();
    assert!(secret.starts_with("whsec_"));
    assert_eq!(created["hasSecret"], true);
    assert_eq!(created["leadCreatedDelay"], "5m");
    assert_eq!(
        created["customHeader"],
        json!({ "name": "X-Api-Key", "value": "k 1" })
    );
    let id = created["id"].as_str().expect("id").to_owned();
    let list = app.get_ok(ENDPOINTS, &s.token).await;
    assert_eq!(list["data"].as_array().map(Vec::len), Some(1));
    assert!(
        list["data"][0].get("secret").is_none(),
        "the secret is never shown again"
    );
    let mut keys: Vec<&String> = list["data"][0].as_object().expect("obj").keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "createdAt",
            "customHeader",
            "disabledAt",
            "disabledReason",
            "events",
            "hasSecret",
            "id",
            "leadCreatedDelay",
            "previousSecretExpiresAt",
            "status",
            "url"
        ]
    );

    // PATCH: partial; null clears; secret false removes it.
    let res = app
        .api(Method::PATCH, &format!("{ENDPOINTS}/{id}"), &s.token)
        .json(&json!({ "events": ["payout.created"], "leadCreatedDelay": null, "secret": false }))
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    let patched = body(res).await["data"].clone();
    assert_eq!(
        (
            patched["events"].clone(),
            patched["leadCreatedDelay"].clone(),
            patched["hasSecret"].clone()
        ),
        (json!(["payout.created"]), Value::Null, json!(false))
    );
    assert_eq!(patched["customHeader"]["name"], "X-Api-Key", "untouched");
    assert!(patched.get("secret").is_none());

    // Validation.
    for bad in [
        json!({ "url": "http://hooks.example.com", "events": ["lead.created"] }),
        json!({ "url": "https://127.0.0.1/h", "events": ["lead.created"] }),
        json!({ "url": "https://10.0.0.7/h", "events": ["lead.created"] }),
        json!({ "url": "https://localhost/h", "events": ["lead.created"] }),
        json!({ "url": "https://hooks.example.com", "events": [] }),
        json!({ "url": "https://hooks.example.com", "events": ["lead.deleted"] }),
        json!({ "url": "https://hooks.example.com", "events": ["lead.created"], "leadCreatedDelay": "2m" }),
        json!({ "url": "https://hooks.example.com", "events": ["lead.created"], "customHeader": { "name": "X-Partner-Event", "value": "x" } }),
        json!({ "url": "https://hooks.example.com", "events": ["lead.created"], "customHeader": { "name": "Authorization", "value": "x" } }),
        json!({ "url": "https://hooks.example.com", "events": ["lead.created"], "extra": 1 }),
    ] {
        let res = app
            .api(Method::POST, ENDPOINTS, &s.token)
            .json(&bad)
            .send()
            .await
            .expect("send");
        assert_error(res, 400, "invalid_request").await;
    }
    // At most ten.
    for i in 1..10 {
        app.create_webhook_endpoint(
            &s.token,
            &json!({ "url": format!("https://hooks.example.com/{i}"), "events": ["lead.created"] }),
        )
        .await;
    }
    let res = app
        .api(Method::POST, ENDPOINTS, &s.token)
        .json(&json!({ "url": "https://hooks.example.com/11", "events": ["lead.created"] }))
        .send()
        .await
        .expect("send");
    assert_error(res, 400, "invalid_request").await;

    // Tenants: another partner can neither see, change nor delete it.
    assert_eq!(app.get_ok(ENDPOINTS, &other.token).await["data"], json!([]));
    let res = app
        .api(Method::PATCH, &format!("{ENDPOINTS}/{id}"), &other.token)
        .json(&json!({ "events": ["lead.created"] }))
        .send()
        .await
        .expect("send");
    assert_error(res, 404, "not_found").await;
    assert_error(
        app.api(Method::DELETE, &format!("{ENDPOINTS}/{id}"), &other.token)
            .send()
            .await
            .expect("send"),
        404,
        "not_found",
    )
    .await;
    let res = app
        .api(Method::DELETE, &format!("{ENDPOINTS}/{id}"), &s.token)
        .send()
        .await
        .expect("send");
    assert_eq!(body(res).await, json!({ "data": { "ok": true } }));
    assert_error(
        app.api(Method::DELETE, &format!("{ENDPOINTS}/{id}"), &s.token)
            .send()
            .await
            .expect("send"),
        404,
        "not_found",
    )
    .await;

    // The operator API manages the same endpoints.
    let res = app
        .internal(Method::POST, "/partners/beta/webhook-endpoints")
        .json(&json!({ "url": "https://hooks.example.com/b", "events": ["payout.created"] }))
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::CREATED);
    assert_eq!(
        app.get_ok(ENDPOINTS, &other.token).await["data"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    assert_error(
        app.internal(Method::GET, "/partners/ghost/webhook-endpoints")
            .send()
            .await
            .expect("send"),
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn a_signed_lead_created_delivery_over_https() {
    let rx = Receiver::start().await;
    let app = app_for(&rx, None).await;
    let s = app.seed("acme", false).await;
    let ep = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": rx.url, "events": ["lead.created", "lead.enriched"], "secret": true,
                "customHeader": { "name": "X-Api-Key", "value": "partner-key" } }),
        )
        .await;
    let secret = ep["secret"].as_str().expect("secret").to_owned();
    // A headless intake lead dispatches nothing; a managed-website lead does.
    app.ingest_lead(&lead_body(
        "acme",
        json!({ "origin": "headless_intake", "isTest": true, "testSource": "simulation" }),
    ))
    .await;
    let lead = app
        .ingest_lead(&lead_body("acme", json!({ "phone": null })))
        .await;
    let got = rx.wait_for(1).await;
    let r = &got[0];
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.header("x-partner-event"), Some("lead.created"));
    assert_eq!(r.header("x-api-key"), Some("partner-key"));
    let b = r.json();
    assert_eq!(
        r.header("x-partner-delivery"),
        b["id"].as_str(),
        "the id equals X-Partner-Delivery"
    );
    assert_eq!(b["event"], "lead.created");
    assert_eq!(b["created_at"].as_str().map(str::len), Some(24));
    assert_eq!(b["data"]["lead"]["id"], lead["id"]);
    assert_eq!(
        (
            b["data"]["lead"]["isTest"].clone(),
            b["data"]["lead"]["testSource"].clone()
        ),
        (json!(false), Value::Null)
    );
    let mut keys: Vec<&String> = b.as_object().expect("obj").keys().collect();
    keys.sort();
    assert_eq!(keys, ["created_at", "data", "event", "id"]);
    // The signature verifies over the exact raw body, with the secret shown at creation.
    let sig = r.header("x-partner-signature").expect("signed");
    let now = OffsetDateTime::now_utc().unix_timestamp();
    assert_eq!(verify_signature(sig, &r.body, &secret, now), Ok(()));
    assert!(verify_signature(sig, &r.body, "whsec_wrong", now).is_err());

    // Filling in the phone: lead.enriched with both phones.
    let id = lead["id"].as_str().expect("id");
    app.internal(Method::PATCH, &format!("/leads/{id}"))
        .json(&json!({ "phone": "+1 555 0101" }))
        .send()
        .await
        .expect("send");
    let got = rx.wait_for(2).await;
    let b = got[1].json();
    assert_eq!(b["event"], "lead.enriched");
    assert_eq!(
        (
            b["data"]["previousPhone"].clone(),
            b["data"]["currentPhone"].clone()
        ),
        (json!(""), json!("+1 555 0101"))
    );
    assert_eq!(b["data"]["lead"]["phone"], "+1 555 0101");
    // The same phone again fires nothing. Deliveries are written in the PATCH's own
    // transaction, so the log is complete once it answers.
    app.internal(Method::PATCH, &format!("/leads/{id}"))
        .json(&json!({ "phone": "+1 555 0101" }))
        .send()
        .await
        .expect("send");
    assert_eq!(deliveries(&app, "acme").await.len(), 2, "nothing queued");
    let log = wait_log(&app, "acme", |d| {
        d.len() == 2 && d.iter().all(|x| x["status"] == "delivered")
    })
    .await;
    assert_eq!(log[0]["attempts"], 1);
    assert_eq!(rx.received().len(), 2);
}

#[tokio::test]
async fn orders_and_payouts_and_unsigned_endpoints() {
    let rx = Receiver::start().await;
    let app = app_for(&rx, None).await;
    let s = app.seed("acme", false).await;
    app.create_webhook_endpoint(
        &s.token,
        &json!({ "url": rx.url, "events": ["order.created", "payout.created"] }),
    )
    .await;
    let order = json!({ "orderId": "W-1", "partnerId": "acme", "createdDate": "2026-11-20T10:00:00.000Z", "product": "P",
        "amount": 10, "commission": 1.5, "status": "shipped", "isTest": false, "source": "pharmacy", "customerName": "Ann" });
    for _ in 0..2 {
        app.internal(Method::POST, "/orders")
            .json(&order)
            .send()
            .await
            .expect("send");
    }
    app.internal(Method::POST, "/payouts")
        .json(&json!({ "partnerId": "acme", "payoutDate": "2026-11-30", "payoutAmount": 99.5, "status": "paid" }))
        .send().await.expect("send");
    // A lead is not subscribed. Deliveries are written in each request's own transaction, so
    // the log is complete once the requests have answered.
    app.ingest_lead(&lead_body("acme", json!({}))).await;
    let mut queued: Vec<Value> = deliveries(&app, "acme").await;
    queued.sort_by_key(|d| d["event"].as_str().map(str::to_owned));
    assert_eq!(
        queued
            .iter()
            .map(|d| d["event"].clone())
            .collect::<Vec<_>>(),
        [json!("order.created"), json!("payout.created")],
        "order.created once, payout.created once, no lead event"
    );
    wait_log(&app, "acme", |d| {
        d.iter().all(|x| x["status"] == "delivered")
    })
    .await;
    let got = rx.received();
    assert_eq!(got.len(), 2);
    let mut by_event: Vec<Value> = got.iter().map(|r| r.json()).collect();
    by_event.sort_by_key(|b| b["event"].as_str().map(str::to_owned));
    assert_eq!(by_event[0]["event"], "order.created");
    assert_eq!(by_event[0]["data"]["source"], "pharmacy");
    assert_eq!(by_event[0]["data"]["order"]["orderId"], "W-1");
    assert!(
        by_event[0]["data"]["order"].get("customerName").is_none(),
        "the partner's view of the order"
    );
    assert_eq!(by_event[0]["data"]["order"]["isTest"], false);
    assert_eq!(by_event[1]["event"], "payout.created");
    assert_eq!(by_event[1]["data"]["payout"]["payoutAmount"], json!(99.5));
    assert!(
        got.iter()
            .all(|r| r.header("x-partner-signature").is_none()),
        "no secret, no signature"
    );
}

/// Partner `acme` with an endpoint for `payout.created` at `rx`, which answers 500 and then
/// 503; one payout recorded. Returns the payout's body.
async fn payout_answered_500_then_503(app: &TestApp, rx: &Receiver) -> Value {
    let s = app.seed("acme", false).await;
    app.create_webhook_endpoint(
        &s.token,
        &json!({ "url": rx.url, "events": ["payout.created"] }),
    )
    .await;
    rx.answer_with(&[500, 503]);
    let payout = json!({ "partnerId": "acme", "payoutDate": "2026-11-30", "payoutAmount": 1, "status": "paid" });
    app.internal(Method::POST, "/payouts")
        .json(&payout)
        .send()
        .await
        .expect("send");
    payout
}

#[tokio::test]
async fn failed_attempts_are_retried_until_a_2xx_or_the_schedule_ends() {
    let rx = Receiver::start().await;
    let app = app_for(&rx, None).await;
    let payout = payout_answered_500_then_503(&app, &rx).await;
    let got = rx.wait_for(3).await;
    let ids: Vec<Option<&str>> = got.iter().map(|r| r.header("x-partner-delivery")).collect();
    assert!(
        ids.windows(2).all(|w| w[0] == w[1]),
        "the same delivery, retried"
    );
    let log = wait_log(&app, "acme", |d| {
        d.first().is_some_and(|x| x["status"] == "delivered")
    })
    .await;
    assert_eq!(
        (log[0]["attempts"].clone(), log[0]["lastStatusCode"].clone()),
        (json!(3), json!(200))
    );

    // A receiver that never answers 2xx: the first attempt and two retries, then `failed`.
    rx.answer_with(&[500, 500, 500, 500]);
    app.internal(Method::POST, "/payouts")
        .json(&payout)
        .send()
        .await
        .expect("send");
    let log = wait_log(&app, "acme", |d| d.iter().any(|x| x["status"] == "failed")).await;
    let failed = log
        .iter()
        .find(|x| x["status"] == "failed")
        .expect("failed");
    assert_eq!(
        (failed["attempts"].clone(), failed["lastStatusCode"].clone()),
        (json!(3), json!(500))
    );
    assert!(failed["nextAttemptAt"].is_null());
}

/// A retry is sent when it falls due (within the schedule's jitter), not at the worker's next
/// fallback poll: with the poll at 500 ms a 10 s retry came up to 0.5 s late, 1 in 5 outside the
/// documented 9-11 s (bbhooks, 2026-11-28). Here the poll is 5 s and the retry 400 ms (±10 %).
#[tokio::test]
async fn a_retry_is_sent_when_it_falls_due_not_at_the_next_fallback_poll() {
    let rx = Receiver::start().await;
    let app = rx
        .app(|c| {
            c.webhook_retry_schedule = vec![std::time::Duration::from_millis(400); 2];
            c.webhook_poll_interval = std::time::Duration::from_secs(5);
        })
        .await;
    payout_answered_500_then_503(&app, &rx).await;
    rx.wait_for(1).await;
    let first = std::time::Instant::now();
    rx.wait_for(2).await;
    let second = first.elapsed();
    rx.wait_for(3).await;
    let third = first.elapsed();
    // 440 ms at most each, plus recording and the test's own 20 ms polling; the poll is 5 s.
    assert!(
        second < std::time::Duration::from_millis(1500)
            && third < std::time::Duration::from_millis(2500),
        "retries after {second:?} and {third:?}"
    );
    wait_log(&app, "acme", |d| {
        d.first().is_some_and(|x| x["status"] == "delivered")
    })
    .await;
}

#[tokio::test]
async fn a_delayed_lead_created_carries_the_phone_supplied_during_the_delay() {
    let rx = Receiver::start().await;
    let clock = Arc::new(FixedClock::new(OffsetDateTime::now_utc()));
    let app = app_for(&rx, Some(clock.clone())).await;
    let s = app.seed("acme", false).await;
    let ep_id = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": rx.url, "events": ["lead.created"], "leadCreatedDelay": "1m" }),
        )
        .await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let lead = app
        .ingest_lead(&lead_body("acme", json!({ "phone": null })))
        .await;
    let id = lead["id"].as_str().expect("id");
    app.internal(Method::PATCH, &format!("/leads/{id}"))
        .json(&json!({ "phone": "+1 555 0199" }))
        .send()
        .await
        .expect("send");
    // A ping to the same endpoint falls due at once; the worker claims an endpoint's due
    // deliveries oldest due first, so a lead.created due now would be claimed no later.
    let ping = body(
        app.api(Method::POST, &format!("{ENDPOINTS}/{ep_id}/test"), &s.token)
            .send()
            .await
            .expect("send"),
    )
    .await["data"]["id"]
        .clone();
    let log = wait_log(&app, "acme", |d| {
        d.iter()
            .any(|x| x["id"] == ping && x["status"] == "delivered")
    })
    .await;
    let delayed = log
        .iter()
        .find(|x| x["event"] == "lead.created")
        .expect("queued");
    assert_eq!(
        (delayed["status"].as_str(), delayed["attempts"].as_i64()),
        (Some("pending"), Some(0)),
        "not before the delay"
    );
    assert_eq!(rx.received().len(), 1, "the ping only");
    clock.advance(time::Duration::seconds(61));
    let got = rx.wait_for(2).await;
    assert_eq!(got[1].header("x-partner-event"), Some("lead.created"));
    assert_eq!(got[1].json()["data"]["lead"]["phone"], "+1 555 0199");
}

/// A `PATCH` field that is a boolean, a URL or a list is absent or of its type: `null` is a 400
/// (it used to read as absent and answer 200 having changed nothing).
#[tokio::test]
async fn patch_fields_that_are_not_nullable_refuse_null() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    let created = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": "https://hooks.acme.invalid/x", "events": ["lead.created"] }),
        )
        .await;
    let path = format!(
        "/api/v1/webhook-endpoints/{}",
        created["id"].as_str().expect("id")
    );
    for field in ["enabled", "secret", "expirePrevious", "url", "events"] {
        let res = app
            .api(Method::PATCH, &path, &s.token)
            .json(&json!({ field: null }))
            .send()
            .await
            .expect("send");
        assert_error(res, 400, "invalid_request").await;
    }
    // `null` still clears what may be cleared.
    let res = app
        .api(Method::PATCH, &path, &s.token)
        .json(&json!({ "leadCreatedDelay": null, "customHeader": null }))
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
}

/// `lastError` names the TLS check that failed (issue 28): a receiver whose certificate marks
/// itself a CA (openssl's default for a self-signed one), and one whose issuer is not trusted.
#[tokio::test]
async fn a_tls_failure_says_which_check_failed() {
    for (rx, trusted, expected) in [
        (
            Receiver::start_as_ca().await,
            true,
            "tls error: certificate is a CA",
        ),
        (Receiver::start().await, false, "tls error: unknown issuer"),
    ] {
        let app = rx
            .app(|c| {
                if !trusted {
                    c.webhook_ca_file = None;
                }
            })
            .await;
        let s = app.seed("acme", false).await;
        let e = app
            .create_webhook_endpoint(
                &s.token,
                &json!({ "url": rx.url, "events": ["lead.created"] }),
            )
            .await;
        let res = app
            .api(
                Method::POST,
                &format!(
                    "/api/v1/webhook-endpoints/{}/test",
                    e["id"].as_str().expect("id")
                ),
                &s.token,
            )
            .send()
            .await
            .expect("send");
        assert_eq!(res.status(), StatusCode::ACCEPTED);
        let last_error = eventually("the ping's first attempt to fail", || async {
            let log = app.get_ok("/api/v1/webhook-deliveries", &s.token).await;
            log["data"][0]["lastError"].as_str().map(str::to_owned)
        })
        .await;
        assert_eq!(last_error, expected);
        assert!(rx.received().is_empty());
    }
}

/// The next `webhook_endpoints` announcement on `stream` (other channels skipped): its payload.
async fn next_announcement(
    stream: &mut (
             impl futures_util::Stream<Item = diesel::QueryResult<diesel::pg::PgNotification>> + Unpin
         ),
) -> String {
    use futures_util::StreamExt;
    loop {
        let n = tokio::time::timeout(std::time::Duration::from_secs(5), stream.next())
            .await
            .expect("an announcement within 5 s")
            .expect("the listening connection is open")
            .expect("a notification");
        if n.channel == "webhook_endpoints" {
            return n.payload;
        }
    }
}

/// The endpoint's URL as committed, read on a connection of its own.
async fn committed_url(conn: &mut diesel_async::AsyncPgConnection, id: &str) -> Option<String> {
    use diesel::sql_types::{Text, Uuid};
    use diesel_async::RunQueryDsl;
    #[derive(diesel::QueryableByName)]
    struct Row {
        #[diesel(sql_type = Text)]
        url: String,
    }
    let id = uuid::Uuid::parse_str(id).expect("uuid");
    diesel::sql_query("SELECT url FROM webhook_endpoints WHERE id = $1")
        .bind::<Uuid, _>(id)
        .load::<Row>(conn)
        .await
        .expect("read")
        .pop()
        .map(|r| r.url)
}

/// Issue 23, N1: every change of an endpoint is announced on `webhook_endpoints`, naming it, and
/// only once it is committed (what the announcement tells a worker is already what a claim
/// reads): a `PATCH` (announced right after its commit), a `PATCH` with an `Idempotency-Key`
/// (announced in the transaction that commits with its answer) and a `DELETE`
/// (docs/decisions.md, "An endpoint change is announced right after its commit").
#[tokio::test]
async fn every_endpoint_change_is_announced_once_committed() {
    use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};
    let rx = Receiver::start().await;
    let app = app_for(&rx, None).await;
    let s = app.seed("announced", false).await;
    let ep = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": rx.url, "events": ["lead.created"] }),
        )
        .await;
    let id = ep["id"].as_str().expect("id").to_owned();
    let path = format!("{ENDPOINTS}/{id}");
    let mut listener = AsyncPgConnection::establish(&app.config.database_url)
        .await
        .expect("connect");
    listener
        .batch_execute("LISTEN webhook_endpoints")
        .await
        .expect("listen");
    let mut reader = AsyncPgConnection::establish(&app.config.database_url)
        .await
        .expect("connect");
    let mut stream = std::pin::pin!(listener.notifications_stream());

    for (n, key) in [(1, None), (2, Some("announce-key-1"))] {
        let url = format!("{}/moved-{n}", rx.url);
        let mut req = app
            .api(Method::PATCH, &path, &s.token)
            .json(&json!({ "url": url, "secret": true }));
        if let Some(k) = key {
            req = req.header("Idempotency-Key", k);
        }
        let patch = async { req.send().await.expect("send").status() };
        let heard = async {
            let payload = next_announcement(&mut stream).await;
            // The change it names is committed already.
            (payload, committed_url(&mut reader, &id).await)
        };
        let (status, (payload, seen)) = futures_util::future::join(patch, heard).await;
        assert_eq!(status, StatusCode::OK, "PATCH {n}");
        assert_eq!(payload, id, "PATCH {n} names its endpoint");
        assert_eq!(
            seen.as_deref(),
            Some(url.as_str()),
            "PATCH {n} committed when heard"
        );
    }

    let (status, (payload, seen)) = futures_util::future::join(
        async {
            app.api(Method::DELETE, &path, &s.token)
                .send()
                .await
                .expect("send")
                .status()
        },
        async {
            let payload = next_announcement(&mut stream).await;
            (payload, committed_url(&mut reader, &id).await)
        },
    )
    .await;
    assert_eq!(status, StatusCode::OK, "DELETE");
    assert_eq!(payload, id, "the DELETE names its endpoint");
    assert_eq!(seen, None, "the DELETE committed when heard");
}
