//! Webhook deliveries that partners can see and steer (extensions.md §1-§3).

use std::sync::Arc;
use std::time::Duration;

use partner_domain::kernel::clock::{Clock, FixedClock};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::helpers::{TestApp, assert_error, body, eventually, lead_body, verify_signature};
use crate::receiver::Receiver;

const ENDPOINTS: &str = "/api/v1/webhook-endpoints";
const DELIVERIES: &str = "/api/v1/webhook-deliveries";

/// A partner API call with an optional JSON body: its status and body.
pub(crate) async fn call(
    app: &TestApp,
    method: Method,
    path: &str,
    token: &str,
    b: Option<Value>,
) -> (StatusCode, Value) {
    let mut req = app.api(method, path, token);
    if let Some(b) = b {
        req = req.json(&b);
    }
    let res = req.send().await.expect("send");
    let status = res.status();
    (status, body(res).await)
}

/// Polls the partner's delivery listing until `pred` holds ([`eventually`]).
pub(crate) async fn wait_list(
    app: &TestApp,
    token: &str,
    pred: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    eventually("the delivery listing to match", || async {
        let (_, b) = call(app, Method::GET, DELIVERIES, token, None).await;
        let d = b["data"].as_array().cloned().unwrap_or_default();
        pred(&d).then_some(d)
    })
    .await
}

fn now() -> i64 {
    OffsetDateTime::now_utc().unix_timestamp()
}

fn ts(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).expect("format")
}

#[tokio::test]
async fn webhook_deliveries_are_listed_newest_first_in_pages_filtered_and_validated() {
    let rx = Receiver::start().await;
    let app = rx.app(|_| {}).await;
    let s = app.seed("acme", false).await;
    let other = app.seed("beta", false).await;
    let ep = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": rx.url, "events": ["lead.created"] }),
        )
        .await;
    let ep_id = ep["id"].as_str().expect("id").to_owned();
    for _ in 0..3 {
        app.ingest_lead(&lead_body("acme", json!({}))).await;
    }
    let all = wait_list(&app, &s.token, |d| {
        d.len() == 3 && d.iter().all(|x| x["status"] == "delivered")
    })
    .await;
    let mut keys: Vec<&String> = all[0].as_object().expect("obj").keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "attempts",
            "createdAt",
            "deliveredAt",
            "endpointId",
            "event",
            "id",
            "lastAttemptAt",
            "lastError",
            "lastStatusCode",
            "nextAttemptAt",
            "status"
        ]
    );
    assert_eq!(all[0]["endpointId"], ep_id.as_str());
    assert_eq!(all[0]["lastStatusCode"], 200);
    assert!(all[0]["lastAttemptAt"].is_string());
    let created: Vec<&str> = all.iter().filter_map(|d| d["createdAt"].as_str()).collect();
    let mut sorted = created.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(created, sorted, "newest first");

    // Pages of two, then the rest, with the same rows in the same order.
    let (st, p1) = call(
        &app,
        Method::GET,
        &format!("{DELIVERIES}?limit=2"),
        &s.token,
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(p1["page"]["limit"], 2);
    let cursor = p1["page"]["nextCursor"].as_str().expect("more").to_owned();
    let (_, p2) = call(
        &app,
        Method::GET,
        &format!("{DELIVERIES}?limit=2&cursor={cursor}"),
        &s.token,
        None,
    )
    .await;
    assert!(p2["page"]["nextCursor"].is_null());
    let ids: Vec<Value> = p1["data"]
        .as_array()
        .expect("a")
        .iter()
        .chain(p2["data"].as_array().expect("a"))
        .map(|d| d["id"].clone())
        .collect();
    assert_eq!(ids, all.iter().map(|d| d["id"].clone()).collect::<Vec<_>>());

    // Filters.
    for (q, n) in [
        (format!("status=delivered&endpointId={ep_id}"), 3),
        ("status=pending,failed".to_owned(), 0),
        ("event=lead.created".to_owned(), 3),
        ("event=ping".to_owned(), 0),
        (format!("endpointId={}", uuid::Uuid::new_v4()), 0),
    ] {
        let (st, b) = call(
            &app,
            Method::GET,
            &format!("{DELIVERIES}?{q}"),
            &s.token,
            None,
        )
        .await;
        assert_eq!(st, StatusCode::OK, "{q}");
        assert_eq!(b["data"].as_array().map(Vec::len), Some(n), "{q}");
    }
    for q in [
        "status=done",
        "status=",
        "event=lead.deleted",
        "limit=0",
        "limit=201",
        "cursor=zzz",
        "endpointId=x",
    ] {
        let res = app
            .api(Method::GET, &format!("{DELIVERIES}?{q}"), &s.token)
            .send()
            .await
            .expect("send");
        assert_error(res, 400, "invalid_request").await;
    }
    // Another partner sees none of them, and their ids are 404 to it.
    let (_, b) = call(&app, Method::GET, DELIVERIES, &other.token, None).await;
    assert_eq!(b["data"], json!([]));
    let id = all[0]["id"].as_str().expect("id");
    for (m, path) in [
        (Method::GET, format!("{DELIVERIES}/{id}")),
        (Method::POST, format!("{DELIVERIES}/{id}/resend")),
        (Method::POST, format!("{ENDPOINTS}/{ep_id}/test")),
    ] {
        let res = app.api(m, &path, &other.token).send().await.expect("send");
        assert_error(res, 404, "not_found").await;
    }
    let res = app
        .api(
            Method::POST,
            &format!("{ENDPOINTS}/{ep_id}/recover"),
            &other.token,
        )
        .json(&json!({ "since": ts(OffsetDateTime::now_utc() - time::Duration::hours(1)) }))
        .send()
        .await
        .expect("send");
    assert_error(res, 404, "not_found").await;
    // The rate-limit group is the endpoints'.
    let res = app
        .api(Method::GET, DELIVERIES, &s.token)
        .send()
        .await
        .expect("send");
    assert!(res.headers().contains_key("x-ratelimit-limit"));
    // The operator's mirror answers the same shapes.
    let res = app
        .internal(
            Method::GET,
            &format!("/partners/acme/webhook-deliveries/{id}"),
        )
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(body(res).await["data"]["id"], id);
}

