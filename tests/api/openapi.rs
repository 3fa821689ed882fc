//! The OpenAPI documents (extensions.md §6): the committed files are what the code generates, and
//! the server serves them (the operator's behind its token).

use reqwest::{Method, StatusCode};

use crate::helpers::{INTERNAL_TOKEN, TestApp, assert_error};

const REGENERATE: &str =
    "cargo run -p partner-server -- openapi --out docs/openapi (or: just openapi)";

#[test]
fn committed_documents_equal_the_generated_ones() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi");
    for (name, generated) in partner_server::openapi::documents().expect("generate") {
        let path = dir.join(name);
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == generated,
            "{} differs from what the code generates; regenerate it with `{REGENERATE}` and commit it",
            path.display()
        );
    }
}

#[test]
fn documents_are_openapi_3_1_with_unique_operation_ids() {
    for (name, json) in partner_server::openapi::documents().expect("generate") {
        let doc: serde_json::Value = serde_json::from_str(&json).expect("JSON");
        assert_eq!(doc["openapi"], "3.1.0", "{name}");
        let mut ids = Vec::new();
        for item in doc["paths"].as_object().expect("paths").values() {
            for op in item.as_object().expect("path item").values() {
                ids.push(op["operationId"].as_str().expect("operationId").to_owned());
            }
        }
        let n = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), n, "{name}: duplicate operationId");
    }
}

#[tokio::test]
async fn the_partner_document_is_served_without_a_token() {
    let app = TestApp::spawn().await;
    let res = app
        .request(Method::GET, "/api/v1/openapi.json")
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(
        res.headers()["content-type"].to_str().expect("ascii"),
        "application/json"
    );
    let body = res.text().await.expect("body");
    let expected = partner_http::openapi::to_json(&partner_http::openapi::partner()).expect("json");
    assert_eq!(body, expected);
    let doc: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert!(doc["paths"]["/api/v1/leads"]["get"].is_object());
    assert!(doc["paths"]["/internal/v1/leads"].is_null());
}

#[tokio::test]
async fn the_operator_document_needs_the_operator_token() {
    let app = TestApp::spawn().await;
    let res = app
        .request(Method::GET, "/internal/v1/openapi.json")
        .send()
        .await
        .expect("send");
    assert_error(res, 401, "missing_bearer").await;
    let res = app
        .request(Method::GET, "/internal/v1/openapi.json")
        .bearer_auth("not-the-operator-token")
        .send()
        .await
        .expect("send");
    assert_error(res, 401, "invalid_token").await;
    let res = app
        .request(Method::GET, "/internal/v1/openapi.json")
        .bearer_auth(INTERNAL_TOKEN)
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    let doc: serde_json::Value = res.json().await.expect("JSON");
    assert_eq!(doc["openapi"], "3.1.0");
    assert!(doc["paths"]["/internal/v1/leads"]["post"].is_object());
}
