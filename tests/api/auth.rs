//! Every authentication outcome of the spec and rulings, token lifecycle, rate limits and
//! the order of checks.

use std::sync::Arc;

use partner_domain::kernel::clock::FixedClock;
use reqwest::{Method, StatusCode};
use serde_json::json;
use time::OffsetDateTime;

use crate::helpers::{TestApp, assert_error, body, eventually, mid_hour_clock, partner_body};

const SUBS: &str = "/api/v1/sub-accounts";

#[tokio::test]
async fn missing_bearer_for_no_header_other_scheme_or_empty_bearer() {
    let app = TestApp::spawn().await;
    let res = app.request(Method::GET, SUBS).send().await.expect("send");
    assert_error(res, 401, "missing_bearer").await;
    for h in [
        "Basic dXNlcjpwYXNz",
        "Bearer",
        "Bearer    ",
        "Token pk_live_abc",
        "",
    ] {
        let res = app
            .request(Method::GET, SUBS)
            .header("Authorization", h)
            .send()
            .await
            .expect("send");
        assert_error(res, 401, "missing_bearer").await;
    }
}

#[tokio::test]
async fn invalid_token_for_malformed_unknown_revoked_and_expired() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    for t in [
        "nope",
        "pk_live_short",
        &format!("pk_test_{}", "a".repeat(43)),
        &format!("pk_live_{}", "a".repeat(43)),
    ] {
        let res = app.api(Method::GET, SUBS, t).send().await.expect("send");
        assert_error(res, 401, "invalid_token").await;
    }
    // Revoked.
    let res = app
        .internal(Method::DELETE, &format!("/tokens/{}", s.token_id))
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(body(res).await, json!({ "data": { "ok": true } }));
    assert_error(
        app.api(Method::GET, SUBS, &s.token)
            .send()
            .await
            .expect("send"),
        401,
        "invalid_token",
    )
    .await;
}

#[tokio::test]
async fn an_expired_token_stops_working_when_the_clock_passes_its_expiry() {
    let clock = Arc::new(FixedClock::new(OffsetDateTime::now_utc()));
    let app = TestApp::spawn_full(|_| {}, clock.clone()).await;
    let s = app.seed("acme", false).await;
    let expires = clock.now_plus_secs(60);
    let res = app
        .internal(Method::POST, &format!("/users/{}/tokens", s.user_id))
        .json(&json!({ "expiresAt": expires }))
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::CREATED);
    let b = body(res).await;
    assert_eq!(b["data"]["expiresAt"], expires);
    let token = b["data"]["token"].as_str().expect("token").to_owned();
    assert_eq!(
        app.api(Method::GET, SUBS, &token)
            .send()
            .await
            .expect("send")
            .status(),
        StatusCode::OK
    );
    clock.advance(time::Duration::seconds(60));
    assert_error(
        app.api(Method::GET, SUBS, &token)
            .send()
            .await
            .expect("send"),
        401,
        "invalid_token",
    )
    .await;
    // The token without expiry still works.
    assert_eq!(
        app.api(Method::GET, SUBS, &s.token)
            .send()
            .await
            .expect("send")
            .status(),
        StatusCode::OK
    );
}

trait PlusSecs {
    fn now_plus_secs(&self, s: i64) -> String;
}

impl PlusSecs for FixedClock {
    fn now_plus_secs(&self, s: i64) -> String {
        use partner_domain::kernel::clock::Clock;
        partner_domain::kernel::wire::format_timestamp(self.now() + time::Duration::seconds(s))
    }
}

#[tokio::test]
async fn a_deleted_users_token_answers_unknown_user() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    let res = app
        .internal(Method::DELETE, &format!("/users/{}", s.user_id))
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    assert_error(
        app.api(Method::GET, SUBS, &s.token)
            .send()
            .await
            .expect("send"),
        401,
        "unknown_user",
    )
    .await;
}

#[tokio::test]
async fn an_inactive_partner_gets_403_and_reactivation_restores_access() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    assert_eq!(
        app.put_partner("acme", &partner_body(false)).await.status(),
        StatusCode::OK
    );
    assert_error(
        app.api(Method::GET, SUBS, &s.token)
            .send()
            .await
            .expect("send"),
        403,
        "forbidden",
    )
    .await;
    assert_eq!(
        app.put_partner("acme", &partner_body(true)).await.status(),
        StatusCode::OK
    );
    assert_eq!(
        app.api(Method::GET, SUBS, &s.token)
            .send()
            .await
            .expect("send")
            .status(),
        StatusCode::OK
    );
}