#[tokio::test]
async fn webhook_attempt_log_and_resend_with_the_same_delivery_id() {
    let rx = Receiver::start().await;
    let app = rx.app(|_| {}).await;
    let s = app.seed("acme", false).await;
    let ep = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": rx.url, "events": ["lead.created"], "secret": true }),
        )
        .await;
    let secret = ep["secret"].as_str().expect("secret").to_owned();
    rx.answer_with(&[500]);
    app.ingest_lead(&lead_body("acme", json!({}))).await;
    let d = wait_list(&app, &s.token, |d| {
        d.len() == 1 && d[0]["status"] == "delivered"
    })
    .await;
    let id = d[0]["id"].as_str().expect("id").to_owned();
    let (st, detail) = call(
        &app,
        Method::GET,
        &format!("{DELIVERIES}/{id}"),
        &s.token,
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    let detail = &detail["data"];
    assert_eq!(detail["attempts"], 2);
    let log = detail["attemptLog"].as_array().expect("log");
    assert_eq!(log.len(), 2);
    assert_eq!(
        (log[0]["statusCode"].clone(), log[0]["error"].clone()),
        (json!(500), json!("status 500"))
    );
    assert_eq!(
        (log[1]["statusCode"].clone(), log[1]["error"].clone()),
        (json!(200), Value::Null)
    );
    assert!(
        log.iter()
            .all(|a| a["durationMs"].is_i64() && a["attemptedAt"].is_string())
    );
    assert!(
        log[0]["attemptedAt"].as_str() <= log[1]["attemptedAt"].as_str(),
        "oldest first"
    );

    // Resend: pending, due now, the same id and body, signed afresh.
    let (st, r) = call(
        &app,
        Method::POST,
        &format!("{DELIVERIES}/{id}/resend"),
        &s.token,
        None,
    )
    .await;
    assert_eq!(st, StatusCode::ACCEPTED);
    assert_eq!(
        (r["data"]["id"].as_str(), r["data"]["status"].as_str()),
        (Some(id.as_str()), Some("pending"))
    );
    let got = rx.wait_for(3).await;
    assert_eq!(got[2].header("x-partner-delivery"), Some(id.as_str()));
    assert_eq!(got[2].body, got[1].body, "the same body bytes");
    let sig = got[2].header("x-partner-signature").expect("signed");
    assert_eq!(verify_signature(sig, &got[2].body, &secret, now()), Ok(()));
    let d = wait_list(&app, &s.token, |d| {
        d[0]["status"] == "delivered" && d[0]["attempts"] == 3
    })
    .await;
    assert_eq!(d.len(), 1, "no new delivery");

    // A resend after the budget was spent gets a fresh budget of 1 + schedule attempts.
    rx.answer_with(&[500, 500, 500, 500]);
    call(
        &app,
        Method::POST,
        &format!("{DELIVERIES}/{id}/resend"),
        &s.token,
        None,
    )
    .await;
    let d = wait_list(&app, &s.token, |d| d[0]["status"] == "failed").await;
    assert_eq!(d[0]["attempts"], 6, "3 before, then 1 + 2 retries");
    call(
        &app,
        Method::POST,
        &format!("{DELIVERIES}/{id}/resend"),
        &s.token,
        None,
    )
    .await;
    let d = wait_list(&app, &s.token, |d| d[0]["status"] == "delivered").await;
    assert_eq!(
        d[0]["attempts"], 8,
        "one more 500 from the script, then 200"
    );
    let (_, detail) = call(
        &app,
        Method::GET,
        &format!("{DELIVERIES}/{id}"),
        &s.token,
        None,
    )
    .await;
    assert_eq!(
        detail["data"]["attemptLog"].as_array().map(Vec::len),
        Some(8)
    );
}

