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

/// Paths the service mounts that no document describes, each for a reason.
const UNDOCUMENTED: &[(&str, &str)] = &[
    (
        "/healthz",
        "a liveness probe for the orchestrator (operator guide)",
    ),
    (
        "/readyz",
        "a readiness probe for the orchestrator (operator guide)",
    ),
];

/// A mounted path as its document names it: the catalog mounts one path per category, documented
/// once as `/api/{category}`.
fn documented_as(path: &str) -> String {
    let catalog = partner_domain::catalog::Category::ALL
        .iter()
        .map(|c| c.as_str())
        .chain(["all-products"]);
    for c in catalog {
        if path == format!("/api/{c}") {
            return "/api/{category}".to_owned();
        }
    }
    path.to_owned()
}

/// The route table and the documents describe the same operations: every method the server
/// mounts on a path is in a document, and every documented operation is mounted. The methods are
/// found by asking the running server (authenticated, so a 405 is a 405 and not a 401 first).
#[tokio::test]
async fn every_mounted_operation_is_documented_and_every_documented_one_mounted() {
    let app = TestApp::spawn_with(|c| {
        c.rate_limit = partner_http::Quota {
            limit: 10_000,
            window_secs: 3600,
        }
    })
    .await;
    let partner = app.seed("acme", true).await;
    let mut documented = std::collections::BTreeSet::new();
    for (_, json) in partner_server::openapi::documents().expect("generate") {
        let doc: serde_json::Value = serde_json::from_str(&json).expect("JSON");
        for (path, item) in doc["paths"].as_object().expect("paths") {
            for method in item.as_object().expect("path item").keys() {
                documented.insert((method.to_uppercase(), path.clone()));
            }
        }
    }
    let mut mounted = std::collections::BTreeSet::new();
    let paths = partner_http::openapi::mounted_paths();
    assert!(paths.len() > 40, "the route table is recorded: {paths:?}");
    for path in paths {
        if UNDOCUMENTED.iter().any(|(p, _)| *p == path) {
            continue;
        }
        let concrete = path
            .replace("{partner_id}", "acme")
            .replace("{product_id}", "p-1")
            .replace("{id}", "00000000-0000-4000-8000-000000000000");
        for method in ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] {
            let m = Method::from_bytes(method.as_bytes()).expect("method");
            let req = if let Some(rest) = concrete.strip_prefix("/internal/v1") {
                app.internal(m, rest)
            } else {
                app.api(m, &concrete, &partner.token)
            };
            let res = req
                .header("content-type", "application/json")
                .body("{}")
                .send()
                .await
                .expect("send");
            let status = res.status();
            let body = res.text().await.unwrap_or_default();
            assert_ne!(status, StatusCode::TOO_MANY_REQUESTS, "{method} {path}");
            let unrouted = status == StatusCode::NOT_FOUND && body.contains("no such resource");
            if status != StatusCode::METHOD_NOT_ALLOWED && !unrouted {
                mounted.insert((method.to_owned(), documented_as(&path)));
            }
        }
    }
    let undocumented: Vec<_> = mounted.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "mounted but not in an OpenAPI document (add a #[utoipa::path] and list it in routes/openapi.rs): {undocumented:?}"
    );
    let unmounted: Vec<_> = documented.difference(&mounted).collect();
    assert!(
        unmounted.is_empty(),
        "documented but not mounted (routes/mod.rs): {unmounted:?}"
    );
}
