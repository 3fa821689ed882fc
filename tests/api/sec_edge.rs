//! Security review (issue 23), the edge of the service: custom header names (S-08). Each test
//! is named after its finding.

use reqwest::Method;
use serde_json::json;

use crate::helpers::{TestApp, assert_error};

const ENDPOINTS: &str = "/api/v1/webhook-endpoints";

/// Names a delivery sets itself, hop-by-hop names, credentials and proxy headers, in the
/// spellings a receiver mapping headers to CGI names would merge with the real ones.
const RESERVED_NAMES: [&str; 22] = [
    "X_Partner_Signature",
    "x_partner_event",
    "webhook-signature",
    "Webhook-Id",
    "WEBHOOK_TIMESTAMP",
    "Connection",
    "Keep-Alive",
    "Proxy-Connection",
    "TE",
    "Trailer",
    "Upgrade",
    "Expect",
    "Content-Encoding",
    "Content_Type",
    "Proxy-Authorization",
    "Cookie",
    "Forwarded",
    "X-Forwarded-For",
    "x_forwarded_proto",
    "X-Forwarded-Host",
    "X-Real-IP",
    "x_real_ip",
];

#[tokio::test]
async fn s08_reserved_custom_header_names_are_refused_on_create_and_patch() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    let created = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": "https://hooks.example.com", "events": ["lead.created"],
                     "customHeader": { "name": "X_Api_Key", "value": "k" } }),
        )
        .await;
    let id = created["id"].as_str().expect("id").to_owned();
    for name in RESERVED_NAMES {
        let header = json!({ "name": name, "value": "x" });
        // Partner API: create and patch.
        let res = app
            .api(Method::POST, ENDPOINTS, &s.token)
            .json(
                &json!({ "url": "https://hooks.example.com", "events": ["lead.created"],
                           "customHeader": header }),
            )
            .send()
            .await
            .expect("send");
        assert_error(res, 400, "invalid_request").await;
        let res = app
            .api(Method::PATCH, &format!("{ENDPOINTS}/{id}"), &s.token)
            .json(&json!({ "customHeader": header }))
            .send()
            .await
            .expect("send");
        assert_error(res, 400, "invalid_request").await;
        // Operator API: create and patch.
        let res = app
            .internal(Method::POST, "/partners/acme/webhook-endpoints")
            .json(
                &json!({ "url": "https://hooks.example.com", "events": ["lead.created"],
                           "customHeader": header }),
            )
            .send()
            .await
            .expect("send");
        assert_error(res, 400, "invalid_request").await;
        let res = app
            .internal(
                Method::PATCH,
                &format!("/partners/acme/webhook-endpoints/{id}"),
            )
            .json(&json!({ "customHeader": header }))
            .send()
            .await
            .expect("send");
        assert_error(res, 400, "invalid_request").await;
    }
    // The endpoint kept its header; nothing reserved was stored.
    let list = app.get_ok(ENDPOINTS, &s.token).await;
    let rows = list["data"].as_array().expect("rows");
    assert_eq!(rows.len(), 1, "{list}");
    assert_eq!(rows[0]["customHeader"]["name"], "X_Api_Key");
}