#[tokio::test]
async fn webhook_test_sends_a_signed_ping_that_no_endpoint_subscribes_to() {
    let rx = Receiver::start().await;
    let app = rx.app(|_| {}).await;
    let s = app.seed("acme", false).await;
    let ep = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": rx.url, "events": ["payout.created"], "secret": true }),
        )
        .await;
    let (ep_id, secret) = (
        ep["id"].as_str().expect("id").to_owned(),
        ep["secret"].as_str().expect("s").to_owned(),
    );
    let (st, r) = call(
        &app,
        Method::POST,
        &format!("{ENDPOINTS}/{ep_id}/test"),
        &s.token,
        None,
    )
    .await;
    assert_eq!(st, StatusCode::ACCEPTED);
    assert_eq!(
        (r["data"]["event"].as_str(), r["data"]["status"].as_str()),
        (Some("ping"), Some("pending"))
    );
    let got = rx.wait_for(1).await;
    let b = got[0].json();
    assert_eq!(got[0].header("x-partner-event"), Some("ping"));
    assert_eq!(
        got[0].header("x-partner-delivery"),
        r["data"]["id"].as_str()
    );
    assert_eq!(b["id"], r["data"]["id"]);
    assert_eq!(b["event"], "ping");
    assert_eq!(b["data"], json!({ "endpointId": ep_id }));
    assert_eq!(b["created_at"].as_str().map(str::len), Some(24));
    let sig = got[0].header("x-partner-signature").expect("signed");
    assert_eq!(verify_signature(sig, &got[0].body, &secret, now()), Ok(()));
    wait_list(&app, &s.token, |d| {
        d.len() == 1 && d[0]["status"] == "delivered"
    })
    .await;
    // `ping` is no event an endpoint can subscribe to.
    let res = app
        .api(Method::POST, ENDPOINTS, &s.token)
        .json(&json!({ "url": rx.url, "events": ["ping"] }))
        .send()
        .await
        .expect("send");
    assert_error(res, 400, "invalid_request").await;
    let res = app
        .api(
            Method::POST,
            &format!("{ENDPOINTS}/{}/test", uuid::Uuid::new_v4()),
            &s.token,
        )
        .send()
        .await
        .expect("send");
    assert_error(res, 404, "not_found").await;
}

