//! `GET /api/v1/embed` (issue 28): the embedded Care Services view's address and origin.

use reqwest::{Method, StatusCode};

use crate::helpers::{TestApp, assert_error, body};

#[tokio::test]
async fn the_embed_answer_is_the_views_address_under_the_catalog_url_and_it_opens() {
    let app = TestApp::spawn_with(|c| {
        c.catalog_url = url::Url::parse("http://catalog.test:8080/").expect("url");
    })
    .await;
    let s = app.seed("acme", false).await;
    let res = app
        .api(Method::GET, "/api/v1/embed", &s.token)
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    assert!(
        res.headers().contains_key("x-ratelimit-limit"),
        "the links group"
    );
    let b = body(res).await;
    assert_eq!(
        b["data"]["url"],
        "http://catalog.test:8080/embed/care-services?partner_id=acme"
    );
    assert_eq!(
        b["data"]["origin"], "http://catalog.test:8080",
        "with the port"
    );

    // The address is the view: served by this deployment, for this partner.
    let path = b["data"]["url"]
        .as_str()
        .and_then(|u| u.strip_prefix("http://catalog.test:8080"))
        .expect("path");
    let res = app.request(Method::GET, path).send().await.expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    assert!(
        res.headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/html"))
    );

    // No token: 401, as every partner read.
    assert_error(
        app.request(Method::GET, "/api/v1/embed")
            .send()
            .await
            .expect("send"),
        401,
        "missing_bearer",
    )
    .await;
}

#[tokio::test]
async fn the_embed_answer_is_404_when_care_services_are_disabled() {
    let app = TestApp::spawn_with(|c| c.care_services_enabled = false).await;
    let s = app.seed("acme", false).await;
    assert_error(
        app.api(Method::GET, "/api/v1/embed", &s.token)
            .send()
            .await
            .expect("send"),
        404,
        "not_found",
    )
    .await;
}
