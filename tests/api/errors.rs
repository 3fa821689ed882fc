//! The error body for actix's own failures, and the probes.

use reqwest::{Method, StatusCode};

use crate::helpers::{TestApp, assert_error};

#[tokio::test]
async fn unknown_routes_are_404_not_found() {
    let app = TestApp::spawn().await;
    for p in [
        "/",
        "/nope",
        "/api/v1/nope",
        "/api/v2/leads",
        "/api/v1/sub-accounts/extra",
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
