//! Operator API, "Accounts and tokens".

use std::sync::Arc;

use partner_domain::kernel::clock::FixedClock;
use reqwest::{Method, StatusCode};
use serde_json::json;
use time::OffsetDateTime;

use crate::helpers::{TestApp, assert_error, body, partner_body};

#[tokio::test]
async fn the_operator_api_is_off_without_an_internal_token() {
    let app = TestApp::spawn_with(|c| c.internal_token = None).await;
    for (m, p) in [
        (Method::PUT, "/partners/acme"),
        (Method::GET, "/partners/acme"),
        (Method::POST, "/users"),
        (Method::GET, "/anything"),
    ] {
        let res = app
            .internal(m, p)
            .json(&partner_body(true))
            .send()
            .await
            .expect("send");
        assert_error(res, 404, "not_found").await;
    }
}

#[tokio::test]
async fn the_operator_api_needs_its_own_bearer() {
    let app = TestApp::spawn().await;
    let res = app
        .request(Method::GET, "/internal/v1/partners/acme")
        .send()
        .await
        .expect("send");
    assert_error(res, 401, "missing_bearer").await;
    let res = app
        .request(Method::GET, "/internal/v1/partners/acme")
        .bearer_auth("internal-test-tokeN")
        .send()
        .await
        .expect("send");
    assert_error(res, 401, "invalid_token").await;
    // A partner token is not an operator token.
    let s = app.seed("acme", false).await;
    let res = app
        .request(Method::GET, "/internal/v1/partners/acme")
        .bearer_auth(&s.token)
        .send()
        .await
        .expect("send");
    assert_error(res, 401, "invalid_token").await;
}