#[tokio::test]
async fn webhook_recover_requeues_exactly_the_failed_deliveries_since_the_given_time() {
    let rx = Receiver::start().await;
    let app = rx.app(|_| {}).await;
    let s = app.seed("acme", false).await;
    let ep = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": rx.url, "events": ["lead.created"] }),
        )
        .await;
    let ep_id = ep["id"].as_str().expect("id").to_owned();
    let recover = format!("{ENDPOINTS}/{ep_id}/recover");
    // A fails before `since`; B fails at `since`; C is delivered after it.
    rx.answer_with(&[500, 500, 500]);
    app.ingest_lead(&lead_body("acme", json!({}))).await;
    let a = wait_list(&app, &s.token, |d| {
        d.len() == 1 && d[0]["status"] == "failed"
    })
    .await;
    // B must be created after A: the (millisecond) clock moves past A's creation first.
    let a_created =
        OffsetDateTime::parse(a[0]["createdAt"].as_str().expect("t"), &Rfc3339).expect("timestamp");
    eventually("the clock to move past A's creation", || async {
        (OffsetDateTime::now_utc() - a_created > time::Duration::milliseconds(1)).then_some(())
    })
    .await;
    rx.answer_with(&[500, 500, 500]);
    app.ingest_lead(&lead_body("acme", json!({}))).await;
    let d = wait_list(&app, &s.token, |d| {
        d.len() == 2 && d[0]["status"] == "failed"
    })
    .await;
    let (b_id, since) = (
        d[0]["id"].clone(),
        d[0]["createdAt"].as_str().expect("t").to_owned(),
    );
    let a_id = d[1]["id"].clone();
    app.ingest_lead(&lead_body("acme", json!({}))).await;
    wait_list(&app, &s.token, |d| {
        d.len() == 3 && d[0]["status"] == "delivered"
    })
    .await;
    let sent = rx.received().len();

    let (st, r) = call(
        &app,
        Method::POST,
        &recover,
        &s.token,
        Some(json!({ "since": since })),
    )
    .await;
    assert_eq!(st, StatusCode::ACCEPTED);
    assert_eq!(r, json!({ "data": { "requeued": 1, "remaining": 0 } }));
    let got = rx.wait_for(sent + 1).await;
    assert_eq!(got[sent].header("x-partner-delivery"), b_id.as_str());
    let d = wait_list(&app, &s.token, |d| {
        d.iter().filter(|x| x["status"] == "delivered").count() == 2
    })
    .await;
    let a = d.iter().find(|x| x["id"] == a_id).expect("A");
    assert_eq!(a["status"], "failed", "created before since: left alone");
    let b = d.iter().find(|x| x["id"] == b_id).expect("B");
    assert_eq!(b["attempts"], 4);

    // `since`: at most 7 days back, not in the future, required.
    let t = OffsetDateTime::now_utc();
    for bad in [
        json!({ "since": ts(t - time::Duration::days(8)) }),
        json!({ "since": ts(t + time::Duration::hours(1)) }),
        json!({ "since": "yesterday" }),
        json!({}),
    ] {
        let res = app
            .api(Method::POST, &recover, &s.token)
            .json(&bad)
            .send()
            .await
            .expect("send");
        assert_error(res, 400, "invalid_request").await;
    }
    let (st, r) = call(
        &app,
        Method::POST,
        &recover,
        &s.token,
        Some(json!({ "since": ts(t - time::Duration::days(6)) })),
    )
    .await;
    assert_eq!(
        (st, r),
        (
            StatusCode::ACCEPTED,
            json!({ "data": { "requeued": 1, "remaining": 0 } })
        ),
        "A"
    );
}

async fn get_endpoint(app: &TestApp, token: &str, id: &str) -> Value {
    let (_, b) = call(app, Method::GET, ENDPOINTS, token, None).await;
    b["data"]
        .as_array()
        .expect("list")
        .iter()
        .find(|e| e["id"] == id)
        .cloned()
        .expect("endpoint")
}

async fn wait_endpoint(
    app: &TestApp,
    token: &str,
    id: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    eventually("the endpoint to match", || async {
        let e = get_endpoint(app, token, id).await;
        pred(&e).then_some(e)
    })
    .await
}

