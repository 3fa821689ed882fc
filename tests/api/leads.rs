//! `GET /api/v1/leads` and lead ingest.

use std::collections::HashSet;
use std::sync::Arc;

use partner_domain::kernel::clock::FixedClock;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::helpers::{TestApp, assert_error, body, lead_body};

fn ids(page: &Value) -> Vec<String> {
    page["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|r| r["id"].as_str().expect("id").to_owned())
        .collect()
}

#[tokio::test]
async fn a_pagination_walk_is_stable_while_rows_are_inserted() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    let mut original = Vec::new();
    for i in 0..120 {
        original.push(
            app.ingest_lead(&lead_body("acme", json!({ "firstName": format!("L{i}") })))
                .await,
        );
    }
    // Newest first: (createdAt desc, id desc).
    original.sort_by(|a, b| {
        (b["createdAt"].as_str(), b["id"].as_str())
            .cmp(&(a["createdAt"].as_str(), a["id"].as_str()))
    });
    let expected: Vec<String> = original
        .iter()
        .map(|r| r["id"].as_str().expect("id").to_owned())
        .collect();

    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &cursor {
            None => "/api/v1/leads?limit=25".to_owned(),
            Some(c) => format!("/api/v1/leads?limit=25&cursor={c}"),
        };
        let page = app.get_ok(&path, &s.token).await;
        assert_eq!(page["page"]["limit"], 25);
        seen.extend(ids(&page));
        pages += 1;
        // New leads arrive between page fetches; they are newer than every cursor.
        app.ingest_lead(&lead_body(
            "acme",
            json!({ "firstName": format!("late{pages}") }),
        ))
        .await;
        match page["page"]["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
        assert!(pages < 10, "runaway pagination");
    }
    assert_eq!(pages, 5);
    assert_eq!(seen, expected, "every original lead once, in order");
    let unique: HashSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "no duplicates");
}

#[tokio::test]
async fn next_cursor_is_null_on_the_last_page_and_an_empty_account_is_one_empty_page() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    let page = app.get_ok("/api/v1/leads", &s.token).await;
    assert_eq!(
        page,
        json!({ "data": [], "page": { "nextCursor": null, "limit": 50 } })
    );
    for _ in 0..3 {
        app.ingest_lead(&lead_body("acme", json!({}))).await;
    }
    let page = app.get_ok("/api/v1/leads?limit=3", &s.token).await;
    assert_eq!(ids(&page).len(), 3);
    assert_eq!(
        page["page"]["nextCursor"],
        Value::Null,
        "exactly full last page"
    );
    let page = app.get_ok("/api/v1/leads?limit=2", &s.token).await;
    assert!(page["page"]["nextCursor"].is_string());
}

#[tokio::test]
async fn limit_matrix() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    for (q, limit) in [
        ("", 50),
        ("?limit=1", 1),
        ("?limit=200", 200),
        ("?limit=50", 50),
    ] {
        let page = app.get_ok(&format!("/api/v1/leads{q}"), &s.token).await;
        assert_eq!(page["page"]["limit"], limit, "{q}");
    }
    for bad in ["0", "201", "abc", "1.5", "", "-1", "+5", "1e2", "%20"] {
        let res = app
            .api(Method::GET, &format!("/api/v1/leads?limit={bad}"), &s.token)
            .send()
            .await
            .expect("send");
        assert_error(res, 400, "invalid_request").await;
    }
}

