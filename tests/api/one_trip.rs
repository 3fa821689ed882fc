//! Every authenticated partner read (`GET`), whichever way it authenticates (in its own round
//! trip or behind the guard): the authentication answers and their order, revocation on the very
//! next request (on this instance and another), and tenancy, one table for all of them.

use std::sync::Arc;

use partner_domain::kernel::clock::FixedClock;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::helpers::{Seeded, TestApp, assert_error, body, lead_body, partner_body};

/// Each partner read, with the rate-limit group it charges (checked through its headers).
pub(crate) const READS: [&str; 22] = [
    "/api/v1/sub-accounts",
    "/api/v1/sub-accounts/{sub}",
    "/api/v1/leads",
    "/api/v1/leads/{lead}",
    "/api/v1/orders",
    "/api/v1/orders/{order}",
    "/api/v1/orders/{simulated}",
    "/api/v1/payouts",
    "/api/v1/payouts/{payout}",
    "/api/v1/dna-links",
    "/api/v1/medical-intake-links?sub=7",
    "/api/v1/care-service-links?sub=7",
    "/api/v1/embed",
    "/api/v1/care-services-coupons",
    "/api/v1/care-services-coupons?status=active,redeemed&product_slug=primary",
    "/api/v1/care-services-coupons/{coupon}",
    "/api/v1/webhook-endpoints",
    "/api/v1/webhook-deliveries",
    "/api/v1/webhook-deliveries/by-hour",
    "/api/v1/webhook-deliveries/{delivery}",
    "/api/v1/events",
    "/api/v1/events/{event}",
];

/// What only the other tenant has: none of it may appear in the first tenant's answers.
const MARK: &str = "zeta";

async fn post_ok(app: &TestApp, path: &str, b: Value) -> Value {
    let res = app
        .internal(Method::POST, path)
        .json(&b)
        .send()
        .await
        .expect("send");
    assert!(res.status().is_success(), "POST {path}: {}", res.status());
    body(res).await
}

/// The ids of a partner's records that [`populate`] made, for the reads by id.
#[derive(Debug, Clone)]
pub(crate) struct Ids {
    pub(crate) delivery: String,
    pub(crate) lead: String,
    pub(crate) order: String,
    pub(crate) simulated: String,
    pub(crate) payout: String,
    pub(crate) sub: String,
    pub(crate) coupon: String,
    pub(crate) event: String,
}

/// A partner with a sub-account (subId 7), a lead, an order, a simulated order, a payout, coupons,
/// a webhook endpoint and a delivery; every free text carries `tag`. Returns its seed and the ids
/// of its records (the first event's too).
pub(crate) async fn populate(app: &TestApp, partner: &str, tag: &str) -> (Seeded, Ids) {
    let s = app.seed(partner, false).await;
    let res = app
        .api(Method::POST, "/api/v1/sub-accounts", &s.token)
        .json(&json!({ "subId": "7", "nickname": format!("{tag} nick") }))
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::CREATED);
    let sub = body(res).await["data"]["id"]
        .as_str()
        .expect("sub-account id")
        .to_owned();
    app.create_webhook_endpoint(
        &s.token,
        &json!({ "url": format!("https://hooks.{tag}.invalid/x"),
                 "events": ["lead.created", "order.created", "payout.created"] }),
    )
    .await;
    let lead = app
        .ingest_lead(&lead_body(
            partner,
            json!({ "firstName": format!("{tag} first") }),
        ))
        .await["id"]
        .as_str()
        .expect("lead id")
        .to_owned();
    post_ok(
        app,
        "/orders",
        json!({ "orderId": format!("{tag}-order-1"), "partnerId": partner, "subId": "7",
                "createdDate": "2026-11-20T10:00:00.000Z", "product": format!("{tag} product"),
                "amount": 299.0, "commission": 45.5, "status": "shipped", "isTest": false,
                "source": "pharmacy", "customerName": "Ann Lee", "customerEmail": "ann@example.com" }),
    )
    .await;
    post_ok(
        app,
        "/analytics-events",
        json!({ "runId": format!("{tag}-run"), "partnerId": partner, "event": "order_completed",
                "product": format!("{tag} simulated"), "amount": 10, "occurredAt": "2026-11-19T10:00:00.000Z",
                "testSource": "simulation" }),
    )
    .await;
    let payout = post_ok(
        app,
        "/payouts",
        json!({ "partnerId": partner, "payoutDate": "2026-11-15", "payoutAmount": 12.5,
                "status": format!("{tag}-paid") }),
    )
    .await["data"]["recordId"]
        .as_str()
        .expect("payout id")
        .to_owned();
    let coupons = post_ok(
        app,
        "/care-services-coupons/bulk-orders",
        json!({ "partnerId": partner, "productSlug": "primary", "months": 12, "quantity": 2,
                "unitPriceCents": 9900, "purchaserEmail": format!("buyer@{tag}.test"),
                "purchaserSource": format!("{tag} source") }),
    )
    .await;
    let coupon = coupons["data"]["coupons"][0]["code"]
        .as_str()
        .expect("coupon code")
        .to_owned();
    let deliveries = app.get_ok("/api/v1/webhook-deliveries", &s.token).await;
    let delivery = deliveries["data"][0]["id"]
        .as_str()
        .expect("a delivery of the partner's events")
        .to_owned();
    let event = first_event(app, partner).await;
    let ids = Ids {
        delivery,
        lead,
        order: format!("{tag}-order-1"),
        simulated: format!("TEST-SIM-{tag}-run"),
        payout,
        sub,
        coupon,
        event,
    };
    (s, ids)
}