#[tokio::test]
async fn webhook_410_disables_the_endpoint_at_once_and_nothing_more_is_queued() {
    let rx = Receiver::start().await;
    let app = rx.app(|_| {}).await;
    let s = app.seed("acme", false).await;
    let ep = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": rx.url, "events": ["lead.created"] }),
        )
        .await;
    assert_eq!(
        (
            ep["status"].as_str(),
            ep["disabledReason"].clone(),
            ep["disabledAt"].clone()
        ),
        (Some("enabled"), Value::Null, Value::Null)
    );
    let id = ep["id"].as_str().expect("id").to_owned();
    rx.answer_with(&[410]);
    app.ingest_lead(&lead_body("acme", json!({}))).await;
    let e = wait_endpoint(&app, &s.token, &id, |e| e["status"] == "disabled").await;
    assert_eq!(e["disabledReason"], "gone");
    assert!(e["disabledAt"].is_string());
    let d = wait_list(&app, &s.token, |d| {
        d.len() == 1 && d[0]["status"] == "failed"
    })
    .await;
    assert_eq!(
        (
            d[0]["attempts"].clone(),
            d[0]["lastStatusCode"].clone(),
            d[0]["lastError"].clone()
        ),
        (json!(1), json!(410), json!("endpoint disabled"))
    );
    // While disabled: nothing is queued, and nothing can be sent by hand. Deliveries are
    // written in the ingest's own transaction, so the listing is complete once it answers.
    app.ingest_lead(&lead_body("acme", json!({}))).await;
    let (_, b) = call(&app, Method::GET, DELIVERIES, &s.token, None).await;
    assert_eq!(
        b["data"].as_array().map(Vec::len),
        Some(1),
        "no delivery queued"
    );
    assert_eq!(rx.received().len(), 1);
    let res = app
        .api(Method::POST, &format!("{ENDPOINTS}/{id}/test"), &s.token)
        .send()
        .await
        .expect("send");
    assert_error(res, 400, "invalid_request").await;
    // Re-enabled, then recovered: the failed delivery is sent again.
    let (st, r) = call(
        &app,
        Method::PATCH,
        &format!("{ENDPOINTS}/{id}"),
        &s.token,
        Some(json!({ "enabled": true })),
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(
        (
            r["data"]["status"].as_str(),
            r["data"]["disabledReason"].clone(),
            r["data"]["disabledAt"].clone()
        ),
        (Some("enabled"), Value::Null, Value::Null)
    );
    let since = d[0]["createdAt"].as_str().expect("t").to_owned();
    let (_, r) = call(
        &app,
        Method::POST,
        &format!("{ENDPOINTS}/{id}/recover"),
        &s.token,
        Some(json!({ "since": since })),
    )
    .await;
    assert_eq!(r["data"]["requeued"], 1);
    wait_list(&app, &s.token, |d| {
        d.len() == 1 && d[0]["status"] == "delivered"
    })
    .await;
}

#[tokio::test]
async fn webhook_endpoints_can_be_disabled_and_their_pending_deliveries_end_failed() {
    let rx = Receiver::start().await;
    let app = rx.app(|_| {}).await;
    let s = app.seed("acme", false).await;
    let ep = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": rx.url, "events": ["lead.created"], "leadCreatedDelay": "1h" }),
        )
        .await;
    let id = ep["id"].as_str().expect("id").to_owned();
    app.ingest_lead(&lead_body("acme", json!({}))).await;
    wait_list(&app, &s.token, |d| {
        d.len() == 1 && d[0]["status"] == "pending"
    })
    .await;
    let (st, r) = call(
        &app,
        Method::PATCH,
        &format!("{ENDPOINTS}/{id}"),
        &s.token,
        Some(json!({ "enabled": false })),
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(
        (
            r["data"]["status"].as_str(),
            r["data"]["disabledReason"].clone()
        ),
        (Some("disabled"), Value::Null)
    );
    assert!(r["data"]["disabledAt"].is_string());
    let d = wait_list(&app, &s.token, |d| d[0]["status"] == "failed").await;
    assert_eq!(d[0]["lastError"], "endpoint disabled");
    assert!(d[0]["nextAttemptAt"].is_null());
    let res = app
        .api(Method::PATCH, &format!("{ENDPOINTS}/{id}"), &s.token)
        .json(&json!({ "enabled": "yes" }))
        .send()
        .await
        .expect("send");
    assert_error(res, 400, "invalid_request").await;
    assert!(rx.received().is_empty());
}

#[tokio::test]
async fn webhook_endpoints_failing_for_the_disable_after_period_are_disabled() {
    let rx = Receiver::start().await;
    let app = rx
        .app(|c| {
            c.webhook_retry_schedule = vec![Duration::from_millis(250); 4];
            c.webhook_disable_after = Some(Duration::from_millis(600));
        })
        .await;
    let s = app.seed("acme", false).await;
    let ep = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": rx.url, "events": ["lead.created"] }),
        )
        .await;
    let id = ep["id"].as_str().expect("id").to_owned();
    rx.answer_with(&[500; 10]);
    app.ingest_lead(&lead_body("acme", json!({}))).await;
    let e = wait_endpoint(&app, &s.token, &id, |e| e["status"] == "disabled").await;
    assert_eq!(e["disabledReason"], "failing");
    let d = wait_list(&app, &s.token, |d| d[0]["status"] == "failed").await;
    assert_eq!(d[0]["lastError"], "endpoint disabled");
    let n = rx.received().len();
    assert!(
        (3..=5).contains(&n),
        "disabled after about 600 ms of failures, not at the end of the budget: {n}"
    );
}