#[tokio::test]
async fn include_test_matrix() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    let real = app.ingest_lead(&lead_body("acme", json!({}))).await;
    let headless_real = app
        .ingest_lead(&lead_body(
            "acme",
            json!({ "origin": "headless_intake", "location": "Weight Loss" }),
        ))
        .await;
    let sim = app
        .ingest_lead(&lead_body(
            "acme",
            json!({ "origin": "headless_intake", "isTest": true, "testSource": "simulation" }),
        ))
        .await;
    let prov = app
        .ingest_lead(&lead_body("acme", json!({ "origin": "headless_intake", "isTest": true, "testSource": "provider_test_mode" })))
        .await;
    assert_eq!(
        (sim["isTest"].clone(), sim["testSource"].clone()),
        (json!(true), json!("simulation"))
    );
    assert_eq!(
        (real["isTest"].clone(), real["testSource"].clone()),
        (json!(false), Value::Null)
    );
    // A test row is otherwise unaltered.
    assert_eq!(sim["origin"], "headless_intake");
    assert_eq!(sim["firstName"], "Ann");

    let real_only: HashSet<String> = [&real, &headless_real]
        .iter()
        .map(|r| r["id"].as_str().expect("id").to_owned())
        .collect();
    let all: HashSet<String> = [&real, &headless_real, &sim, &prov]
        .iter()
        .map(|r| r["id"].as_str().expect("id").to_owned())
        .collect();
    for (q, want) in [
        ("", &real_only),
        ("?includeTest=true", &all),
        ("?includeTest=false", &real_only),
        ("?includeTest=TRUE", &real_only),
        ("?includeTest=1", &real_only),
        ("?includeTest=yes", &real_only),
        ("?includeTest=", &real_only),
        ("?includeTest", &real_only),
    ] {
        let page = app.get_ok(&format!("/api/v1/leads{q}"), &s.token).await;
        let got: HashSet<String> = ids(&page).into_iter().collect();
        assert_eq!(&got, want, "{q}");
        for row in page["data"].as_array().expect("rows") {
            assert!(
                row.get("isTest").is_some() && row.get("testSource").is_some(),
                "flags always present"
            );
        }
    }
}

#[tokio::test]
async fn test_flag_ingest_rules() {
    let app = TestApp::spawn().await;
    app.seed("acme", false).await;
    for (what, extra) in [
        (
            "test on a webhook origin",
            json!({ "isTest": true, "testSource": "simulation" }),
        ),
        (
            "test without source",
            json!({ "origin": "headless_intake", "isTest": true }),
        ),
        (
            "source without test",
            json!({ "origin": "headless_intake", "testSource": "simulation" }),
        ),
        (
            "source with isTest false",
            json!({ "origin": "headless_intake", "isTest": false, "testSource": "simulation" }),
        ),
        (
            "unknown source",
            json!({ "origin": "headless_intake", "isTest": true, "testSource": "demo" }),
        ),
    ] {
        let res = app
            .internal(Method::POST, "/leads")
            .json(&lead_body("acme", extra))
            .send()
            .await
            .expect("send");
        assert_eq!(res.status(), StatusCode::BAD_REQUEST, "{what}");
        assert_error(res, 400, "invalid_request").await;
    }
}

#[tokio::test]
async fn tampered_or_foreign_cursors_are_400() {
    let app = TestApp::spawn().await;
    let a = app.seed("acme", false).await;
    let b = app.seed("beta", false).await;
    for p in ["acme", "beta"] {
        for _ in 0..3 {
            app.ingest_lead(&lead_body(p, json!({}))).await;
        }
    }
    let page = app.get_ok("/api/v1/leads?limit=1", &a.token).await;
    let cursor = page["page"]["nextCursor"]
        .as_str()
        .expect("cursor")
        .to_owned();
    // Works for its owner.
    assert_eq!(
        ids(&app
            .get_ok(&format!("/api/v1/leads?limit=1&cursor={cursor}"), &a.token)
            .await)
        .len(),
        1
    );
    let mut flipped = cursor.clone().into_bytes();
    let last = flipped.len() - 1;
    flipped[last] = if flipped[last] == b'0' { b'1' } else { b'0' };
    let flipped = String::from_utf8(flipped).expect("ascii");
    for bad in [
        flipped.as_str(),
        "garbage",
        "c1",
        &cursor[..cursor.len() - 2],
        "%00",
        &"f".repeat(5000),
    ] {
        let res = app
            .api(
                Method::GET,
                &format!("/api/v1/leads?cursor={bad}"),
                &a.token,
            )
            .send()
            .await
            .expect("send");
        assert_error(res, 400, "invalid_request").await;
    }
    // Another tenant's cursor is rejected, not silently reinterpreted.
    let res = app
        .api(
            Method::GET,
            &format!("/api/v1/leads?cursor={cursor}"),
            &b.token,
        )
        .send()
        .await
        .expect("send");
    assert_error(res, 400, "invalid_request").await;
}