/// The id of the partner's first event, read from the database (not through the API, whose
/// budget the tests count), once every event of the partner is readable in the feed (below the
/// horizon: every older transaction of the cluster has ended).
async fn first_event(app: &TestApp, partner: &str) -> String {
    use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
    #[derive(diesel::QueryableByName)]
    struct Row {
        #[diesel(sql_type = diesel::sql_types::Uuid)]
        id: uuid::Uuid,
    }
    let mut conn = AsyncPgConnection::establish(&app.config.database_url)
        .await
        .expect("connect");
    let conn = &tokio::sync::Mutex::new(&mut conn);
    crate::helpers::eventually("the partner's events readable in the feed", || async move {
        let mut c = conn.lock().await;
        let row: Option<Row> = diesel::sql_query(
            "SELECT id FROM domain_events WHERE partner_id = $1 AND kind <> 'ping' \
             AND NOT EXISTS (SELECT 1 FROM domain_events WHERE partner_id = $1 \
               AND txid >= pg_snapshot_xmin(pg_current_snapshot())::text::bigint) \
             ORDER BY txid, seq LIMIT 1",
        )
        .bind::<diesel::sql_types::Text, _>(partner)
        .get_result(&mut **c)
        .await
        .ok();
        row.map(|r| r.id.to_string())
    })
    .await
}

/// `read` with the ids of `ids` in its placeholders.
pub(crate) fn path(read: &str, ids: &Ids) -> String {
    read.replace("{delivery}", &ids.delivery)
        .replace("{lead}", &ids.lead)
        .replace("{order}", &ids.order)
        .replace("{simulated}", &ids.simulated)
        .replace("{payout}", &ids.payout)
        .replace("{sub}", &ids.sub)
        .replace("{coupon}", &ids.coupon)
        .replace("{event}", &ids.event)
}

async fn status(app: &TestApp, path: &str, token: &str) -> (StatusCode, String) {
    let res = app
        .api(Method::GET, path, token)
        .send()
        .await
        .expect("send");
    let st = res.status();
    (st, res.text().await.expect("body"))
}

