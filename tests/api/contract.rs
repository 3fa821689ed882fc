//! Snapshots of the JSON shapes that are the contract (partner-api-spec.md, extensions.md): a
//! field renamed, dropped, added or retyped shows up as a snapshot diff to review, not as a
//! silent change. Volatile values (ids, timestamps, secrets, codes, cursors) are redacted to a
//! placeholder after checking their format, so the snapshot still pins the format. Snapshots live
//! in `tests/api/snapshots/`; see docs/testing.md for reviewing them.

use insta::internals::{Content, Redaction};
use reqwest::{Method, Response};
use serde_json::{Value, json};

use crate::helpers::{TestApp, body, eventually, lead_body};
use crate::receiver::Receiver;

/// Replaces a UUID with `[uuid]`, failing on anything else.
fn uuid() -> Redaction {
    insta::dynamic_redaction(|v: Content, path| {
        let s = v.as_str().unwrap_or_default();
        assert!(uuid::Uuid::parse_str(s).is_ok(), "{path}: {v:?} is no UUID");
        "[uuid]"
    })
}

/// Replaces a timestamp as the wire writes them, RFC 3339 in UTC with milliseconds
/// (`2026-11-20T10:00:00.000Z`), with `[timestamp]` (a null stays null); fails on anything else.
fn timestamp() -> Redaction {
    insta::dynamic_redaction(|v: Content, path| {
        if matches!(v, Content::None | Content::Unit) {
            return v;
        }
        let s = v.as_str().unwrap_or_default();
        assert!(
            s.len() == 24
                && s.ends_with('Z')
                && time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
                    .is_ok(),
            "{path}: {v:?} is no timestamp"
        );
        Content::from("[timestamp]")
    })
}

/// Replaces a `YYYY-MM-DD` date with `[date]`.
fn date() -> Redaction {
    insta::dynamic_redaction(|v: Content, path| {
        let s = v.as_str().unwrap_or_default();
        let format = time::macros::format_description!("[year]-[month]-[day]");
        assert!(
            time::Date::parse(s, format).is_ok(),
            "{path}: {v:?} is no date"
        );
        "[date]"
    })
}

/// Keys redacted wherever they appear, with the format each must have.
const UUID_KEYS: [&str; 4] = ["id", "recordId", "bulkOrderId", "endpointId"];
const TIMESTAMP_KEYS: [&str; 11] = [
    "createdAt",
    "deliveredAt",
    "previousSecretExpiresAt",
    "updatedAt",
    "created_at",
    "expiresAt",
    "redeemedAt",
    "nextAttemptAt",
    "lastAttemptAt",
    "attemptedAt",
    "disabledAt",
];

/// Asserts `value` against snapshot `name`, with the common redactions of [`UUID_KEYS`] and
/// [`TIMESTAMP_KEYS`] plus `extra`; a key an `extra` selector ends with is left to that one.
fn snapshot(name: &str, value: &Value, extra: Vec<(&str, Redaction)>) {
    let mut s = insta::Settings::clone_current();
    s.set_sort_maps(true);
    s.set_omit_expression(true);
    let overridden = |key: &str| {
        extra
            .iter()
            .any(|(sel, _)| sel.ends_with(&format!(".{key}")))
    };
    for key in UUID_KEYS.into_iter().filter(|k| !overridden(k)) {
        s.add_redaction(&format!(".**.{key}"), uuid());
    }
    for key in TIMESTAMP_KEYS.into_iter().filter(|k| !overridden(k)) {
        s.add_redaction(&format!(".**.{key}"), timestamp());
    }
    for (selector, r) in extra {
        s.add_redaction(selector, r);
    }
    s.bind(|| insta::assert_json_snapshot!(name, value));
}

async fn send(req: reqwest::RequestBuilder) -> Response {
    req.send().await.expect("send")
}

