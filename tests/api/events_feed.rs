//! The events feed (extensions.md §8.1): order, filters, limits, cursors, retention, tenancy, the
//! dispatch rules, `X-Partner-Event-Id`, and a reader polling with its cursor while writers
//! commit out of order sees every event exactly once.

use std::collections::HashSet;
use std::time::Duration;

use diesel::sql_types::Text;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use partner_domain::webhook::ports::DeliveryRepo;
use partner_postgres::PgStore;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::helpers::{TestApp, assert_error, body, eventually, lead_body};
use crate::receiver::Receiver;

/// `GET path` with `token`: status and body.
async fn get(app: &TestApp, path: &str, token: &str) -> (StatusCode, Value) {
    let res = app
        .api(Method::GET, path, token)
        .send()
        .await
        .expect("send");
    let st = res.status();
    (st, body(res).await)
}

/// The page at `path`, asserting 200 and a non-null `nextCursor`.
async fn page(app: &TestApp, path: &str, token: &str) -> (Vec<Value>, String) {
    let (st, b) = get(app, path, token).await;
    assert_eq!(st, StatusCode::OK, "GET {path}: {b}");
    let cursor = b["page"]["nextCursor"]
        .as_str()
        .unwrap_or_else(|| panic!("nextCursor is never null: {b}"))
        .to_owned();
    (b["data"].as_array().expect("data").clone(), cursor)
}

/// Every event of the feed from its start, page by page (`limit` each).
async fn whole_feed(app: &TestApp, token: &str, limit: u16) -> Vec<Value> {
    let mut all = Vec::new();
    let (mut events, mut cursor) = page(app, &format!("/api/v1/events?limit={limit}"), token).await;
    while !events.is_empty() {
        all.append(&mut events);
        (events, cursor) = page(
            app,
            &format!("/api/v1/events?limit={limit}&cursor={cursor}"),
            token,
        )
        .await;
    }
    all
}

/// Waits until the feed holds `n` events (an event becomes readable once every transaction
/// older than its own has ended, a moment after its commit) and returns them.
async fn feed_of(app: &TestApp, token: &str, n: usize) -> Vec<Value> {
    eventually(&format!("{n} events in the feed"), || async {
        let all = whole_feed(app, token, 200).await;
        (all.len() >= n).then_some(all)
    })
    .await
}

fn kinds(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["event"].as_str().expect("event"))
        .collect()
}

async fn post_internal(app: &TestApp, path: &str, b: Value) -> Value {
    let res = app
        .internal(Method::POST, path)
        .json(&b)
        .send()
        .await
        .expect("send");
    assert!(res.status().is_success(), "POST {path}: {}", res.status());
    body(res).await["data"].clone()
}

fn order(id: &str) -> Value {
    json!({ "orderId": id, "partnerId": "acme", "createdDate": "2026-11-20T10:00:00.000Z",
            "product": "Tirzepatide", "amount": 299.0, "commission": 45.5, "status": "shipped",
            "isTest": false, "source": "pharmacy", "customerName": "Ann Lee" })
}