#[tokio::test]
async fn every_partner_read_answers_only_its_tenant_and_only_a_live_token() {
    let clock = Arc::new(FixedClock::new(OffsetDateTime::now_utc()));
    let app = TestApp::spawn_full(|_| {}, clock.clone()).await;
    let (acme, acme_ids) = populate(&app, "acme", "acme").await;
    let (zeta, zeta_ids) = populate(&app, "zeta", MARK).await;
    let zeta_delivery = zeta_ids.delivery.clone();
    let other = app.sibling().await;

    // Tenancy: a live token reads its own partner's rows, none of the other's; a delivery id of
    // the other partner is 404.
    for read in READS {
        let p = path(read, &acme_ids);
        let res = app
            .api(Method::GET, &p, &acme.token)
            .send()
            .await
            .expect("send");
        assert_eq!(res.status(), StatusCode::OK, "GET {p}");
        for h in [
            "x-ratelimit-limit",
            "x-ratelimit-remaining",
            "x-ratelimit-reset",
        ] {
            assert!(res.headers().contains_key(h), "GET {p}: {h}");
        }
        let text = res.text().await.expect("body");
        assert!(
            !text.contains(MARK)
                && !text.contains(&zeta_delivery)
                && !text.contains(&zeta_ids.event),
            "GET {p} shows the other tenant: {text}"
        );
        // The other tenant's own read does show its rows (so the check above means something).
        let (st, text) = status(&app, &path(read, &zeta_ids), &zeta.token).await;
        assert_eq!(st, StatusCode::OK, "GET {read} for zeta");
        // (The hourly counts carry no text: `portal::the_hourly_counts_equal_the_log` checks
        // their tenancy by the numbers.)
        assert!(
            text.contains(MARK)
                || text.contains(&zeta_delivery)
                || read.contains("links")
                || read.contains("by-hour"),
            "{read}: {text}"
        );
    }
    assert_error(
        app.api(
            Method::GET,
            &format!("/api/v1/webhook-deliveries/{zeta_delivery}"),
            &acme.token,
        )
        .send()
        .await
        .expect("send"),
        404,
        "not_found",
    )
    .await;

    // A delivery cursor is the partner's own: another partner's answers 400 (its page, read at
    // the cursor's position within the other partner's own rows, is discarded), an unknown
    // token with it 401.
    let page = app
        .get_ok("/api/v1/webhook-deliveries?limit=1", &acme.token)
        .await;
    let cursor = page["page"]["nextCursor"].as_str().expect("a next page");
    let with_cursor = format!("/api/v1/webhook-deliveries?limit=1&cursor={cursor}");
    assert_eq!(
        status(&app, &with_cursor, &acme.token).await.0,
        StatusCode::OK
    );
    assert_error(
        app.api(Method::GET, &with_cursor, &zeta.token)
            .send()
            .await
            .expect("send"),
        400,
        "invalid_request",
    )
    .await;
    assert_error(
        app.api(
            Method::GET,
            &with_cursor,
            &format!("pk_live_{}", "b".repeat(43)),
        )
        .send()
        .await
        .expect("send"),
        401,
        "invalid_token",
    )
    .await;

    // An unknown token, and no token.
    let unknown = format!("pk_live_{}", "a".repeat(43));
    for read in READS {
        let p = path(read, &acme_ids);
        assert_error(
            app.api(Method::GET, &p, &unknown)
                .send()
                .await
                .expect("send"),
            401,
            "invalid_token",
        )
        .await;
        assert_error(
            app.request(Method::GET, &p).send().await.expect("send"),
            401,
            "missing_bearer",
        )
        .await;
    }

    // An inactive partner: 403, and access again once reactivated.
    assert!(
        app.put_partner("acme", &partner_body(false))
            .await
            .status()
            .is_success()
    );
    for read in READS {
        let p = path(read, &acme_ids);
        let res = app
            .api(Method::GET, &p, &acme.token)
            .send()
            .await
            .expect("send");
        assert!(
            !res.headers().contains_key("x-ratelimit-limit"),
            "GET {p}: 403 comes before the rate limit"
        );
        assert_error(res, 403, "forbidden").await;
    }
    assert!(
        app.put_partner("acme", &partner_body(true))
            .await
            .status()
            .is_success()
    );
    for read in READS {
        let p = path(read, &acme_ids);
        assert_eq!(status(&app, &p, &acme.token).await.0, StatusCode::OK, "{p}");
    }

    // An expired token: 401 from the instant the clock passes its expiry.
    let res = app
        .internal(Method::POST, &format!("/users/{}/tokens", acme.user_id))
        .json(
            &json!({ "expiresAt": partner_domain::kernel::wire::format_timestamp(
            partner_domain::kernel::clock::Clock::now(clock.as_ref()) + time::Duration::seconds(60)) }),
        )
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::CREATED);
    let expiring = body(res).await["data"]["token"]
        .as_str()
        .expect("token")
        .to_owned();
    for read in READS {
        let p = path(read, &acme_ids);
        assert_eq!(status(&app, &p, &expiring).await.0, StatusCode::OK, "{p}");
    }
    clock.advance(time::Duration::seconds(60));
    for read in READS {
        let p = path(read, &acme_ids);
        assert_error(
            app.api(Method::GET, &p, &expiring)
                .send()
                .await
                .expect("send"),
            401,
            "invalid_token",
        )
        .await;
    }

    // Revocation acts on the very next request, on this instance and on another one, for a token
    // each read has just served.
    for read in READS {
        let p = path(read, &acme_ids);
        let (token_id, token) = app.create_token(&acme.user_id).await;
        assert_eq!(status(&app, &p, &token).await.0, StatusCode::OK, "{p}");
        assert_eq!(status(&other, &p, &token).await.0, StatusCode::OK, "{p}");
        let res = app
            .internal(Method::DELETE, &format!("/tokens/{token_id}"))
            .send()
            .await
            .expect("send");
        assert_eq!(res.status(), StatusCode::OK);
        for instance in [&app, &other] {
            assert_error(
                instance
                    .api(Method::GET, &p, &token)
                    .send()
                    .await
                    .expect("send"),
                401,
                "invalid_token",
            )
            .await;
        }
    }

    // A deleted user's token: 401 `unknown_user`.
    let res = app
        .internal(Method::DELETE, &format!("/users/{}", zeta.user_id))
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    for read in READS {
        let p = path(read, &zeta_ids);
        assert_error(
            app.api(Method::GET, &p, &zeta.token)
                .send()
                .await
                .expect("send"),
            401,
            "unknown_user",
        )
        .await;
    }
}

