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