#[tokio::test]
async fn the_feed_holds_every_event_oldest_first_without_an_endpoint() {
    let app = TestApp::spawn().await;
    let acme = app.seed("acme", false).await;
    let zeta = app.seed("zeta", false).await;

    // Before any event: an empty page whose cursor is the end of the feed.
    let (empty, end) = page(&app, "/api/v1/events", &acme.token).await;
    assert!(empty.is_empty());

    // No endpoint at all: events are recorded all the same. A headless_intake lead fires
    // nothing; another partner's events are not acme's.
    let lead = app.ingest_lead(&lead_body("acme", json!({}))).await;
    app.ingest_lead(&lead_body("acme", json!({ "origin": "headless_intake" })))
        .await;
    app.ingest_lead(&lead_body("zeta", json!({}))).await;
    let lead_id = lead["id"].as_str().expect("id");
    let res = app
        .internal(Method::PATCH, &format!("/leads/{lead_id}"))
        .json(&json!({ "phone": "+1 555 0199" }))
        .send()
        .await
        .expect("send");
    assert!(res.status().is_success());
    post_internal(&app, "/orders", order("feed-o-1")).await;
    post_internal(
        &app,
        "/payouts",
        json!({ "partnerId": "acme", "payoutDate": "2026-11-30", "payoutAmount": 99.5, "status": "paid" }),
    )
    .await;

    let all = feed_of(&app, &acme.token, 4).await;
    assert_eq!(
        kinds(&all),
        [
            "lead.created",
            "lead.enriched",
            "order.created",
            "payout.created"
        ],
        "oldest first, the headless lead and the other partner's lead absent"
    );
    // The webhook body's shape, with data built from the record as it is now (the enriched
    // phone shows in lead.created's data too, as a delayed delivery's would).
    let first = &all[0];
    let mut keys: Vec<&String> = first.as_object().expect("obj").keys().collect();
    keys.sort();
    assert_eq!(keys, ["created_at", "data", "event", "id"]);
    assert_eq!(first["data"]["lead"]["id"], lead["id"]);
    assert_eq!(first["data"]["lead"]["phone"], "+1 555 0199");
    assert_eq!(first["created_at"].as_str().map(str::len), Some(24));
    assert_eq!(all[1]["data"]["currentPhone"], "+1 555 0199");
    assert_eq!(all[2]["data"]["order"]["orderId"], "feed-o-1");
    assert_eq!(all[2]["data"]["source"], "pharmacy");
    assert_eq!(all[3]["data"]["payout"]["status"], "paid");
    let zeta_feed = feed_of(&app, &zeta.token, 1).await;
    assert_eq!(kinds(&zeta_feed), ["lead.created"]);

    // One event by id: the same object; another partner's is 404, a malformed id 400.
    for e in &all {
        let id = e["id"].as_str().expect("id");
        let (st, b) = get(&app, &format!("/api/v1/events/{id}"), &acme.token).await;
        assert_eq!(st, StatusCode::OK);
        assert_eq!(&b["data"], e);
    }
    let zeta_event = zeta_feed[0]["id"].as_str().expect("id");
    assert_error(
        app.api(
            Method::GET,
            &format!("/api/v1/events/{zeta_event}"),
            &acme.token,
        )
        .send()
        .await
        .expect("send"),
        404,
        "not_found",
    )
    .await;
    for (path, status, code) in [
        ("/api/v1/events/not-a-uuid", 400, "invalid_request"),
        (
            "/api/v1/events/00000000-0000-4000-8000-000000000000",
            404,
            "not_found",
        ),
    ] {
        assert_error(
            app.api(Method::GET, path, &acme.token)
                .send()
                .await
                .expect("send"),
            status,
            code,
        )
        .await;
    }

    // The cursor taken before the events were written sees exactly them.
    let (after_end, _) = page(
        &app,
        &format!("/api/v1/events?limit=200&cursor={end}"),
        &acme.token,
    )
    .await;
    assert_eq!(after_end, all);

    // Paging with limit=1 walks the same events in the same order, each once.
    assert_eq!(whole_feed(&app, &acme.token, 1).await, all);

    // An empty page returns the cursor it was given; without a cursor, the end of the feed,
    // from which a poller sees only what is newer.
    let (last_page, last) = page(&app, "/api/v1/events?limit=200", &acme.token).await;
    assert_eq!(last_page.len(), 4);
    let (none, same) = page(&app, &format!("/api/v1/events?cursor={last}"), &acme.token).await;
    assert!(none.is_empty());
    assert_eq!(same, last, "an empty page gives back its cursor");
    let (none, tail) = page(
        &app,
        "/api/v1/events?since=2999-01-01T00:00:00.000Z",
        &acme.token,
    )
    .await;
    assert!(none.is_empty());
    post_internal(&app, "/orders", order("feed-o-2")).await;
    let newer = eventually("the new order in the feed", || async {
        let (events, _) = page(&app, &format!("/api/v1/events?cursor={tail}"), &acme.token).await;
        (!events.is_empty()).then_some(events)
    })
    .await;
    assert_eq!(kinds(&newer), ["order.created"]);
    assert_eq!(newer[0]["data"]["order"]["orderId"], "feed-o-2");

    // `types` keeps the kinds named; `since` the events created at or after it.
    let (orders, _) = page(
        &app,
        "/api/v1/events?types=order.created,payout.created",
        &acme.token,
    )
    .await;
    assert_eq!(
        kinds(&orders),
        ["order.created", "payout.created", "order.created"]
    );
    let (leads, _) = page(&app, "/api/v1/events?types=lead.created", &acme.token).await;
    assert_eq!(kinds(&leads), ["lead.created"]);
    let since = all[2]["created_at"].as_str().expect("ts");
    let (from, _) = page(&app, &format!("/api/v1/events?since={since}"), &acme.token).await;
    assert!(
        from.iter()
            .all(|e| e["created_at"].as_str().expect("ts") >= since)
    );
    assert!(from.len() >= 3, "{from:?}");
    let (default_limit, _) = page(&app, "/api/v1/events", &acme.token).await;
    assert_eq!(default_limit.len(), 5);

    // Invalid parameters: 400 `invalid_request`; another partner's cursor too.
    let zeta_cursor = page(&app, "/api/v1/events", &zeta.token).await.1;
    for bad in [
        "limit=0".to_owned(),
        "limit=201".to_owned(),
        "limit=ten".to_owned(),
        "types=ping".to_owned(),
        "types=lead.created,nope".to_owned(),
        "since=yesterday".to_owned(),
        "cursor=e1garbage".to_owned(),
        format!("cursor={zeta_cursor}"),
    ] {
        assert_error(
            app.api(Method::GET, &format!("/api/v1/events?{bad}"), &acme.token)
                .send()
                .await
                .expect("send"),
            400,
            "invalid_request",
        )
        .await;
    }
    let (two, _) = page(&app, "/api/v1/events?limit=200", &acme.token).await;
    assert_eq!(two.len(), 5, "limit 200 is allowed");

    // `since` older than the retention (30 days by default): 410.
    let old = partner_domain::kernel::wire::format_timestamp(
        OffsetDateTime::now_utc() - time::Duration::days(31),
    );
    assert_error(
        app.api(
            Method::GET,
            &format!("/api/v1/events?since={old}"),
            &acme.token,
        )
        .send()
        .await
        .expect("send"),
        410,
        "cursor_expired",
    )
    .await;
}