#[tokio::test]
async fn consent_is_rendered_as_no_consent() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    app.ingest_lead(&lead_body(
        "acme",
        json!({ "emailConsent": false, "smsConsent": false }),
    ))
    .await;
    let row = &app.get_ok("/api/v1/leads", &s.token).await["data"][0];
    assert_eq!(
        (row["email"].clone(), row["phone"].clone()),
        (json!("No Consent"), json!("No Consent"))
    );
    let row = app
        .ingest_lead(&lead_body(
            "acme",
            json!({ "emailConsent": true, "smsConsent": false }),
        ))
        .await;
    assert_eq!(
        (row["email"].clone(), row["phone"].clone()),
        (json!("ann@example.com"), json!("No Consent"))
    );
}

#[tokio::test]
async fn the_lead_row_shape() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    app.ingest_lead(&lead_body("acme", json!({ "questionId": "q-17" })))
        .await;
    let row = app.get_ok("/api/v1/leads", &s.token).await["data"][0].clone();
    let mut keys: Vec<&String> = row.as_object().expect("obj").keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "createdAt",
            "email",
            "firstName",
            "id",
            "isTest",
            "lastName",
            "location",
            "origin",
            "partnerId",
            "phone",
            "questionId",
            "subId",
            "testSource",
            "updatedAt"
        ]
    );
    assert_eq!(row["partnerId"], "acme");
    assert_eq!(row["subId"], "");
    assert_eq!(row["questionId"], "q-17");
    assert_eq!(row["createdAt"].as_str().map(str::len), Some(24));
}

/// Lead ids are time-ordered (UUIDv7, docs/decisions.md "Time-ordered lead ids"): still UUIDs as
/// the contract says, and carrying the lead's `createdAt` to the millisecond, so new leads land at
/// the right edge of the primary key of a table of millions.
#[tokio::test]
async fn lead_ids_are_uuid_v7_of_their_creation_instant() {
    let app = TestApp::spawn().await;
    app.seed("acme", false).await;
    let lead = app.ingest_lead(&lead_body("acme", json!({}))).await;
    let id = uuid::Uuid::parse_str(lead["id"].as_str().expect("id")).expect("a UUID");
    assert_eq!(id.get_version_num(), 7, "{id}");
    assert_eq!(id.get_variant(), uuid::Variant::RFC4122);
    let (secs, nanos) = id.get_timestamp().expect("a v7 timestamp").to_unix();
    let created = OffsetDateTime::parse(
        lead["createdAt"].as_str().expect("createdAt"),
        &time::format_description::well_known::Rfc3339,
    )
    .expect("an instant");
    assert_eq!(
        i128::from(secs) * 1000 + i128::from(nanos / 1_000_000),
        created.unix_timestamp_nanos() / 1_000_000
    );
}

#[tokio::test]
async fn an_attribution_code_resolves_to_partner_and_sub_account() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    let row = app.ingest_lead(&lead_body("acme.7", json!({}))).await;
    assert_eq!(
        (row["partnerId"].clone(), row["subId"].clone()),
        (json!("acme"), json!("7"))
    );
    let listed = &app.get_ok("/api/v1/leads", &s.token).await["data"][0];
    assert_eq!(
        (listed["partnerId"].clone(), listed["subId"].clone()),
        (json!("acme"), json!("7"))
    );
    // An explicit subId must agree with the code.
    let row = app
        .ingest_lead(&lead_body("acme", json!({ "subId": "9" })))
        .await;
    assert_eq!(row["subId"], "9");
    let res = app
        .internal(Method::POST, "/leads")
        .json(&lead_body("acme.7", json!({ "subId": "8" })))
        .send()
        .await
        .expect("send");
    assert_error(res, 400, "invalid_request").await;
    for bad in ["acme.0", "acme.251", "acme.", "ghost.7"] {
        let res = app
            .internal(Method::POST, "/leads")
            .json(&lead_body(bad, json!({})))
            .send()
            .await
            .expect("send");
        assert!(res.status().is_client_error(), "{bad}");
    }
}

