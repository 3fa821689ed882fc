//! The error body for actix's own failures, and the probes.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::helpers::{TestApp, assert_error};

#[tokio::test]
async fn unknown_routes_are_404_not_found() {
    let app = TestApp::spawn().await;
    for p in [
        "/",
        "/nope",
        "/api/v1/nope",
        "/api/v2/leads",
        "/api/v1/sub-accounts/7/extra",
        "/internal/v1/nope",
    ] {
        let res = app
            .request(Method::GET, p)
            .bearer_auth(crate::helpers::INTERNAL_TOKEN)
            .send()
            .await
            .expect("send");
        assert_error(res, 404, "not_found").await;
    }
}

#[tokio::test]
async fn wrong_methods_are_405_invalid_request() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    for m in [Method::PUT, Method::PATCH] {
        let res = app
            .api(m, "/api/v1/sub-accounts", &s.token)
            .send()
            .await
            .expect("send");
        assert_error(res, 405, "invalid_request").await;
    }
    let res = app
        .internal(Method::POST, "/partners/acme")
        .send()
        .await
        .expect("send");
    assert_error(res, 405, "invalid_request").await;
    let res = app
        .request(Method::POST, "/healthz")
        .send()
        .await
        .expect("send");
    assert_error(res, 405, "invalid_request").await;
}

#[tokio::test]
async fn oversized_and_malformed_bodies() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    let big = format!(
        "{{\"subId\":\"7\",\"nickname\":\"{}\"}}",
        "a".repeat(1 << 20)
    );
    let res = app
        .api(Method::POST, "/api/v1/sub-accounts", &s.token)
        .body(big)
        .send()
        .await
        .expect("send");
    assert_error(res, 413, "invalid_request").await;
    for raw in [
        "{",
        "{\"subId\":",
        "not json",
        "{\"subId\":\"7\",\"nickname\":\"x\"}}",
        "\u{feff}{}",
    ] {
        let res = app
            .api(Method::POST, "/api/v1/sub-accounts", &s.token)
            .body(raw)
            .send()
            .await
            .expect("send");
        assert_error(res, 400, "invalid_request").await;
    }
    assert_eq!(app.get_health().await, StatusCode::OK);
}

#[tokio::test]
async fn probes() {
    let app = TestApp::spawn().await;
    assert_eq!(app.get_health().await, StatusCode::OK);
    let res = app
        .request(Method::GET, "/readyz")
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    assert!(res.headers().get("x-request-id").is_some());
}

#[tokio::test]
async fn readyz_is_503_when_the_database_is_gone() {
    let app = TestApp::spawn().await;
    partner_server::drop_database(&app.config.database_url)
        .await
        .expect("drop");
    let res = app
        .request(Method::GET, "/readyz")
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(app.get_health().await, StatusCode::OK);
}

fn assert_no_store(res: &reqwest::Response, what: &str) {
    assert_eq!(
        res.headers()
            .get("cache-control")
            .and_then(|v| v.to_str().ok()),
        Some("no-store"),
        "{what}: {}",
        res.status()
    );
}

