//! A hostile-input pass over the sub-account and operator endpoints: only 4xx with the error
//! body, nothing written, the server still healthy.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{TestApp, body, partner_body};

fn hostile_strings() -> Vec<String> {
    vec![
        "'; DROP TABLE sub_accounts; --".into(),
        "\" OR 1=1 --".into(),
        "x".repeat(10 * 1024),
        "a\u{0}b".into(),
        "\u{0}".into(),
        "%00".into(),
        "../../etc/passwd".into(),
        "<script>alert(1)</script>".into(),
        "\u{202e}evil".into(),
        "🦀".repeat(100),
    ]
}

fn hostile_values() -> Vec<Value> {
    let mut v: Vec<Value> = hostile_strings().into_iter().map(Value::String).collect();
    v.extend([
        json!(null),
        json!(1e308),
        json!(-1),
        json!(true),
        json!([]),
        json!({}),
        json!([1, 2]),
        json!({ "$gt": "" }),
    ]);
    v
}

async fn expect_4xx(res: reqwest::Response, what: &str) {
    let status = res.status();
    assert!(status.is_client_error(), "{what}: got {status}");
    let b = body(res).await;
    assert!(
        b["error"]["code"].is_string() && b["error"]["message"].is_string(),
        "{what}: {b}"
    );
}

#[tokio::test]
async fn sub_account_endpoints_reject_hostile_input_and_write_nothing() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    for v in hostile_values() {
        // subId never accepts anything but 1-250.
        let res = app
            .api(Method::POST, "/api/v1/sub-accounts", &s.token)
            .json(&json!({ "subId": v, "nickname": "ok" }))
            .send()
            .await
            .expect("send");
        expect_4xx(res, &format!("subId {v}")).await;
        let res = app
            .api(Method::DELETE, "/api/v1/sub-accounts", &s.token)
            .json(&json!({ "recordId": v }))
            .send()
            .await
            .expect("send");
        expect_4xx(res, &format!("recordId {v}")).await;
        if !v.as_str().is_some_and(|s| {
            s.chars().count() <= 64 && !s.chars().any(char::is_control) && !s.trim().is_empty()
        }) {
            let res = app
                .api(Method::POST, "/api/v1/sub-accounts", &s.token)
                .json(&json!({ "subId": "9", "nickname": v }))
                .send()
                .await
                .expect("send");
            expect_4xx(res, &format!("nickname {v}")).await;
        }
    }
    let res = app
        .api(Method::POST, "/api/v1/sub-accounts", &s.token)
        .body(vec![b'{'; 1_100_000])
        .send()
        .await
        .expect("send");
    expect_4xx(res, "1 MB body").await;
    let res = app
        .api(Method::POST, "/api/v1/sub-accounts", &s.token)
        .body(vec![0xff, 0xfe, 0x00])
        .send()
        .await
        .expect("send");
    expect_4xx(res, "binary body").await;
    let list = body(
        app.api(Method::GET, "/api/v1/sub-accounts", &s.token)
            .send()
            .await
            .expect("send"),
    )
    .await;
    assert_eq!(list["data"], json!([]), "nothing was written");

    // SQL metacharacters in a valid nickname are data, stored verbatim.
    let sneaky = "Robert'); DROP TABLE sub_accounts;--";
    let res = app
        .api(Method::POST, "/api/v1/sub-accounts", &s.token)
        .json(&json!({ "subId": "9", "nickname": sneaky }))
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::CREATED);
    let list = body(
        app.api(Method::GET, "/api/v1/sub-accounts", &s.token)
            .send()
            .await
            .expect("send"),
    )
    .await;
    assert_eq!(list["data"][0]["nickname"], sneaky);
    assert_eq!(app.get_health().await, StatusCode::OK);
}