#[tokio::test]
async fn every_delivery_carries_its_events_id_and_pings_stay_out_of_the_feed() {
    let rx = Receiver::start().await;
    let app = rx.app(|_| {}).await;
    let s = app.seed("acme", false).await;
    let mut endpoints = Vec::new();
    for _ in 0..2 {
        let e = app
            .create_webhook_endpoint(
                &s.token,
                &json!({ "url": rx.url, "events": ["lead.created"] }),
            )
            .await;
        endpoints.push(e["id"].as_str().expect("id").to_owned());
    }
    // One of them fails once: its retry carries the same event id too.
    rx.answer_with(&[500]);
    app.ingest_lead(&lead_body("acme", json!({}))).await;
    let got = rx.wait_for(3).await;
    let feed = feed_of(&app, &s.token, 1).await;
    assert_eq!(kinds(&feed), ["lead.created"]);
    let event_id = feed[0]["id"].as_str().expect("id");
    let deliveries: HashSet<&str> = got
        .iter()
        .map(|r| r.header("x-partner-delivery").expect("delivery id"))
        .collect();
    assert_eq!(deliveries.len(), 2, "two deliveries of one event");
    for r in &got {
        assert_eq!(r.header("x-partner-event-id"), Some(event_id));
        assert_ne!(r.json()["id"], event_id, "the body's id is the delivery's");
    }

    // A ping is delivered with its own event id, and never shows in the feed.
    let res = app
        .api(
            Method::POST,
            &format!("/api/v1/webhook-endpoints/{}/test", endpoints[0]),
            &s.token,
        )
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let got = rx.wait_for(4).await;
    let ping = got
        .iter()
        .find(|r| r.header("x-partner-event") == Some("ping"))
        .expect("the ping");
    let ping_event = ping.header("x-partner-event-id").expect("event id");
    assert_ne!(ping_event, event_id);
    app.ingest_lead(&lead_body("acme", json!({}))).await;
    let feed = feed_of(&app, &s.token, 2).await;
    assert_eq!(kinds(&feed), ["lead.created", "lead.created"]);
    assert_error(
        app.api(
            Method::GET,
            &format!("/api/v1/events/{ping_event}"),
            &s.token,
        )
        .send()
        .await
        .expect("send"),
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn a_cursor_expires_only_when_retention_removed_events_after_it() {
    let app = TestApp::spawn().await;
    let acme = app.seed("acme", false).await;
    let quiet = app.seed("quiet", false).await;
    let (_, start) = page(&app, "/api/v1/events", &acme.token).await;
    let (_, quiet_start) = page(&app, "/api/v1/events", &quiet.token).await;
    app.ingest_lead(&lead_body("acme", json!({}))).await;
    let all = feed_of(&app, &acme.token, 1).await;
    let (_, after) = page(&app, &format!("/api/v1/events?cursor={start}"), &acme.token).await;
    assert_eq!(all.len(), 1);

    // Retention removes the event (it has no delivery).
    let repo = PgStore::new(&app.config.database_url, 1).expect("pool");
    let later = OffsetDateTime::now_utc() + Duration::from_secs(1);
    assert_eq!(
        repo.prune_events(later, None, 500)
            .await
            .expect("prune")
            .deleted,
        1
    );

    // The cursor before it lost an event: 410. The cursor after it, and a quiet partner's
    // cursor, lost nothing: 200, an empty page, the same cursor.
    assert_error(
        app.api(
            Method::GET,
            &format!("/api/v1/events?cursor={start}"),
            &acme.token,
        )
        .send()
        .await
        .expect("send"),
        410,
        "cursor_expired",
    )
    .await;
    let (none, same) = page(&app, &format!("/api/v1/events?cursor={after}"), &acme.token).await;
    assert!(none.is_empty());
    assert_eq!(same, after);
    let (none, same) = page(
        &app,
        &format!("/api/v1/events?cursor={quiet_start}"),
        &quiet.token,
    )
    .await;
    assert!(none.is_empty());
    assert_eq!(same, quiet_start);
    // The removed event is gone by id too.
    let id = all[0]["id"].as_str().expect("id");
    assert_eq!(
        get(&app, &format!("/api/v1/events/{id}"), &acme.token)
            .await
            .0,
        StatusCode::NOT_FOUND
    );
}

/// Writes events as the outbox does (`txid` and `seq` by the columns' defaults) on connections of
/// their own, holding some transactions open while later ones commit, rolling some back; a reader
/// polls with its cursor meanwhile. It must see every committed event exactly once, none rolled
/// back, and in the order a fresh read of the whole feed gives (so nothing ever appeared before a
/// cursor it had been given).
#[tokio::test]
async fn a_polling_reader_sees_each_event_exactly_once_while_writers_commit_out_of_order() {
    const WRITERS: u64 = 6;
    const ROUNDS: u64 = 12;
    let app = TestApp::spawn_with(|c| {
        c.rate_limit = partner_http::Quota {
            limit: 1_000_000,
            window_secs: 60,
        };
    })
    .await;
    let s = app.seed("acme", false).await;
    let (_, start) = page(&app, "/api/v1/events", &s.token).await;

    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let url = app.config.database_url.clone();
            tokio::spawn(async move {
                let mut conn = AsyncPgConnection::establish(&url).await.expect("connect");
                let mut committed = Vec::new();
                let mut seed = w * 7919 + 17;
                for round in 0..ROUNDS {
                    seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                    let events = 1 + (seed >> 33) % 3;
                    // Some transactions stay open long, so later ones commit first.
                    let hold = if (w + round) % 4 == 0 {
                        150
                    } else {
                        (seed >> 40) % 20
                    };
                    let rollback = (w + round) % 7 == 3;
                    diesel::sql_query("BEGIN")
                        .execute(&mut conn)
                        .await
                        .expect("begin");
                    let mut ids = Vec::new();
                    for _ in 0..events {
                        let id = uuid::Uuid::new_v4();
                        diesel::sql_query(
                            "INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at) \
                             VALUES ($1::uuid, 'acme', 'payout.created', $1, '{}', now())",
                        )
                        .bind::<Text, _>(id.to_string())
                        .execute(&mut conn)
                        .await
                        .expect("insert");
                        ids.push(id.to_string());
                        tokio::time::sleep(Duration::from_millis(hold / 2)).await;
                    }
                    tokio::time::sleep(Duration::from_millis(hold)).await;
                    let end = if rollback { "ROLLBACK" } else { "COMMIT" };
                    diesel::sql_query(end)
                        .execute(&mut conn)
                        .await
                        .expect("end");
                    if !rollback {
                        committed.extend(ids);
                    }
                }
                committed
            })
        })
        .collect();

    // The reader: polls with its cursor until the writers are done and it has caught up.
    let mut seen: Vec<String> = Vec::new();
    let mut cursor = start.clone();
    let mut writers_done = false;
    let mut committed: HashSet<String> = HashSet::new();
    let mut handles = Some(writers);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (events, next) = page(
            &app,
            &format!("/api/v1/events?limit=7&cursor={cursor}"),
            &s.token,
        )
        .await;
        for e in &events {
            seen.push(e["id"].as_str().expect("id").to_owned());
        }
        cursor = next;
        if !writers_done
            && handles
                .as_ref()
                .is_some_and(|h| h.iter().all(|t| t.is_finished()))
        {
            for t in handles.take().expect("handles") {
                committed.extend(t.await.expect("writer"));
            }
            writers_done = true;
        }
        if writers_done && events.is_empty() && seen.len() >= committed.len() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the reader did not catch up: {} of {} seen",
            seen.len(),
            committed.len()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let unique: HashSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "an event was seen twice");
    assert_eq!(
        unique,
        committed.iter().collect::<HashSet<_>>(),
        "every committed event, and none rolled back"
    );
    // The feed read afresh has the order the reader met the events in.
    let whole: Vec<String> = whole_feed(&app, &s.token, 200)
        .await
        .iter()
        .map(|e| e["id"].as_str().expect("id").to_owned())
        .collect();
    assert_eq!(whole, seen);
}