/// extensions.md §7: every answer of the partner and operator APIs, errors included, carries
/// `Cache-Control: no-store`.
#[tokio::test]
async fn authenticated_answers_carry_cache_control_no_store() {
    let app = TestApp::spawn_full(
        |c| {
            c.rate_limit = partner_http::Quota {
                limit: 3,
                window_secs: 3600,
            }
        },
        crate::helpers::mid_hour_clock(),
    )
    .await;
    let s = app.seed("acme", false).await;
    let idle = app.seed("idle", false).await;
    let res = app
        .put_partner("idle", &crate::helpers::partner_body(false))
        .await;
    assert_eq!(res.status(), StatusCode::OK);

    // Partner API.
    let cases = [
        (app.api(Method::GET, "/api/v1/sub-accounts", &s.token), 200),
        (app.request(Method::GET, "/api/v1/sub-accounts"), 401),
        (app.api(Method::GET, "/api/v1/leads", "pk_live_nope"), 401),
        (app.api(Method::GET, "/api/v1/nope", &s.token), 404),
        (app.api(Method::GET, "/api/v1/leads?limit=0", &s.token), 400),
        (app.api(Method::PUT, "/api/v1/leads", &s.token), 405),
        (app.api(Method::GET, "/api/v1/leads", &s.token), 200),
        (app.api(Method::GET, "/api/v1/leads", &s.token), 429),
        (app.api(Method::GET, "/api/v1/orders", &idle.token), 403),
    ];
    for (req, status) in cases {
        let res = req.send().await.expect("send");
        assert_eq!(res.status().as_u16(), status);
        assert_no_store(&res, "partner API");
    }
    let res = app
        .api(
            Method::GET,
            "/api/v1/care-services-coupons?format=csv",
            &s.token,
        )
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    assert_no_store(&res, "CSV export");

    // Operator API.
    let cases = [
        (app.internal(Method::GET, "/partners/acme"), 200),
        (app.request(Method::GET, "/internal/v1/partners/acme"), 401),
        (
            app.request(Method::GET, "/internal/v1/partners/acme")
                .bearer_auth("wrong"),
            401,
        ),
        (app.internal(Method::GET, "/partners/nobody"), 404),
        (app.internal(Method::GET, "/nope"), 404),
        (
            app.internal(Method::POST, "/payouts").body("{not json"),
            400,
        ),
    ];
    for (req, status) in cases {
        let res = req.send().await.expect("send");
        assert_eq!(res.status().as_u16(), status);
        assert_no_store(&res, "operator API");
    }

    // The public catalog keeps its own caching headers.
    let res = app
        .request(Method::GET, "/api/all-products?partner_id=acme")
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(
        res.headers()["cache-control"],
        "no-store, no-cache, must-revalidate, proxy-revalidate"
    );
    let res = app
        .request(Method::GET, "/api/all-products")
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        res.headers()["cache-control"],
        "no-store, no-cache, must-revalidate, proxy-revalidate"
    );
}

/// With the operator API switched off, its 404s still carry `no-store`.
#[tokio::test]
async fn disabled_operator_api_404_carries_no_store() {
    let app = TestApp::spawn_with(|c| c.internal_token = None).await;
    let res = app
        .request(Method::GET, "/internal/v1/partners/acme")
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    assert_no_store(&res, "operator API off");
}

/// A sub-account number is refused with the domain's one reason wherever it is sent (the
/// `subId` of a body, the `sub` of a query), each message naming the field the caller used.
#[tokio::test]
async fn a_bad_sub_account_number_has_one_reason_everywhere() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    let reason = "must be an integer from 1 to 250 without leading zeros";
    let res = app
        .api(Method::POST, "/api/v1/sub-accounts", &s.token)
        .json(&serde_json::json!({ "subId": "0", "nickname": "x" }))
        .send()
        .await
        .expect("send");
    let message = assert_error(res, 400, "invalid_request").await;
    assert_eq!(message, format!("subId is invalid: {reason}"));
    for path in [
        "/api/v1/medical-intake-links?sub=0",
        "/api/v1/care-service-links?sub=0",
    ] {
        let res = app
            .api(Method::GET, path, &s.token)
            .send()
            .await
            .expect("send");
        let message = assert_error(res, 400, "invalid_request").await;
        assert_eq!(message, format!("sub is invalid: {reason}"), "{path}");
    }
    let res = app
        .request(Method::GET, "/embed/care-services?partner_id=acme&sub=0")
        .send()
        .await
        .expect("send");
    let message = assert_error(res, 400, "invalid_request").await;
    assert_eq!(message, format!("sub is invalid: {reason}"));
}

/// extensions §11: while PostgreSQL cannot be reached, partner, operator and catalog calls
/// answer 503 `unavailable` with `Retry-After: 1` (never a 500, never a hang), and `/readyz` 503.
#[tokio::test]
async fn an_unreachable_database_is_503_unavailable_with_retry_after() {
    let down = TestApp::spawn().await;
    let s = down.seed("acme", false).await;
    // The database goes away under the running server: its pooled connections are closed and
    // no new one can be opened.
    partner_server::drop_database(&down.config.database_url)
        .await
        .expect("drop");
    let partner = down
        .api(Method::GET, "/api/v1/leads", &s.token)
        .send()
        .await
        .expect("send");
    let operator = down
        .internal(Method::POST, "/leads")
        .json(&crate::helpers::lead_body("acme", serde_json::json!({})))
        .send()
        .await
        .expect("send");
    let catalog = down
        .request(Method::GET, "/api/all-products?partner_id=acme")
        .send()
        .await
        .expect("send");
    for (what, res) in [
        ("partner", partner),
        ("operator", operator),
        ("catalog", catalog),
    ] {
        assert_eq!(
            res.headers().get("retry-after").map(|v| v.as_bytes()),
            Some(&b"1"[..]),
            "{what}"
        );
        assert_error(res, 503, "unavailable").await;
    }
    let res = down
        .request(Method::GET, "/readyz")
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
}