#[tokio::test]
async fn without_pepper_any_bearer_is_503_and_no_bearer_is_401() {
    let app = TestApp::spawn_with(|c| c.token_pepper = None).await;
    for t in ["x", &format!("pk_live_{}", "a".repeat(43))] {
        let res = app.api(Method::GET, SUBS, t).send().await.expect("send");
        assert_error(res, 503, "api_keys_unavailable").await;
    }
    assert_error(
        app.request(Method::GET, SUBS).send().await.expect("send"),
        401,
        "missing_bearer",
    )
    .await;
    // Tokens cannot be minted either.
    assert_eq!(
        app.put_partner("acme", &partner_body(true)).await.status(),
        StatusCode::CREATED
    );
    let user = app.create_user("acme", false).await;
    let res = app
        .internal(Method::POST, &format!("/users/{user}/tokens"))
        .send()
        .await
        .expect("send");
    assert_error(res, 503, "api_keys_unavailable").await;
}

#[tokio::test]
async fn rotation_revokes_the_old_token_at_once() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    let res = app
        .internal(Method::POST, &format!("/tokens/{}/rotate", s.token_id))
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::CREATED);
    let b = body(res).await;
    let new = b["data"]["token"].as_str().expect("token");
    assert_ne!(new, s.token);
    assert_ne!(b["data"]["id"], s.token_id.as_str());
    assert_error(
        app.api(Method::GET, SUBS, &s.token)
            .send()
            .await
            .expect("send"),
        401,
        "invalid_token",
    )
    .await;
    assert_eq!(
        app.api(Method::GET, SUBS, new)
            .send()
            .await
            .expect("send")
            .status(),
        StatusCode::OK
    );
    // A revoked token cannot be rotated again.
    let res = app
        .internal(Method::POST, &format!("/tokens/{}/rotate", s.token_id))
        .send()
        .await
        .expect("send");
    assert_error(res, 409, "invalid_request").await;
}

#[tokio::test]
async fn a_revoked_token_fails_on_the_next_request_on_another_instance() {
    let app = TestApp::spawn().await;
    let other = app.sibling().await;
    let s = app.seed("acme", false).await;
    assert_eq!(
        other
            .api(Method::GET, SUBS, &s.token)
            .send()
            .await
            .expect("send")
            .status(),
        StatusCode::OK
    );
    let res = app
        .internal(Method::DELETE, &format!("/tokens/{}", s.token_id))
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    assert_error(
        other
            .api(Method::GET, SUBS, &s.token)
            .send()
            .await
            .expect("send"),
        401,
        "invalid_token",
    )
    .await;
}

#[tokio::test]
async fn the_token_text_is_returned_once_and_never_again() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    let listing = app
        .internal(Method::GET, &format!("/users/{}/tokens", s.user_id))
        .send()
        .await
        .expect("send");
    assert_eq!(listing.status(), StatusCode::OK);
    let text = listing.text().await.expect("text");
    assert!(!text.contains(&s.token), "listing leaks the token");
    let v: serde_json::Value = serde_json::from_str(&text).expect("json");
    let t = &v["data"][0];
    assert_eq!(t["id"], s.token_id.as_str());
    assert!(t.get("token").is_none());
    assert_eq!(t["tokenPrefix"], &s.token[..12]);
    assert!(s.token.starts_with("pk_live_") && s.token.len() >= 48);
    for path in [format!("/partners/{}", s.partner_id)] {
        let text = app
            .internal(Method::GET, &path)
            .send()
            .await
            .expect("send")
            .text()
            .await
            .expect("text");
        assert!(!text.contains(&s.token));
    }
}

