//! `GET/POST/DELETE /api/v1/sub-accounts` and the sub-account rules of the rulings.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{Seeded, TestApp, assert_error, body};

const SUBS: &str = "/api/v1/sub-accounts";

async fn create(app: &TestApp, s: &Seeded, body_: Value) -> reqwest::Response {
    app.api(Method::POST, SUBS, &s.token)
        .json(&body_)
        .send()
        .await
        .expect("send")
}

async fn list(app: &TestApp, s: &Seeded) -> Vec<Value> {
    let res = app
        .api(Method::GET, SUBS, &s.token)
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    body(res).await["data"].as_array().expect("array").clone()
}

#[tokio::test]
async fn create_returns_201_with_the_portal_sub_account_shape() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    let res = create(&app, &s, json!({ "subId": "7", "nickname": "  Ann Lee  " })).await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let b = body(res).await;
    let d = &b["data"];
    let keys: Vec<&str> = d
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    let mut keys = keys;
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["createdAt", "email", "id", "nickname", "subId", "updatedAt"]
    );
    assert_eq!(d["subId"], "7");
    assert_eq!(d["nickname"], "Ann Lee");
    assert_eq!(d["email"], "ops@acme.test");
    assert!(uuid::Uuid::parse_str(d["id"].as_str().expect("id")).is_ok());
    let created = d["createdAt"].as_str().expect("ts");
    assert_eq!(created.len(), 24, "YYYY-MM-DDTHH:MM:SS.mmmZ: {created}");
    assert!(created.ends_with('Z'));
    assert_eq!(list(&app, &s).await, vec![d.clone()]);
}

#[tokio::test]
async fn list_is_ordered_by_sub_id_and_scoped_to_the_partner() {
    let app = TestApp::spawn().await;
    let a = app.seed("acme", false).await;
    let b = app.seed("beta", false).await;
    for id in ["30", "4", "250", "1"] {
        assert_eq!(
            create(
                &app,
                &a,
                json!({ "subId": id, "nickname": format!("n{id}") })
            )
            .await
            .status(),
            201
        );
    }
    // The same subId may exist under another partner.
    assert_eq!(
        create(&app, &b, json!({ "subId": "4", "nickname": "other" }))
            .await
            .status(),
        201
    );
    let ids: Vec<Value> = list(&app, &a)
        .await
        .iter()
        .map(|s| s["subId"].clone())
        .collect();
    assert_eq!(ids, vec![json!("1"), json!("4"), json!("30"), json!("250")]);
    let theirs = list(&app, &b).await;
    assert_eq!(theirs.len(), 1);
    assert_eq!(theirs[0]["nickname"], "other");
}

#[tokio::test]
async fn duplicate_sub_id_is_409_invalid_request() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    assert_eq!(
        create(&app, &s, json!({ "subId": "7", "nickname": "Ann" }))
            .await
            .status(),
        201
    );
    assert_error(
        create(&app, &s, json!({ "subId": "7", "nickname": "Bob" })).await,
        409,
        "invalid_request",
    )
    .await;
    assert_eq!(list(&app, &s).await.len(), 1);
}

#[tokio::test]
async fn invalid_sub_ids_and_nicknames_are_400_and_nothing_is_written() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    let long = "x".repeat(65);
    let bodies = [
        json!({ "nickname": "Ann" }),
        json!({ "subId": "7" }),
        json!({ "subId": null, "nickname": "Ann" }),
        json!({ "subId": "", "nickname": "Ann" }),
        json!({ "subId": "0", "nickname": "Ann" }),
        json!({ "subId": "251", "nickname": "Ann" }),
        json!({ "subId": "07", "nickname": "Ann" }),
        json!({ "subId": "-1", "nickname": "Ann" }),
        json!({ "subId": "1.5", "nickname": "Ann" }),
        json!({ "subId": "abc", "nickname": "Ann" }),
        json!({ "subId": " 7", "nickname": "Ann" }),
        json!({ "subId": 7, "nickname": "Ann" }),
        json!({ "subId": "7", "nickname": "" }),
        json!({ "subId": "7", "nickname": "    " }),
        json!({ "subId": "7", "nickname": long }),
        json!({ "subId": "7", "nickname": "a\nb" }),
        json!({ "subId": "7", "nickname": "a\u{0}b" }),
        json!({ "subId": "7", "nickname": 5 }),
        json!({ "subId": "7", "nickname": "Ann", "extra": true }),
        json!(["7", "Ann"]),
        json!("7"),
    ];
    for b in bodies {
        let msg = assert_error(create(&app, &s, b.clone()).await, 400, "invalid_request").await;
        assert!(msg.len() < 400, "short message for {b}");
    }
    assert!(list(&app, &s).await.is_empty());
    // Boundary values are accepted; the nickname counts characters, not bytes.
    assert_eq!(
        create(
            &app,
            &s,
            json!({ "subId": "1", "nickname": "é".repeat(64) })
        )
        .await
        .status(),
        201
    );
    assert_eq!(
        create(&app, &s, json!({ "subId": "250", "nickname": "Zoë" }))
            .await
            .status(),
        201
    );
}

#[tokio::test]
async fn delete_removes_own_records_and_hides_other_tenants() {
    let app = TestApp::spawn().await;
    let a = app.seed("acme", false).await;
    let b = app.seed("beta", false).await;
    let mine = body(create(&app, &a, json!({ "subId": "7", "nickname": "Ann" })).await).await["data"]["id"].clone();
    let theirs = body(create(&app, &b, json!({ "subId": "7", "nickname": "Bob" })).await).await["data"]["id"].clone();

    // Another partner's record: 404, and it survives.
    let res = app
        .api(Method::DELETE, SUBS, &a.token)
        .json(&json!({ "recordId": theirs }))
        .send()
        .await
        .expect("send");
    assert_error(res, 404, "not_found").await;
    assert_eq!(list(&app, &b).await.len(), 1);

    let res = app
        .api(Method::DELETE, SUBS, &a.token)
        .json(&json!({ "recordId": mine }))
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(body(res).await, json!({ "data": { "ok": true } }));
    assert!(list(&app, &a).await.is_empty());

    // Gone: 404. A subId freed by deletion can be reused.
    let res = app
        .api(Method::DELETE, SUBS, &a.token)
        .json(&json!({ "recordId": mine }))
        .send()
        .await
        .expect("send");
    assert_error(res, 404, "not_found").await;
    assert_eq!(
        create(&app, &a, json!({ "subId": "7", "nickname": "Ann again" }))
            .await
            .status(),
        201
    );
}

#[tokio::test]
async fn delete_with_missing_or_invalid_record_id_is_400() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    for b in [
        json!({}),
        json!({ "recordId": "" }),
        json!({ "recordId": "not-a-uuid" }),
        json!({ "recordId": 12 }),
        json!({ "recordId": null }),
    ] {
        let res = app
            .api(Method::DELETE, SUBS, &s.token)
            .json(&b)
            .send()
            .await
            .expect("send");
        assert_error(res, 400, "invalid_request").await;
    }
    let res = app
        .api(Method::DELETE, SUBS, &s.token)
        .send()
        .await
        .expect("send");
    assert_error(res, 400, "invalid_request").await;
}

#[tokio::test]
async fn every_sub_account_operation_requires_a_bearer() {
    let app = TestApp::spawn().await;
    for m in [Method::GET, Method::POST, Method::DELETE] {
        let res = app
            .request(m, SUBS)
            .json(&json!({ "subId": "7", "nickname": "x" }))
            .send()
            .await
            .expect("send");
        assert_error(res, 401, "missing_bearer").await;
    }
}