#[tokio::test]
async fn webhook_retry_after_on_503_defers_the_next_attempt() {
    let rx = Receiver::start().await;
    // Time moves only when the test moves it.
    let clock = Arc::new(FixedClock::new(OffsetDateTime::now_utc()));
    let app = TestApp::spawn_full(|c| rx.configure(c), clock.clone()).await;
    let s = app.seed("acme", false).await;
    let ep = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": rx.url, "events": ["lead.created"] }),
        )
        .await;
    let ep_id = ep["id"].as_str().expect("id").to_owned();
    rx.answer_retry_after(503, "2");
    app.ingest_lead(&lead_body("acme", json!({}))).await;
    let d = wait_list(&app, &s.token, |d| {
        d.len() == 1 && d[0]["lastStatusCode"] == 503
    })
    .await;
    let lead_id = d[0]["id"].clone();
    let parse = |v: &Value| OffsetDateTime::parse(v.as_str().expect("t"), &Rfc3339).expect("ts");
    let wait = parse(&d[0]["nextAttemptAt"]) - parse(&d[0]["lastAttemptAt"]);
    assert!(wait >= time::Duration::milliseconds(1900), "{wait}");
    // One second on: past the schedule's 100 ms, short of the 2 s asked for. A ping to the same
    // endpoint falls due now; the worker claims an endpoint's due deliveries oldest due first, so
    // a retry due after 100 ms would be claimed (its attempt counted) no later than the ping.
    clock.advance(time::Duration::seconds(1));
    let (st, r) = call(
        &app,
        Method::POST,
        &format!("{ENDPOINTS}/{ep_id}/test"),
        &s.token,
        None,
    )
    .await;
    assert_eq!(st, StatusCode::ACCEPTED);
    let ping_id = r["data"]["id"].clone();
    let d = wait_list(&app, &s.token, |d| {
        d.iter()
            .any(|x| x["id"] == ping_id && x["status"] == "delivered")
    })
    .await;
    let lead = d
        .iter()
        .find(|x| x["id"] == lead_id)
        .expect("the lead's delivery");
    assert_eq!(
        (lead["status"].as_str(), lead["attempts"].as_i64()),
        (Some("pending"), Some(1)),
        "not retried after the schedule's 100 ms"
    );
    assert_eq!(rx.received().len(), 2, "the 503, then the ping");
    // Past the 2 s: retried.
    clock.advance(time::Duration::milliseconds(1100));
    rx.wait_for(3).await;
    wait_list(&app, &s.token, |d| {
        d.iter()
            .any(|x| x["id"] == lead_id && x["status"] == "delivered")
    })
    .await;
    // A 429 with an HTTP date.
    let at = clock.now() + time::Duration::seconds(2);
    let date = at
        .format(&time::format_description::parse_borrowed::<1>(
            "[weekday repr:short], [day] [month repr:short] [year] [hour]:[minute]:[second] GMT",
        ).expect("fd"))
        .expect("format");
    rx.answer_retry_after(429, &date);
    app.ingest_lead(&lead_body("acme", json!({}))).await;
    let d = wait_list(&app, &s.token, |d| {
        d.len() == 3 && d[0]["lastStatusCode"] == 429
    })
    .await;
    assert!(parse(&d[0]["nextAttemptAt"]) >= at - time::Duration::seconds(1));
}

/// `t=<digits>` then `n` times `,v1=<64 lowercase hex>`: the shape Stripe's `verify_header` parses.
fn assert_stripe_shape(header: &str, n: usize) {
    let mut parts = header.split(',');
    let t = parts
        .next()
        .and_then(|p| p.strip_prefix("t="))
        .expect("t first");
    assert!(
        !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()),
        "{header}"
    );
    let v1: Vec<&str> = parts.map(|p| p.strip_prefix("v1=").expect("v1")).collect();
    assert_eq!(v1.len(), n, "{header}");
    assert!(
        v1.iter().all(|v| v.len() == 64
            && v.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))),
        "{header}"
    );
}