#[tokio::test]
async fn operator_endpoints_reject_hostile_input_and_write_nothing() {
    let app = TestApp::spawn().await;
    for v in hostile_values() {
        for field in [
            "name",
            "email",
            "defaultLang",
            "enabledLangs",
            "active",
            "careServices",
        ] {
            let mut b = partner_body(true);
            if field == "name"
                && v.as_str().is_some_and(|s| {
                    s.chars().count() <= 200
                        && !s.chars().any(char::is_control)
                        && !s.trim().is_empty()
                })
            {
                continue; // a legitimate (if odd) display name
            }
            if field == "active" && v.is_boolean() {
                continue;
            }
            b[field] = v.clone();
            let res = app.put_partner("victim", &b).await;
            expect_4xx(res, &format!("partner.{field} = {v}")).await;
        }
        let res = app
            .internal(Method::POST, "/users")
            .json(&json!({ "email": v, "partnerId": "victim", "admin": false }))
            .send()
            .await
            .expect("send");
        expect_4xx(res, &format!("user email {v}")).await;
        let res = app
            .internal(Method::POST, "/users")
            .json(&json!({ "email": "a@b.co", "partnerId": v, "admin": false }))
            .send()
            .await
            .expect("send");
        expect_4xx(res, &format!("user partnerId {v}")).await;
        if !v.is_boolean() {
            let res = app
                .internal(Method::PUT, "/care-services/feature-flags")
                .json(&json!({ "dermatology": v }))
                .send()
                .await
                .expect("send");
            expect_4xx(res, &format!("flag {v}")).await;
        }
    }
    for path in [
        "/partners/x'%3B--",
        "/partners/%00",
        "/users/%27/tokens",
        "/tokens/1%20OR%201=1/rotate",
    ] {
        let res = app.internal(Method::GET, path).send().await.expect("send");
        expect_4xx(res, path).await;
        let res = app
            .internal(Method::POST, path)
            .json(&json!({}))
            .send()
            .await
            .expect("send");
        expect_4xx(res, path).await;
    }
    let res = app
        .put_partner("victim", &json!({ "name": "x".repeat(1_100_000) }))
        .await;
    expect_4xx(res, "1 MB body").await;
    let res = app
        .internal(Method::GET, "/partners/victim")
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::NOT_FOUND, "nothing was written");
    let flags = body(
        app.internal(Method::GET, "/care-services/feature-flags")
            .send()
            .await
            .expect("send"),
    )
    .await;
    assert!(
        flags["data"]
            .as_object()
            .expect("obj")
            .values()
            .all(|v| v == &json!(true))
    );
    assert_eq!(app.get_health().await, StatusCode::OK);
}

#[tokio::test]
async fn ingest_and_catalog_endpoints_reject_control_characters_and_write_nothing() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    let nul = "a\u{0}b";
    let lead = crate::helpers::lead_body("acme", json!({}));
    for field in [
        "firstName",
        "lastName",
        "email",
        "phone",
        "origin",
        "location",
        "questionId",
        "partnerId",
    ] {
        let mut b = lead.clone();
        b[field] = json!(nul);
        let res = app
            .internal(Method::POST, "/leads")
            .json(&b)
            .send()
            .await
            .expect("send");
        expect_4xx(res, &format!("lead.{field}")).await;
    }
    let order = json!({ "orderId": "O1", "partnerId": "acme", "createdDate": "2026-11-20T10:00:00.000Z", "product": "P",
        "amount": 1, "commission": 0, "status": "shipped", "isTest": false, "source": "s" });
    for field in [
        "orderId",
        "product",
        "status",
        "source",
        "customerName",
        "customerEmail",
    ] {
        let mut b = order.clone();
        b[field] = json!(nul);
        let res = app
            .internal(Method::POST, "/orders")
            .json(&b)
            .send()
            .await
            .expect("send");
        expect_4xx(res, &format!("order.{field}")).await;
    }
    let product = json!({ "name": "X", "categories": ["wellness"], "details": "d", "imageUrl": "https://img.test/a.png",
        "imageFileId": "00000000-0000-4000-8000-000000000001", "imageSourceUrl": "https://img.test/b.png", "active": true,
        "legacyPath": "x", "selfHostedSlug": null, "selfHostedLangs": [], "suggestedPrices": "",
        "tiers": [{ "key": "m1", "label": "1", "months": 1, "minPrice": 1, "maxPrice": 2, "recommendedPrice": 1, "commission": 0 }] });
    for (field, value) in [
        ("name", json!(nul)),
        ("details", json!(nul)),
        ("imageUrl", json!("https://img.test/\u{0}.png")),
        ("imageSourceUrl", json!("https://img.test/a\nb.png")),
        ("legacyPath", json!(nul)),
        ("suggestedPrices", json!(nul)),
    ] {
        let mut b = product.clone();
        b[field] = value;
        let res = app
            .internal(
                Method::PUT,
                "/medical-products/00000000-0000-4000-8000-000000000002",
            )
            .json(&b)
            .send()
            .await
            .expect("send");
        expect_4xx(res, &format!("product.{field}")).await;
    }
    let res = app
        .internal(Method::POST, "/care-services-coupons/bulk-orders")
        .json(&json!({ "partnerId": "acme", "productSlug": "primary", "months": 12, "quantity": 1, "unitPriceCents": 1,
                        "purchaserEmail": "a@b.co", "purchaserSource": nul }))
        .send()
        .await
        .expect("send");
    expect_4xx(res, "coupon purchaserSource").await;
    assert_eq!(
        app.get_ok("/api/v1/leads?includeTest=true", &s.token).await["data"],
        json!([])
    );
    assert_eq!(
        app.get_ok("/api/v1/orders", &s.token).await["data"],
        json!([])
    );
    assert_eq!(
        app.get_ok("/api/v1/medical-intake-links", &s.token).await["data"],
        json!([])
    );
    assert_eq!(app.get_health().await, StatusCode::OK);
}