#[tokio::test]
async fn last_used_at_is_recorded_after_use() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    let list = || async {
        body(
            app.internal(Method::GET, &format!("/users/{}/tokens", s.user_id))
                .send()
                .await
                .expect("send"),
        )
        .await
    };
    assert_eq!(
        list().await["data"][0]["lastUsedAt"],
        serde_json::Value::Null
    );
    assert_eq!(
        app.api(Method::GET, SUBS, &s.token)
            .send()
            .await
            .expect("send")
            .status(),
        StatusCode::OK
    );
    // Written off the request path.
    eventually("lastUsedAt to be written", || async {
        list().await["data"][0]["lastUsedAt"]
            .is_string()
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn rate_limit_per_token_and_group_with_headers_on_every_answer() {
    let clock = mid_hour_clock();
    let app = TestApp::spawn_full(
        |c| {
            c.rate_limit = partner_http::Quota {
                limit: 3,
                window_secs: 3600,
            }
        },
        clock.clone(),
    )
    .await;
    let a = app.seed("acme", false).await;
    let b = app.seed("beta", false).await;
    let ok = app
        .api(Method::GET, SUBS, &a.token)
        .send()
        .await
        .expect("send");
    assert_eq!(ok.status(), StatusCode::OK);
    let h = ok.headers();
    assert_eq!(h["x-ratelimit-limit"], "3");
    assert_eq!(h["x-ratelimit-remaining"], "2");
    let reset: i64 = h["x-ratelimit-reset"]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("unix time");
    // The clock stands in the middle of an hour: the window ends at the next full hour.
    let now = partner_domain::kernel::clock::Clock::now(clock.as_ref()).unix_timestamp();
    assert_eq!(reset, now + 1800);
    // A validation failure still costs a unit and carries the headers.
    let bad = app
        .api(Method::POST, SUBS, &a.token)
        .json(&json!({ "subId": "0", "nickname": "x" }))
        .send()
        .await
        .expect("send");
    assert_eq!(bad.headers()["x-ratelimit-remaining"], "1");
    assert_error(bad, 400, "invalid_request").await;
    assert_eq!(
        app.api(Method::GET, SUBS, &a.token)
            .send()
            .await
            .expect("send")
            .status(),
        StatusCode::OK
    );
    // Budget spent: 429 comes before validation.
    let limited = app
        .api(Method::POST, SUBS, &a.token)
        .json(&json!({}))
        .send()
        .await
        .expect("send");
    assert_eq!(limited.headers()["x-ratelimit-remaining"], "0");
    let retry: u64 = limited.headers()["retry-after"]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("seconds");
    assert_eq!(retry, 1800);
    assert_error(limited, 429, "rate_limited").await;
    // Another token has its own budget.
    assert_eq!(
        app.api(Method::GET, SUBS, &b.token)
            .send()
            .await
            .expect("send")
            .status(),
        StatusCode::OK
    );
}

#[tokio::test]
async fn authentication_failures_do_not_cost_budget_and_403_precedes_429() {
    let app = TestApp::spawn_full(
        |c| {
            c.rate_limit = partner_http::Quota {
                limit: 1,
                window_secs: 3600,
            }
        },
        mid_hour_clock(),
    )
    .await;
    let s = app.seed("acme", false).await;
    let res = app.request(Method::GET, SUBS).send().await.expect("send");
    assert!(res.headers().get("x-ratelimit-limit").is_none());
    assert_error(res, 401, "missing_bearer").await;
    assert_eq!(
        app.api(Method::GET, SUBS, &s.token)
            .send()
            .await
            .expect("send")
            .status(),
        StatusCode::OK
    );
    app.put_partner("acme", &partner_body(false)).await;
    assert_error(
        app.api(Method::GET, SUBS, &s.token)
            .send()
            .await
            .expect("send"),
        403,
        "forbidden",
    )
    .await;
}

#[tokio::test]
async fn link_endpoints_share_one_budget_and_other_groups_have_their_own() {
    let app = TestApp::spawn_full(
        |c| {
            c.rate_limit = partner_http::Quota {
                limit: 3,
                window_secs: 3600,
            }
        },
        mid_hour_clock(),
    )
    .await;
    let s = app.seed("acme", false).await;
    let remaining = |res: &reqwest::Response| {
        res.headers()["x-ratelimit-remaining"]
            .to_str()
            .expect("ascii")
            .to_owned()
    };
    let mut seen = Vec::new();
    for p in [
        "/api/v1/dna-links",
        "/api/v1/medical-intake-links",
        "/api/v1/care-service-links",
    ] {
        let res = app
            .api(Method::GET, p, &s.token)
            .send()
            .await
            .expect("send");
        assert_eq!(res.status(), StatusCode::OK, "{p}");
        seen.push(remaining(&res));
    }
    assert_eq!(seen, ["2", "1", "0"]);
    let res = app
        .api(Method::GET, "/api/v1/medical-intake-links", &s.token)
        .send()
        .await
        .expect("send");
    assert_error(res, 429, "rate_limited").await;
    for p in [
        "/api/v1/leads",
        "/api/v1/orders",
        "/api/v1/payouts",
        "/api/v1/care-services-coupons",
        SUBS,
    ] {
        let res = app
            .api(Method::GET, p, &s.token)
            .send()
            .await
            .expect("send");
        assert_eq!(
            (res.status(), remaining(&res)),
            (StatusCode::OK, "2".to_owned()),
            "{p}"
        );
    }
}