/// RFC 9110 §15.5.6: every 405 carries `Allow`, listing the methods the resource answers.
#[tokio::test]
async fn every_405_names_the_allowed_methods() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    let cases = [
        (
            Method::PUT,
            "/api/v1/sub-accounts",
            "GET, POST, DELETE",
            true,
        ),
        (Method::POST, "/api/v1/leads", "GET", true),
        (
            Method::GET,
            "/api/v1/webhook-endpoints/00000000-0000-4000-8000-000000000000",
            "PATCH, DELETE",
            true,
        ),
        (Method::DELETE, "/api/v1/dna-links", "GET", true),
        (Method::POST, "/partners/acme", "GET, PUT", false),
        (Method::POST, "/api/all-products", "GET", false),
        (Method::POST, "/api/weight-loss", "GET", false),
        (Method::POST, "/healthz", "GET", false),
    ];
    for (method, path, allow, partner) in cases {
        let req = if partner {
            app.api(method.clone(), path, &s.token)
        } else if let Some(rest) = path.strip_prefix("/partners") {
            app.internal(method.clone(), &format!("/partners{rest}"))
        } else {
            app.request(method.clone(), path)
        };
        let res = req.send().await.expect("send");
        assert_eq!(
            res.status(),
            StatusCode::METHOD_NOT_ALLOWED,
            "{method} {path}"
        );
        assert_eq!(
            res.headers().get("allow").and_then(|v| v.to_str().ok()),
            Some(allow),
            "{method} {path}"
        );
    }
}