#[tokio::test]
async fn progressive_intake_patch_moves_updated_at() {
    let clock = Arc::new(FixedClock::new(OffsetDateTime::now_utc()));
    let app = TestApp::spawn_full(|_| {}, clock.clone()).await;
    let s = app.seed("acme", false).await;
    let row = app
        .ingest_lead(&lead_body(
            "acme",
            json!({ "origin": "headless_intake", "phone": null, "location": "Weight Loss" }),
        ))
        .await;
    assert_eq!(row["phone"], "");
    let id = row["id"].as_str().expect("id");
    clock.advance(time::Duration::seconds(1));
    let res = app
        .internal(Method::PATCH, &format!("/leads/{id}"))
        .json(&json!({ "phone": "+1 555 0199" }))
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    let patched = body(res).await["data"].clone();
    assert_eq!(patched["phone"], "+1 555 0199");
    assert_ne!(patched["updatedAt"], row["updatedAt"]);
    assert_eq!(patched["createdAt"], row["createdAt"]);
    let listed = &app.get_ok("/api/v1/leads", &s.token).await["data"][0];
    assert_eq!(listed, &patched);
    // Validation and unknown ids.
    for bad in [
        json!({}),
        json!({ "phone": "abc" }),
        json!({ "origin": "x" }),
        json!({ "email": "nope" }),
    ] {
        let res = app
            .internal(Method::PATCH, &format!("/leads/{id}"))
            .json(&bad)
            .send()
            .await
            .expect("send");
        assert_error(res, 400, "invalid_request").await;
    }
    let ghost = uuid::Uuid::new_v4();
    let res = app
        .internal(Method::PATCH, &format!("/leads/{ghost}"))
        .json(&json!({ "phone": "1" }))
        .send()
        .await
        .expect("send");
    assert_error(res, 404, "not_found").await;
    let res = app
        .internal(Method::PATCH, &format!("/leads/{id}"))
        .json(&json!({ "phone": null }))
        .send()
        .await
        .expect("send");
    assert_eq!(body(res).await["data"]["phone"], "");
}

#[tokio::test]
async fn lead_ingest_validation_and_unknown_partner() {
    let app = TestApp::spawn().await;
    app.seed("acme", false).await;
    let res = app
        .internal(Method::POST, "/leads")
        .json(&lead_body("ghost", json!({})))
        .send()
        .await
        .expect("send");
    assert_error(res, 404, "not_found").await;
    for extra in [
        json!({ "email": "nope" }),
        json!({ "firstName": "" }),
        json!({ "firstName": "a\u{0}" }),
        json!({ "origin": "Managed Website" }),
        json!({ "phone": "call me" }),
        json!({ "emailConsent": "yes" }),
        json!({ "subId": "0" }),
        json!({ "subId": 7 }),
        json!({ "unknown": 1 }),
        json!({ "location": "x".repeat(201) }),
    ] {
        let res = app
            .internal(Method::POST, "/leads")
            .json(&lead_body("acme", extra.clone()))
            .send()
            .await
            .expect("send");
        assert_eq!(res.status(), StatusCode::BAD_REQUEST, "{extra}");
    }
}

#[tokio::test]
async fn leads_are_isolated_per_partner() {
    let app = TestApp::spawn().await;
    let a = app.seed("acme", false).await;
    let b = app.seed("beta", false).await;
    let mine = app.ingest_lead(&lead_body("acme", json!({}))).await;
    app.ingest_lead(&lead_body("beta", json!({}))).await;
    app.ingest_lead(&lead_body("beta.3", json!({}))).await;
    let page = app
        .get_ok("/api/v1/leads?includeTest=true&limit=200", &a.token)
        .await;
    assert_eq!(
        ids(&page),
        vec![mine["id"].as_str().expect("id").to_owned()]
    );
    assert_eq!(ids(&app.get_ok("/api/v1/leads", &b.token).await).len(), 2);
}

#[tokio::test]
async fn the_leads_endpoint_requires_a_token() {
    let app = TestApp::spawn().await;
    assert_error(
        app.request(Method::GET, "/api/v1/leads")
            .send()
            .await
            .expect("send"),
        401,
        "missing_bearer",
    )
    .await;
}