pub(crate) async fn ping(
    app: &TestApp,
    token: &str,
    rx: &Receiver,
    ep: &str,
) -> crate::receiver::Received {
    let n = rx.received().len();
    let (st, _) = call(
        app,
        Method::POST,
        &format!("{ENDPOINTS}/{ep}/test"),
        token,
        None,
    )
    .await;
    assert_eq!(st, StatusCode::ACCEPTED);
    rx.wait_for(n + 1).await.remove(n)
}

#[tokio::test]
async fn webhook_secret_rotation_signs_with_both_secrets_during_the_overlap_only() {
    let rx = Receiver::start().await;
    // The overlap ends when the test moves the clock past it.
    let clock = Arc::new(FixedClock::new(OffsetDateTime::now_utc()));
    let app = TestApp::spawn_full(
        |c| {
            rx.configure(c);
            c.webhook_secret_overlap = Duration::from_millis(1500);
        },
        clock.clone(),
    )
    .await;
    let now = || clock.now().unix_timestamp();
    let s = app.seed("acme", false).await;
    let ep = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": rx.url, "events": ["lead.created"], "secret": true }),
        )
        .await;
    let (id, old) = (
        ep["id"].as_str().expect("id").to_owned(),
        ep["secret"].as_str().expect("s").to_owned(),
    );
    assert!(ep["previousSecretExpiresAt"].is_null());
    // Without a rotation: exactly one v1.
    let r = ping(&app, &s.token, &rx, &id).await;
    assert_stripe_shape(r.header("x-partner-signature").expect("sig"), 1);

    let before = clock.now();
    let (st, b) = call(
        &app,
        Method::PATCH,
        &format!("{ENDPOINTS}/{id}"),
        &s.token,
        Some(json!({ "secret": true })),
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    let new = b["data"]["secret"]
        .as_str()
        .expect("new secret shown once")
        .to_owned();
    assert_ne!(new, old);
    let until = OffsetDateTime::parse(
        b["data"]["previousSecretExpiresAt"]
            .as_str()
            .expect("overlap"),
        &Rfc3339,
    )
    .expect("ts");
    assert!(until > before && until <= before + time::Duration::seconds(3));
    assert_eq!(
        get_endpoint(&app, &s.token, &id).await["previousSecretExpiresAt"],
        b["data"]["previousSecretExpiresAt"]
    );
    let r = ping(&app, &s.token, &rx, &id).await;
    let sig = r.header("x-partner-signature").expect("sig");
    assert_stripe_shape(sig, 2);
    assert_eq!(
        verify_signature(sig, &r.body, &old, now()),
        Ok(()),
        "the old secret verifies"
    );
    assert_eq!(
        verify_signature(sig, &r.body, &new, now()),
        Ok(()),
        "the new secret verifies"
    );

    // After the overlap: only the new secret.
    clock.advance(time::Duration::milliseconds(1600));
    assert!(get_endpoint(&app, &s.token, &id).await["previousSecretExpiresAt"].is_null());
    let r = ping(&app, &s.token, &rx, &id).await;
    let sig = r.header("x-partner-signature").expect("sig");
    assert_stripe_shape(sig, 1);
    assert_eq!(verify_signature(sig, &r.body, &new, now()), Ok(()));
    assert!(verify_signature(sig, &r.body, &old, now()).is_err());

    // `expirePrevious` ends a fresh overlap at once.
    let (_, b) = call(
        &app,
        Method::PATCH,
        &format!("{ENDPOINTS}/{id}"),
        &s.token,
        Some(json!({ "secret": true })),
    )
    .await;
    let newest = b["data"]["secret"].as_str().expect("s").to_owned();
    assert!(b["data"]["previousSecretExpiresAt"].is_string());
    let (_, b) = call(
        &app,
        Method::PATCH,
        &format!("{ENDPOINTS}/{id}"),
        &s.token,
        Some(json!({ "expirePrevious": true })),
    )
    .await;
    assert!(b["data"]["previousSecretExpiresAt"].is_null());
    assert!(b["data"].get("secret").is_none());
    let r = ping(&app, &s.token, &rx, &id).await;
    let sig = r.header("x-partner-signature").expect("sig");
    assert_stripe_shape(sig, 1);
    assert_eq!(verify_signature(sig, &r.body, &newest, now()), Ok(()));
    assert!(verify_signature(sig, &r.body, &new, now()).is_err());
    let (_, b) = call(
        &app,
        Method::PATCH,
        &format!("{ENDPOINTS}/{id}"),
        &s.token,
        Some(json!({ "secret": true, "expirePrevious": true })),
    )
    .await;
    assert!(b["data"]["previousSecretExpiresAt"].is_null());
}

