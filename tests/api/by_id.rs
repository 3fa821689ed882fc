//! One record by id (extensions §8.2): exactly the listing's object for the token, found exactly
//! when the listing (widest filters) would show it, in the token's own partner only; 400 for a
//! malformed id after authentication and the rate limit. The order of checks, tenancy and
//! revocation are checked for every read by `one_trip.rs`'s table.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{TestApp, assert_error, body, lead_body};
use crate::one_trip::populate;

/// The element of `listing`'s `data` whose `key` is `id`.
async fn listed(app: &TestApp, listing: &str, token: &str, key: &str, id: &str) -> Value {
    let page = app.get_ok(listing, token).await;
    page["data"]
        .as_array()
        .expect("data")
        .iter()
        .find(|r| r[key] == id)
        .cloned()
        .unwrap_or_else(|| panic!("{listing} lists {id}"))
}

#[tokio::test]
async fn each_record_is_the_listings_object_for_the_token() {
    let app = TestApp::spawn().await;
    let (acme, ids) = populate(&app, "acme", "acme").await;
    let admin = app.seed("acme", true).await;
    let test_lead = app
        .ingest_lead(&lead_body(
            "acme",
            json!({ "origin": "headless_intake", "isTest": true, "testSource": "simulation" }),
        ))
        .await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let cases = [
        ("/api/v1/leads?includeTest=true", "id", ids.lead.clone()),
        ("/api/v1/leads?includeTest=true", "id", test_lead),
        ("/api/v1/orders", "orderId", ids.order.clone()),
        ("/api/v1/orders", "orderId", ids.simulated.clone()),
        ("/api/v1/payouts", "recordId", ids.payout.clone()),
        ("/api/v1/sub-accounts", "id", ids.sub.clone()),
        ("/api/v1/care-services-coupons", "code", ids.coupon.clone()),
    ];
    for token in [&acme.token, &admin.token] {
        for (listing, key, id) in &cases {
            let base = listing.split('?').next().expect("path");
            let one = app.get_ok(&format!("{base}/{id}"), token).await;
            let expected = listed(&app, listing, token, key, id).await;
            assert_eq!(one, json!({ "data": expected }), "{base}/{id}");
        }
    }
    // The admin's order shows the admin fields, the other token's does not: each as its listing.
    let order = format!("/api/v1/orders/{}", ids.order);
    let admin_view = app.get_ok(&order, &admin.token).await;
    assert_eq!(admin_view["data"]["customerName"], "Ann Lee");
    let plain_view = app.get_ok(&order, &acme.token).await;
    assert!(plain_view["data"].get("customerName").is_none());
}

#[tokio::test]
async fn another_partners_record_is_404_for_admin_tokens_too() {
    let app = TestApp::spawn().await;
    let (_, zeta) = populate(&app, "zeta", "zeta").await;
    let acme = app.seed("acme", true).await;
    for p in [
        format!("/api/v1/leads/{}", zeta.lead),
        format!("/api/v1/orders/{}", zeta.order),
        format!("/api/v1/orders/{}", zeta.simulated),
        format!("/api/v1/payouts/{}", zeta.payout),
        format!("/api/v1/sub-accounts/{}", zeta.sub),
        format!("/api/v1/care-services-coupons/{}", zeta.coupon),
        format!("/api/v1/leads/{}", uuid::Uuid::new_v4()),
        "/api/v1/orders/no-such-order".to_owned(),
        "/api/v1/orders/TEST-SIM-no-such-run".to_owned(),
        format!("/api/v1/payouts/{}", uuid::Uuid::new_v4()),
        format!("/api/v1/sub-accounts/{}", uuid::Uuid::new_v4()),
        "/api/v1/care-services-coupons/AAAAAAAAAAAA".to_owned(),
    ] {
        let res = app
            .api(Method::GET, &p, &acme.token)
            .send()
            .await
            .expect("send");
        assert!(res.headers().contains_key("x-ratelimit-limit"), "{p}");
        assert_error(res, 404, "not_found").await;
    }
}