#[tokio::test]
async fn leads_page_and_error_body() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    app.ingest_lead(&lead_body(
        "acme",
        json!({ "subId": "7", "questionId": "q-1" }),
    ))
    .await;
    app.ingest_lead(&lead_body("acme", json!({ "emailConsent": false })))
        .await;
    let page = app.get_ok("/api/v1/leads?limit=1", &s.token).await;
    let cursor = insta::dynamic_redaction(|v: Content, _| {
        assert!(v.as_str().is_some_and(|c| !c.is_empty()), "a cursor");
        "[cursor]"
    });
    snapshot("leads_page", &page, vec![(".page.nextCursor", cursor)]);
    let last = app
        .get_ok(
            &format!(
                "/api/v1/leads?limit=1&cursor={}",
                page["page"]["nextCursor"].as_str().expect("cursor")
            ),
            &s.token,
        )
        .await;
    snapshot("leads_last_page", &last, vec![]);

    let res = send(app.request(Method::GET, "/api/v1/leads")).await;
    snapshot("error_missing_bearer", &body(res).await, vec![]);
    let res = send(app.api(Method::GET, "/api/v1/leads?limit=0", &s.token)).await;
    snapshot("error_invalid_request", &body(res).await, vec![]);
}

#[tokio::test]
async fn orders_payouts_sub_accounts_and_coupons() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    let res = send(
        app.api(Method::POST, "/api/v1/sub-accounts", &s.token)
            .json(&json!({ "subId": "7", "nickname": "Front desk" })),
    )
    .await;
    snapshot("sub_account_created", &body(res).await, vec![]);
    snapshot(
        "sub_accounts",
        &app.get_ok("/api/v1/sub-accounts", &s.token).await,
        vec![],
    );

    let order = json!({ "orderId": "W-1", "partnerId": "acme", "createdDate": "2026-11-20T10:00:00.000Z",
        "subId": "7", "product": "Semaglutide", "amount": 299, "commission": 50.5, "status": "shipped",
        "isTest": false, "source": "pharmacy", "customerName": "Ann" });
    send(app.internal(Method::POST, "/orders").json(&order)).await;
    snapshot(
        "orders",
        &app.get_ok("/api/v1/orders", &s.token).await,
        vec![],
    );

    send(app.internal(Method::POST, "/payouts").json(
        &json!({ "partnerId": "acme", "payoutDate": "2026-11-30", "payoutAmount": 99.5, "status": "paid" }),
    ))
    .await;
    snapshot(
        "payouts",
        &app.get_ok("/api/v1/payouts", &s.token).await,
        vec![(".data[].createdAt", date())],
    );

    send(app.internal(Method::POST, "/care-services-coupons/bulk-orders").json(
        &json!({ "partnerId": "acme", "productSlug": "primary", "months": 12, "quantity": 1,
            "unitPriceCents": 9900, "purchaserEmail": "buyer@acme.test", "purchaserSource": "portal" }),
    ))
    .await;
    let code = insta::dynamic_redaction(|v: Content, _| {
        let c = v.as_str().unwrap_or_default();
        assert!(
            c.len() == 12
                && c.bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit()),
            "{c:?} is no coupon code"
        );
        "[code]"
    });
    snapshot(
        "coupons",
        &app.get_ok("/api/v1/care-services-coupons", &s.token).await,
        vec![(".data[].code", code)],
    );
}