#[tokio::test]
async fn put_partner_creates_then_replaces() {
    let clock = Arc::new(FixedClock::new(OffsetDateTime::now_utc()));
    let app = TestApp::spawn_full(|_| {}, clock.clone()).await;
    let res = app.put_partner("acme", &partner_body(true)).await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let created = body(res).await["data"].clone();
    assert_eq!(created["partnerId"], "acme");
    assert_eq!(created["careServices"]["services"], json!(["primary-care"]));
    assert_eq!(created["createdAt"], created["updatedAt"]);

    let mut changed = partner_body(true);
    changed["name"] = json!("Acme Renamed");
    changed["defaultLang"] = json!("es");
    clock.advance(time::Duration::seconds(1));
    let res = app.put_partner("acme", &changed).await;
    assert_eq!(res.status(), StatusCode::OK);
    let replaced = body(res).await["data"].clone();
    assert_eq!(replaced["name"], "Acme Renamed");
    assert_eq!(replaced["defaultLang"], "es");
    assert_eq!(replaced["createdAt"], created["createdAt"]);
    assert_ne!(replaced["updatedAt"], created["updatedAt"]);

    let got = body(
        app.internal(Method::GET, "/partners/acme")
            .send()
            .await
            .expect("send"),
    )
    .await;
    assert_eq!(got["data"], replaced);
    assert_error(
        app.internal(Method::GET, "/partners/nobody")
            .send()
            .await
            .expect("send"),
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn put_partner_validation() {
    let app = TestApp::spawn().await;
    let cases: Vec<(&str, serde_json::Value)> = vec![
        ("defaultLang not enabled", {
            let mut b = partner_body(true);
            b["enabledLangs"] = json!(["es"]);
            b
        }),
        ("unknown language", {
            let mut b = partner_body(true);
            b["enabledLangs"] = json!(["en", "fr"]);
            b
        }),
        ("unknown service", {
            let mut b = partner_body(true);
            b["careServices"]["services"] = json!(["surgery"]);
            b
        }),
        ("bad email", {
            let mut b = partner_body(true);
            b["email"] = json!("nope");
            b
        }),
        ("empty name", {
            let mut b = partner_body(true);
            b["name"] = json!("  ");
            b
        }),
        ("missing field", {
            let mut b = partner_body(true);
            b.as_object_mut().map(|o| o.remove("active"));
            b
        }),
        ("unknown field", {
            let mut b = partner_body(true);
            b["colour"] = json!("red");
            b
        }),
        ("wrong type", {
            let mut b = partner_body(true);
            b["active"] = json!("yes");
            b
        }),
    ];
    for (what, b) in cases {
        let res = app.put_partner("acme", &b).await;
        assert_eq!(res.status(), 400, "{what}");
        assert_error(res, 400, "invalid_request").await;
    }
    for bad_id in ["a%20b", "a.b", &"x".repeat(65)] {
        assert_error(
            app.put_partner(bad_id, &partner_body(true)).await,
            400,
            "invalid_request",
        )
        .await;
    }
    assert_error(
        app.internal(Method::GET, "/partners/acme")
            .send()
            .await
            .expect("send"),
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn feature_flags_start_on_and_keep_missing_keys() {
    let app = TestApp::spawn().await;
    let all_on = json!({ "primary-care": true, "urgent-care": true, "mental-health": true, "dermatology": true, "veterinary-care": true });
    let got = body(
        app.internal(Method::GET, "/care-services/feature-flags")
            .send()
            .await
            .expect("send"),
    )
    .await;
    assert_eq!(got["data"], all_on);
    let res = app
        .internal(Method::PUT, "/care-services/feature-flags")
        .json(&json!({ "dermatology": false }))
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    let mut expected = all_on.clone();
    expected["dermatology"] = json!(false);
    assert_eq!(body(res).await["data"], expected);
    let res = app
        .internal(Method::PUT, "/care-services/feature-flags")
        .json(&json!({ "urgent-care": false }))
        .send()
        .await
        .expect("send");
    expected["urgent-care"] = json!(false);
    assert_eq!(body(res).await["data"], expected);
    for bad in [
        json!({ "surgery": true }),
        json!({ "dermatology": "no" }),
        json!([]),
    ] {
        let res = app
            .internal(Method::PUT, "/care-services/feature-flags")
            .json(&bad)
            .send()
            .await
            .expect("send");
        assert_error(res, 400, "invalid_request").await;
    }
}

#[tokio::test]
async fn users_are_created_for_known_partners_and_deleted_once() {
    let app = TestApp::spawn().await;
    let res = app
        .internal(Method::POST, "/users")
        .json(&json!({ "email": "a@b.co", "partnerId": "ghost", "admin": false }))
        .send()
        .await
        .expect("send");
    assert_error(res, 404, "not_found").await;
    app.put_partner("acme", &partner_body(true)).await;
    let res = app
        .internal(Method::POST, "/users")
        .json(&json!({ "email": "a@b.co", "partnerId": "acme", "admin": true }))
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::CREATED);
    let u = body(res).await["data"].clone();
    assert_eq!(
        (
            u["email"].clone(),
            u["partnerId"].clone(),
            u["admin"].clone()
        ),
        (json!("a@b.co"), json!("acme"), json!(true))
    );
    for bad in [
        json!({ "email": "nope", "partnerId": "acme", "admin": false }),
        json!({ "email": "a@b.co", "partnerId": "a b", "admin": false }),
        json!({ "email": "a@b.co", "partnerId": "acme" }),
    ] {
        let res = app
            .internal(Method::POST, "/users")
            .json(&bad)
            .send()
            .await
            .expect("send");
        assert_error(res, 400, "invalid_request").await;
    }
    let id = u["id"].as_str().expect("id");
    assert_eq!(
        app.internal(Method::DELETE, &format!("/users/{id}"))
            .send()
            .await
            .expect("send")
            .status(),
        StatusCode::OK
    );
    assert_error(
        app.internal(Method::DELETE, &format!("/users/{id}"))
            .send()
            .await
            .expect("send"),
        404,
        "not_found",
    )
    .await;
    assert_error(
        app.internal(Method::POST, &format!("/users/{id}/tokens"))
            .send()
            .await
            .expect("send"),
        404,
        "not_found",
    )
    .await;
    assert_error(
        app.internal(Method::GET, &format!("/users/{id}/tokens"))
            .send()
            .await
            .expect("send"),
        404,
        "not_found",
    )
    .await;
    assert_error(
        app.internal(Method::DELETE, "/users/not-a-uuid")
            .send()
            .await
            .expect("send"),
        400,
        "invalid_request",
    )
    .await;
}

#[tokio::test]
async fn token_management() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    // expiresAt must be a future RFC 3339 timestamp.
    for bad in [
        json!({ "expiresAt": "2000-01-01T00:00:00.000Z" }),
        json!({ "expiresAt": "tomorrow" }),
        json!({ "expiresAt": 5 }),
        json!({ "ttl": 5 }),
    ] {
        let res = app
            .internal(Method::POST, &format!("/users/{}/tokens", s.user_id))
            .json(&bad)
            .send()
            .await
            .expect("send");
        assert_error(res, 400, "invalid_request").await;
    }
    let res = app
        .internal(Method::POST, &format!("/users/{}/tokens", s.user_id))
        .json(&json!({ "expiresAt": null }))
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::CREATED);
    let second = body(res).await["data"].clone();
    let keys: std::collections::BTreeSet<String> =
        second.as_object().expect("obj").keys().cloned().collect();
    assert_eq!(
        keys.into_iter().collect::<Vec<_>>(),
        ["createdAt", "expiresAt", "id", "token", "tokenPrefix"]
    );
    let listed = body(
        app.internal(Method::GET, &format!("/users/{}/tokens", s.user_id))
            .send()
            .await
            .expect("send"),
    )
    .await;
    assert_eq!(listed["data"].as_array().map(Vec::len), Some(2));
    for t in listed["data"].as_array().expect("array") {
        let keys: std::collections::BTreeSet<String> =
            t.as_object().expect("obj").keys().cloned().collect();
        assert_eq!(
            keys.into_iter().collect::<Vec<_>>(),
            [
                "createdAt",
                "expiresAt",
                "id",
                "lastUsedAt",
                "revokedAt",
                "tokenPrefix"
            ]
        );
    }
    // Revocation is idempotent; unknown tokens are 404.
    let id = second["id"].as_str().expect("id");
    assert_eq!(
        app.internal(Method::DELETE, &format!("/tokens/{id}"))
            .send()
            .await
            .expect("send")
            .status(),
        StatusCode::OK
    );
    assert_eq!(
        app.internal(Method::DELETE, &format!("/tokens/{id}"))
            .send()
            .await
            .expect("send")
            .status(),
        StatusCode::OK
    );
    let ghost = uuid::Uuid::new_v4();
    assert_error(
        app.internal(Method::DELETE, &format!("/tokens/{ghost}"))
            .send()
            .await
            .expect("send"),
        404,
        "not_found",
    )
    .await;
    assert_error(
        app.internal(Method::POST, &format!("/tokens/{ghost}/rotate"))
            .send()
            .await
            .expect("send"),
        404,
        "not_found",
    )
    .await;
    let listed = body(
        app.internal(Method::GET, &format!("/users/{}/tokens", s.user_id))
            .send()
            .await
            .expect("send"),
    )
    .await;
    assert!(listed["data"][1]["revokedAt"].is_string());
    assert!(listed["data"][0]["revokedAt"].is_null());
}

/// A body missing several required fields is refused once, naming all of them (issue 28).
#[tokio::test]
async fn a_body_missing_fields_names_every_one() {
    let app = TestApp::spawn().await;
    let res = app
        .internal(Method::POST, "/leads")
        .json(&serde_json::json!({ "partnerId": "acme", "firstName": "Ann" }))
        .send()
        .await
        .expect("send");
    let message = assert_error(res, 400, "invalid_request").await;
    assert_eq!(
        message,
        "invalid JSON body: missing fields `lastName`, `email`, `emailConsent`, `smsConsent`, `origin`, `location`"
    );
    let res = app
        .internal(Method::POST, "/orders")
        .json(&serde_json::json!({ "orderId": "o-1", "partnerId": "acme" }))
        .send()
        .await
        .expect("send");
    let message = assert_error(res, 400, "invalid_request").await;
    assert!(message.contains("`isTest`"), "{message}");
    assert!(message.contains("`createdDate`"), "{message}");
}