#[tokio::test]
async fn webhook_secret_overlap_of_zero_ends_the_old_secret_at_once() {
    let rx = Receiver::start().await;
    let app = rx.app(|c| c.webhook_secret_overlap = Duration::ZERO).await;
    let s = app.seed("acme", false).await;
    let ep = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": rx.url, "events": ["lead.created"], "secret": true }),
        )
        .await;
    let (id, old) = (
        ep["id"].as_str().expect("id").to_owned(),
        ep["secret"].as_str().expect("s").to_owned(),
    );
    let (_, b) = call(
        &app,
        Method::PATCH,
        &format!("{ENDPOINTS}/{id}"),
        &s.token,
        Some(json!({ "secret": true })),
    )
    .await;
    assert!(b["data"]["previousSecretExpiresAt"].is_null());
    let new = b["data"]["secret"].as_str().expect("s").to_owned();
    let r = ping(&app, &s.token, &rx, &id).await;
    let sig = r.header("x-partner-signature").expect("sig");
    assert_stripe_shape(sig, 1);
    assert_eq!(verify_signature(sig, &r.body, &new, now()), Ok(()));
    assert!(verify_signature(sig, &r.body, &old, now()).is_err());
}

#[tokio::test]
async fn webhook_operator_mirrors_the_partner_calls() {
    let rx = Receiver::start().await;
    let app = rx.app(|_| {}).await;
    let s = app.seed("acme", false).await;
    app.seed("beta", false).await;
    let ep = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": rx.url, "events": ["lead.created"] }),
        )
        .await;
    let id = ep["id"].as_str().expect("id").to_owned();
    let op = |m: Method, path: String| app.internal(m, &path);
    let res = op(
        Method::POST,
        format!("/partners/acme/webhook-endpoints/{id}/test"),
    )
    .send()
    .await
    .expect("send");
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let d = body(res).await["data"].clone();
    rx.wait_for(1).await;
    let did = d["id"].as_str().expect("id").to_owned();
    wait_list(&app, &s.token, |l| {
        l.len() == 1 && l[0]["status"] == "delivered"
    })
    .await;
    let res = op(
        Method::GET,
        "/partners/acme/webhook-deliveries?event=ping&limit=500".to_owned(),
    )
    .send()
    .await
    .expect("send");
    let b = body(res).await;
    assert_eq!(
        (b["data"][0]["id"].as_str(), b["page"]["limit"].as_i64()),
        (Some(did.as_str()), Some(500))
    );
    let res = op(
        Method::POST,
        format!("/partners/acme/webhook-deliveries/{did}/resend"),
    )
    .send()
    .await
    .expect("send");
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let got = rx.wait_for(2).await;
    assert_eq!(got[1].header("x-partner-delivery"), Some(did.as_str()));
    let res = op(
        Method::GET,
        format!("/partners/acme/webhook-deliveries/{did}"),
    )
    .send()
    .await
    .expect("send");
    let b = body(res).await;
    assert!(b["data"]["attemptLog"].is_array());
    let res = op(
        Method::POST,
        format!("/partners/acme/webhook-endpoints/{id}/recover"),
    )
    .json(&json!({ "since": ts(OffsetDateTime::now_utc() - time::Duration::days(1)) }))
    .send()
    .await
    .expect("send");
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    assert_eq!(
        body(res).await,
        json!({ "data": { "requeued": 0, "remaining": 0 } })
    );
    // Another partner's ids, and unknown partners: 404.
    for path in [
        format!("/partners/beta/webhook-deliveries/{did}"),
        format!("/partners/nobody/webhook-deliveries/{did}"),
    ] {
        let res = op(Method::GET, path).send().await.expect("send");
        assert_error(res, 404, "not_found").await;
    }
    let res = op(
        Method::POST,
        format!("/partners/beta/webhook-endpoints/{id}/test"),
    )
    .send()
    .await
    .expect("send");
    assert_error(res, 404, "not_found").await;
}