/// Timestamps whose offset carries them past year 9999 or before year 0000 in UTC are 400
/// `invalid_request` on every operator endpoint that takes one (they used to panic into a 500),
/// nothing is written, and the extreme values that stay within the years are accepted.
#[tokio::test]
async fn out_of_range_timestamps_are_400_not_panics() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    let bad = [
        "9999-12-31T23:59:59-23:59",
        "9999-12-31T23:59:59.999-00:01",
        "0000-01-01T00:00:00+23:59",
        "0000-01-01T00:00:00+00:01",
    ];
    for ts in bad {
        let cases: [(&str, String, Value); 4] = [
            (
                "order createdDate",
                "/orders".into(),
                json!({ "orderId": "O-1", "partnerId": "acme", "createdDate": ts, "product": "P",
                        "amount": 1, "commission": 0, "status": "shipped", "isTest": false,
                        "source": "pharmacy" }),
            ),
            (
                "analytics occurredAt",
                "/analytics-events".into(),
                json!({ "runId": "run-1", "partnerId": "acme", "event": "order_completed",
                        "product": "P", "amount": 1, "occurredAt": ts, "testSource": "simulation" }),
            ),
            (
                "coupon expiresAt",
                "/care-services-coupons/bulk-orders".into(),
                json!({ "partnerId": "acme", "productSlug": "primary", "months": 12, "quantity": 1,
                        "unitPriceCents": 1, "purchaserEmail": "a@b.co", "purchaserSource": "portal",
                        "expiresAt": ts }),
            ),
            (
                "token expiresAt",
                format!("/users/{}/tokens", s.user_id),
                json!({ "expiresAt": ts }),
            ),
        ];
        for (what, path, b) in cases {
            let res = app
                .internal(Method::POST, &path)
                .json(&b)
                .send()
                .await
                .expect("send");
            let msg = crate::helpers::assert_error(res, 400, "invalid_request").await;
            assert!(msg.contains("RFC 3339"), "{what} {ts}: {msg}");
        }
    }
    assert_eq!(
        app.get_ok("/api/v1/orders", &s.token).await["data"],
        json!([])
    );
    assert_eq!(
        app.get_ok("/api/v1/care-services-coupons", &s.token).await["total"],
        0
    );
    // The last representable instant, reached through an offset, is fine and round-trips.
    let res = app
        .internal(Method::POST, "/care-services-coupons/bulk-orders")
        .json(&json!({ "partnerId": "acme", "productSlug": "primary", "months": 12, "quantity": 1,
                        "unitPriceCents": 1, "purchaserEmail": "a@b.co", "purchaserSource": "portal",
                        "expiresAt": "9999-12-31T00:00:00.999-23:59" }))
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::CREATED);
    assert_eq!(
        body(res).await["data"]["coupons"][0]["expiresAt"],
        "9999-12-31T23:59:00.999Z"
    );
    assert_eq!(
        app.get_ok("/api/v1/care-services-coupons", &s.token).await["data"][0]["expiresAt"],
        "9999-12-31T23:59:00.999Z"
    );
    assert_eq!(app.get_health().await, StatusCode::OK);
}