#[tokio::test]
async fn a_malformed_id_is_400_after_authentication_and_the_rate_limit() {
    let app = TestApp::spawn().await;
    let acme = app.seed("acme", false).await;
    for p in [
        "/api/v1/leads/not-a-uuid",
        "/api/v1/orders/has%20space",
        "/api/v1/orders/TEST-SIM-bad!run",
        "/api/v1/payouts/42",
        "/api/v1/sub-accounts/7",
        "/api/v1/care-services-coupons/short",
    ] {
        let res = app
            .api(Method::GET, p, &acme.token)
            .send()
            .await
            .expect("send");
        assert!(res.headers().contains_key("x-ratelimit-limit"), "{p}");
        assert_error(res, 400, "invalid_request").await;
        // An unknown token is 401 first, whatever the id.
        let unknown = format!("pk_live_{}", "a".repeat(43));
        let res = app
            .api(Method::GET, p, &unknown)
            .send()
            .await
            .expect("send");
        assert_error(res, 401, "invalid_token").await;
    }
}

#[tokio::test]
async fn a_coupon_code_is_matched_as_redemption_matches_it() {
    let app = TestApp::spawn().await;
    let (acme, ids) = populate(&app, "acme", "acme").await;
    let code = ids.coupon.as_str();
    let (a, b) = code.split_at(6);
    let typed = format!("%20{}-{}%20", a.to_ascii_lowercase(), b);
    let res = app
        .api(
            Method::GET,
            &format!("/api/v1/care-services-coupons/{typed}"),
            &acme.token,
        )
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(body(res).await["data"]["code"], code);
}

#[tokio::test]
async fn a_coupon_by_code_is_404_before_authentication_when_care_services_are_off() {
    let app = TestApp::spawn_with(|c| c.care_services_enabled = false).await;
    let res = app
        .request(Method::GET, "/api/v1/care-services-coupons/AAAAAAAAAAAA")
        .send()
        .await
        .expect("send");
    assert_error(res, 404, "not_found").await;
}

#[tokio::test]
async fn other_methods_on_a_record_path_authenticate_before_405() {
    let app = TestApp::spawn().await;
    let acme = app.seed("acme", false).await;
    let id = uuid::Uuid::new_v4();
    for p in [
        format!("/api/v1/leads/{id}"),
        "/api/v1/orders/x".to_owned(),
        format!("/api/v1/payouts/{id}"),
        format!("/api/v1/sub-accounts/{id}"),
        "/api/v1/care-services-coupons/AAAAAAAAAAAA".to_owned(),
    ] {
        let unknown = format!("pk_live_{}", "a".repeat(43));
        let res = app
            .api(Method::PUT, &p, &unknown)
            .send()
            .await
            .expect("send");
        assert_error(res, 401, "invalid_token").await;
        let res = app
            .api(Method::PUT, &p, &acme.token)
            .send()
            .await
            .expect("send");
        assert!(res.headers().contains_key("x-ratelimit-limit"), "PUT {p}");
        assert_error(res, 405, "invalid_request").await;
    }
}

/// An `orderId` may hold any printable ASCII: percent-encoded in the path, it is found.
#[tokio::test]
async fn an_order_id_with_reserved_characters_is_found_percent_encoded() {
    let app = TestApp::spawn().await;
    let acme = app.seed("acme", false).await;
    for id in ["a/b", "x%y", "q?r#s", "plus+sign"] {
        let res = app
            .internal(Method::POST, "/orders")
            .json(&json!({ "orderId": id, "partnerId": "acme", "createdDate": "2026-11-20T10:00:00.000Z",
                           "product": "p", "amount": 1.0, "commission": 0.5, "status": "shipped",
                           "isTest": false, "source": "pharmacy" }))
            .send()
            .await
            .expect("send");
        assert_eq!(res.status(), StatusCode::CREATED, "{id}");
        let encoded: String = id
            .bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect();
        let got = app
            .get_ok(&format!("/api/v1/orders/{encoded}"), &acme.token)
            .await;
        assert_eq!(got["data"]["orderId"], id);
    }
}