#[tokio::test]
async fn webhook_endpoint_event_payload_and_delivery() {
    let rx = Receiver::start().await;
    let app = rx.app(|_| {}).await;
    let s = app.seed("acme", false).await;
    let secret = insta::dynamic_redaction(|v: Content, _| {
        assert!(
            v.as_str().is_some_and(|x| x.starts_with("whsec_")),
            "a secret"
        );
        "[secret]"
    });
    // The receiver's URL carries a random port.
    let url = insta::dynamic_redaction(|v: Content, _| {
        assert!(
            v.as_str().is_some_and(|x| x.starts_with("https://")),
            "an https URL"
        );
        "[receiver url]"
    });
    let ep = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": rx.url, "events": ["lead.created", "order.created", "payout.created"], "secret": true,
                "leadCreatedDelay": null, "customHeader": { "name": "X-Api-Key", "value": "k 1" } }),
        )
        .await;
    snapshot(
        "webhook_endpoint_created",
        &ep,
        vec![(".secret", secret), (".url", url)],
    );
    app.ingest_lead(&lead_body("acme", json!({}))).await;
    send(app.internal(Method::POST, "/orders").json(
        &json!({ "orderId": "W-1", "partnerId": "acme", "createdDate": "2026-11-20T10:00:00.000Z",
            "product": "Semaglutide", "amount": 299, "commission": 50.5, "status": "shipped",
            "isTest": false, "source": "pharmacy", "customerName": "Ann" }),
    ))
    .await;
    send(app.internal(Method::POST, "/payouts").json(
        &json!({ "partnerId": "acme", "payoutDate": "2026-11-30", "payoutAmount": 99.5, "status": "paid" }),
    ))
    .await;
    let mut events: Vec<Value> = rx.wait_for(3).await.iter().map(|r| r.json()).collect();
    events.sort_by_key(|e| e["event"].as_str().map(str::to_owned));
    for e in &events {
        let name = format!(
            "event_{}",
            e["event"].as_str().expect("event").replace('.', "_")
        );
        let extra = if e["event"] == "payout.created" {
            vec![(".data.payout.createdAt", date())]
        } else {
            vec![]
        };
        snapshot(&name, e, extra);
    }
    // The delivery log, once that delivery is recorded as delivered.
    let log = eventually("the lead.created delivery to be delivered", || async {
        let log = app
            .get_ok("/api/v1/webhook-deliveries?event=lead.created", &s.token)
            .await;
        (log["data"][0]["status"] == "delivered").then_some(log)
    })
    .await;
    snapshot("webhook_deliveries", &log, vec![]);
    let id = log["data"][0]["id"].as_str().expect("id").to_owned();
    let millis = insta::dynamic_redaction(|v: Content, _| {
        assert!(v.as_u64().is_some(), "{v:?} is no count of milliseconds");
        "[ms]"
    });
    let one = app
        .get_ok(&format!("/api/v1/webhook-deliveries/{id}"), &s.token)
        .await;
    snapshot(
        "webhook_delivery",
        &one,
        vec![(".data.attemptLog[].durationMs", millis)],
    );
}

#[tokio::test]
async fn public_catalog() {
    let app = TestApp::spawn_with(|c| {
        c.intake_url = url::Url::parse("https://intake.test").expect("url");
        c.legacy_intake_url = url::Url::parse("https://legacy.test").expect("url");
    })
    .await;
    app.seed("acme", false).await;
    let product = json!({
        "name": "Semaglutide", "categories": ["weight-loss"], "details": "Available in 48 states",
        "imageUrl": "https://img.test/p.png", "imageFileId": "00000000-0000-4000-8000-0000000000f1",
        "imageSourceUrl": "https://img.test/src.png", "active": true,
        "legacyPath": "forms/semaglutide", "selfHostedSlug": "sema", "selfHostedLangs": ["en"],
        "suggestedPrices": "$199 - $1299",
        "tiers": [
            { "key": "m1", "label": "1 month", "months": 1, "minPrice": 199, "maxPrice": 399, "recommendedPrice": 299, "commission": 50 },
            { "key": "m3", "label": "3 months", "months": 3, "minPrice": 999, "maxPrice": 1499, "recommendedPrice": 1299, "commission": 150 }
        ]
    });
    let res = send(
        app.internal(
            Method::PUT,
            "/medical-products/00000000-0000-4000-8000-00000000000a",
        )
        .json(&product),
    )
    .await;
    assert_eq!(res.status(), 201);
    let res = send(app.request(Method::GET, "/api/all-products?partner_id=acme")).await;
    snapshot("catalog", &body(res).await, vec![]);
}