/// The maintenance loop keeps events for `PARTNER_EVENT_RETENTION`, past their deliveries'
/// retention, then removes them: a cursor from before them then answers 410.
#[tokio::test]
async fn events_outlive_their_deliveries_until_their_own_retention() {
    let rx = Receiver::start().await;
    let app = rx
        .app(|c| {
            c.webhook_retention = Duration::from_millis(200);
            c.event_retention = Duration::from_secs(3600);
            c.webhook_maintenance_interval = Duration::from_millis(100);
        })
        .await;
    let s = app.seed("acme", false).await;
    app.create_webhook_endpoint(
        &s.token,
        &json!({ "url": rx.url, "events": ["lead.created"] }),
    )
    .await;
    app.ingest_lead(&lead_body("acme", json!({}))).await;
    rx.wait_for(1).await;
    eventually("the delivery pruned", || async {
        let (_, b) = get(&app, "/api/v1/webhook-deliveries", &s.token).await;
        b["data"]
            .as_array()
            .is_some_and(Vec::is_empty)
            .then_some(())
    })
    .await;
    assert_eq!(kinds(&feed_of(&app, &s.token, 1).await), ["lead.created"]);

    let short = rx
        .app(|c| {
            c.webhook_retention = Duration::from_millis(200);
            c.event_retention = Duration::from_millis(300);
            c.webhook_maintenance_interval = Duration::from_millis(100);
        })
        .await;
    let s = short.seed("acme", false).await;
    let (_, start) = page(&short, "/api/v1/events", &s.token).await;
    short.ingest_lead(&lead_body("acme", json!({}))).await;
    eventually(
        "the event pruned, and the cursor before it expired",
        || async {
            let res = short
                .api(
                    Method::GET,
                    &format!("/api/v1/events?cursor={start}"),
                    &s.token,
                )
                .send()
                .await
                .expect("send");
            (res.status() == StatusCode::GONE).then_some(())
        },
    )
    .await;
    assert!(whole_feed(&short, &s.token, 50).await.is_empty());
}