/// Other methods on a read's path still authenticate first, then answer 405 with the
/// rate-limit headers; an unknown token gets 401, not 405.
#[tokio::test]
async fn other_methods_on_a_read_path_authenticate_before_405() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    for p in [
        "/api/v1/sub-accounts",
        "/api/v1/orders",
        "/api/v1/payouts",
        "/api/v1/dna-links",
        "/api/v1/medical-intake-links",
        "/api/v1/care-service-links",
        "/api/v1/embed",
        "/api/v1/care-services-coupons",
        "/api/v1/webhook-endpoints",
        "/api/v1/webhook-deliveries",
        "/api/v1/events",
    ] {
        let unknown = format!("pk_live_{}", "a".repeat(43));
        assert_error(
            app.api(Method::PUT, p, &unknown)
                .send()
                .await
                .expect("send"),
            401,
            "invalid_token",
        )
        .await;
        let res = app
            .api(Method::PUT, p, &s.token)
            .send()
            .await
            .expect("send");
        assert!(res.headers().contains_key("x-ratelimit-limit"), "PUT {p}");
        assert_error(res, 405, "invalid_request").await;
    }
}

/// [`READS`] is every authenticated partner `GET` of the partner document: a read added to the
/// API without a line here fails this test instead of escaping the table's checks.
#[test]
fn the_table_holds_every_documented_partner_read() {
    let doc: Value =
        serde_json::to_value(partner_http::openapi::partner()).expect("the document as JSON");
    let mut documented: Vec<String> = doc["paths"]
        .as_object()
        .expect("paths")
        .iter()
        .filter(|(path, item)| {
            path.starts_with("/api/v1/")
                && *path != "/api/v1/openapi.json"
                && item["get"].is_object()
        })
        .map(|(path, _)| path.clone())
        .collect();
    let mut table: Vec<String> = READS
        .iter()
        .map(|r| {
            let path = r.split('?').next().unwrap_or(r);
            path.replace("{delivery}", "{id}")
                .replace("{lead}", "{id}")
                .replace("{sub}", "{id}")
                .replace("{order}", "{orderId}")
                .replace("{simulated}", "{orderId}")
                .replace("{payout}", "{recordId}")
                .replace("{coupon}", "{code}")
                .replace("{event}", "{id}")
        })
        .collect();
    documented.sort();
    table.sort();
    table.dedup();
    assert_eq!(table, documented);
}