/// The texts of a refused body value come from the domain's `parse_field`s (issue 20 item 3);
/// these are the texts the handlers typed before the move, word for word.
#[tokio::test]
async fn refused_body_values_answer_the_texts_they_always_did() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    let expect = async |res: reqwest::Response, text: &str| {
        assert_eq!(assert_error(res, 400, "invalid_request").await, text);
    };
    let partner = |k: &str, v: serde_json::Value| {
        let mut b = crate::helpers::partner_body(true);
        if k == "services" {
            b["careServices"]["services"] = v;
        } else {
            b[k] = v;
        }
        b
    };
    let care_list = "primary-care, urgent-care, mental-health, dermatology or veterinary-care";
    for (body, text) in [
        (
            partner("services", json!(["dentistry"])),
            format!("careServices.services entries must be {care_list}"),
        ),
        (
            partner("defaultLang", json!("fr")),
            "defaultLang entries must be en or es".to_owned(),
        ),
        (
            partner("enabledLangs", json!(["en", "fr"])),
            "enabledLangs entries must be en or es".to_owned(),
        ),
    ] {
        expect(app.put_partner("acme", &body).await, &text).await;
    }

    let medical = |categories: &[&str], file: &str, langs: &[&str]| {
        json!({
            "name": "Sema", "categories": categories, "details": "d",
            "imageUrl": "https://img.test/a.png", "imageFileId": file,
            "imageSourceUrl": "https://img.test/a.png", "active": true, "legacyPath": "/sema",
            "selfHostedSlug": null, "selfHostedLangs": langs, "suggestedPrices": "", "tiers": []
        })
    };
    let file = "00000000-0000-4000-8000-000000000001";
    let put =
        |path: &str, body: serde_json::Value| app.internal(Method::PUT, path).json(&body).send();
    let product = "/medical-products/00000000-0000-4000-8000-000000000002";
    for (body, text) in [
        (
            medical(&["dentistry"], file, &[]),
            "categories entries must be weight-loss, mens-health, womens-health, hair-loss or wellness",
        ),
        (
            medical(&["wellness"], "nope", &[]),
            "imageFileId must be a UUID",
        ),
        (
            medical(&["wellness"], file, &["fr"]),
            "selfHostedLangs entries must be en or es",
        ),
    ] {
        expect(put(product, body).await.expect("send"), text).await;
    }
    expect(
        put("/medical-products/nope", medical(&["wellness"], file, &[]))
            .await
            .expect("send"),
        "product id must be a UUID",
    )
    .await;
    expect(
        put(
            "/care-service-products/00000000-0000-4000-8000-000000000003",
            json!({ "service": "dentistry", "slug": "s", "productName": "p", "description": "d",
                    "imageUrl": "https://img.test/a.png", "tiers": [] }),
        )
        .await
        .expect("send"),
        &format!("service must be {care_list}"),
    )
    .await;
    expect(
        app.internal(Method::POST, &format!("/users/{}/tokens", s.user_id))
            .json(&json!({ "expiresAt": "tomorrow" }))
            .send()
            .await
            .expect("send"),
        "expiresAt must be an RFC 3339 timestamp",
    )
    .await;
    expect(
        app.api(Method::DELETE, "/api/v1/sub-accounts", &s.token)
            .json(&json!({}))
            .send()
            .await
            .expect("send"),
        "recordId is required",
    )
    .await;
    expect(
        app.internal(Method::POST, "/payouts")
            .json(
                &json!({ "partnerId": "acme", "payoutDate": "30/11/2026", "payoutAmount": 1,
                           "status": "paid" }),
            )
            .send()
            .await
            .expect("send"),
        "payoutDate must be YYYY-MM-DD",
    )
    .await;

    // Query parameters and request shapes the handlers used to word themselves.
    let get = |path: &str| app.api(Method::GET, path, &s.token).send();
    for (path, text) in [
        (
            "/api/v1/care-services-coupons?offset=-1",
            "offset must be an integer >= 0",
        ),
        (
            "/api/v1/care-services-coupons?format=xml",
            "format must be json or csv",
        ),
        (
            "/api/v1/care-service-links?duration=2",
            "duration must be 1, 3, 6 or 12",
        ),
        (
            "/api/v1/events?since=yesterday",
            "since must be an ISO 8601 timestamp",
        ),
        (
            "/api/v1/care-services-coupons/ABC",
            "code must be a coupon code (12 letters and digits)",
        ),
    ] {
        expect(get(path).await.expect("send"), text).await;
    }
    for (query, text) in [
        ("&m=2", "m must be 1, 3, 6 or 12"),
        ("&redeem=yes", "redeem must be true"),
        (
            "&service=dentistry",
            "service must be one of the five service keys",
        ),
    ] {
        let path = format!("/embed/care-services?partner_id=acme{query}");
        let res = app.request(Method::GET, &path).send().await.expect("send");
        expect(res, text).await;
    }
    let recover = "/api/v1/webhook-endpoints/00000000-0000-4000-8000-000000000004/recover";
    expect(
        app.api(Method::POST, recover, &s.token)
            .json(&json!({ "since": "yesterday" }))
            .send()
            .await
            .expect("send"),
        "since must be an ISO 8601 timestamp",
    )
    .await;
    let summary = "/partners/acme/commission-summary";
    for (query, text) in [
        ("?to=2026-01-01", "from is required, as YYYY-MM-DD"),
        (
            "?from=2026-01-01&to=1/1/2026",
            "to is required, as YYYY-MM-DD",
        ),
        (
            "?from=2026-02-01&to=2026-01-01",
            "from must not be after to",
        ),
    ] {
        let res = app
            .internal(Method::GET, &format!("{summary}{query}"))
            .send();
        expect(res.await.expect("send"), text).await;
    }
    let internal = |method: Method, path: &str, body: serde_json::Value| {
        app.internal(method, path).json(&body).send()
    };
    expect(
        internal(
            Method::PATCH,
            "/leads/00000000-0000-4000-8000-000000000005",
            json!({}),
        )
        .await
        .expect("send"),
        "name at least one of phone, smsConsent, email, emailConsent, firstName, lastName",
    )
    .await;
    expect(
        internal(
            Method::PUT,
            "/care-services/feature-flags",
            json!({ "dentistry": true }),
        )
        .await
        .expect("send"),
        "feature flag keys must be Care Services service names",
    )
    .await;
    let bulk = |quantity: i64, unit_price_cents: i64| {
        json!({ "partnerId": "acme", "productSlug": "sema", "months": 1, "quantity": quantity,
                "unitPriceCents": unit_price_cents, "purchaserEmail": "buyer@example.com",
                "purchaserSource": "test" })
    };
    for (body, text) in [
        (bulk(0, 100), "quantity must be an integer from 1 to 10000"),
        (
            bulk(10_001, 100),
            "quantity must be an integer from 1 to 10000",
        ),
        (bulk(1, -1), "unitPriceCents must be an integer >= 0"),
    ] {
        let res = internal(Method::POST, "/care-services-coupons/bulk-orders", body);
        expect(res.await.expect("send"), text).await;
    }
}
