//! The partner's webhook portal (extensions §10): one-time links, their exchange for a portal
//! session, what that session may call, its expiry and its revocation.

use std::sync::Arc;

use partner_domain::kernel::clock::{Clock, FixedClock};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::helpers::{TestApp, assert_error, body};
use crate::one_trip::{READS, path, populate};

/// `POST /api/v1/portal-sessions` with `token`, asserting 201: the code from the link, and the
/// link's body.
pub(crate) async fn mint(app: &TestApp, token: &str) -> (String, Value) {
    let res = app
        .api(Method::POST, "/api/v1/portal-sessions", token)
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::CREATED, "mint");
    assert_eq!(res.headers()["cache-control"], "no-store");
    assert!(res.headers().contains_key("x-ratelimit-remaining"));
    let b = body(res).await;
    let url = b["data"]["url"].as_str().expect("url");
    let code = url
        .split_once("/portal#code=")
        .expect("the code is in the fragment of /portal")
        .1
        .to_owned();
    (code, b)
}

async fn exchange(app: &TestApp, code: &str) -> reqwest::Response {
    app.request(Method::POST, "/portal/v1/sessions")
        .json(&json!({ "code": code }))
        .send()
        .await
        .expect("send")
}

/// A portal session's bearer for `code`, asserting 201.
pub(crate) async fn session(app: &TestApp, code: &str) -> (String, Value) {
    let res = exchange(app, code).await;
    assert_eq!(res.status(), StatusCode::CREATED, "exchange");
    assert_eq!(res.headers()["cache-control"], "no-store");
    let b = body(res).await;
    (b["data"]["token"].as_str().expect("token").to_owned(), b)
}

fn at(v: &Value) -> OffsetDateTime {
    let s = v.as_str().expect("timestamp");
    assert!(
        s.ends_with('Z') && s.len() == 24,
        "milliseconds in UTC: {s}"
    );
    OffsetDateTime::parse(s, &Rfc3339).expect("RFC 3339")
}

#[tokio::test]
async fn a_link_is_spent_once_and_its_session_reaches_only_the_webhook_calls_of_its_partner() {
    let clock = Arc::new(FixedClock::new(OffsetDateTime::now_utc()));
    let app = TestApp::spawn_full(|_| {}, clock.clone()).await;
    let (acme, acme_delivery) = populate(&app, "acme", "acme").await;
    let (_zeta, zeta_delivery) = populate(&app, "zeta", "zeta").await;

    let (code, link) = mint(&app, &acme.token).await;
    let base = app.config.base_url.as_str().trim_end_matches('/');
    assert_eq!(
        link["data"]["url"].as_str().expect("url"),
        format!("{base}/portal#code={code}")
    );
    assert_eq!(code.len(), 43);
    let now = clock.now();
    assert_eq!(
        at(&link["data"]["expiresAt"]),
        now + time::Duration::minutes(10)
    );

    let (portal, s) = session(&app, &code).await;
    assert_eq!(at(&s["data"]["expiresAt"]), now + time::Duration::hours(1));
    assert_ne!(portal, acme.token);
    // Used: a second exchange fails, as does a code never minted or of the wrong shape.
    assert_error(exchange(&app, &code).await, 400, "invalid_request").await;
    assert_error(
        exchange(&app, &"Z".repeat(43)).await,
        400,
        "invalid_request",
    )
    .await;
    assert_error(exchange(&app, "short").await, 400, "invalid_request").await;
    for bad in [
        json!({}),
        json!({ "code": 5 }),
        json!({ "code": code, "x": 1 }),
    ] {
        let res = app
            .request(Method::POST, "/portal/v1/sessions")
            .json(&bad)
            .send()
            .await
            .expect("send");
        assert_error(res, 400, "invalid_request").await;
    }

    // The webhook reads of its own partner answer; every other read is 403 `forbidden`.
    for read in READS {
        let p = path(read, &acme_delivery);
        let res = app
            .api(Method::GET, &p, &portal)
            .send()
            .await
            .expect("send");
        if read.starts_with("/api/v1/webhook-") {
            assert_eq!(res.status(), StatusCode::OK, "{p}");
            assert!(!res.text().await.expect("body").contains("zeta"), "{p}");
        } else {
            assert_error(res, 403, "forbidden").await;
        }
    }
    // Another partner's records answer as for that partner's own tokens.
    let res = app
        .api(
            Method::GET,
            &format!("/api/v1/webhook-deliveries/{}", zeta_delivery.delivery),
            &portal,
        )
        .send()
        .await
        .expect("send");
    assert_error(res, 404, "not_found").await;
    // Writes outside the scope, and opening another portal, are 403 too.
    for (method, p, b) in [
        (
            Method::POST,
            "/api/v1/sub-accounts",
            json!({ "subId": "9", "nickname": "x" }),
        ),
        (Method::DELETE, "/api/v1/sub-accounts?subId=7", json!({})),
        (Method::POST, "/api/v1/portal-sessions", json!({})),
        (Method::PUT, "/api/v1/leads", json!({})),
    ] {
        let res = app
            .api(method.clone(), p, &portal)
            .json(&b)
            .send()
            .await
            .expect("send");
        assert_error(res, 403, "forbidden").await;
    }
    // The webhook calls work: enable/disable, a test event, resend, recover, rotate.
    let endpoints = app.get_ok("/api/v1/webhook-endpoints", &portal).await;
    let id = endpoints["data"][0]["id"]
        .as_str()
        .expect("endpoint")
        .to_owned();
    for (method, p, b, want) in [
        (
            Method::PATCH,
            format!("/api/v1/webhook-endpoints/{id}"),
            json!({ "enabled": false }),
            200,
        ),
        (
            Method::PATCH,
            format!("/api/v1/webhook-endpoints/{id}"),
            json!({ "enabled": true }),
            200,
        ),
        (
            Method::POST,
            format!("/api/v1/webhook-endpoints/{id}/test"),
            json!({}),
            202,
        ),
        (
            Method::POST,
            format!(
                "/api/v1/webhook-deliveries/{}/resend",
                acme_delivery.delivery
            ),
            json!({}),
            202,
        ),
        (
            Method::POST,
            format!("/api/v1/webhook-endpoints/{id}/recover"),
            json!({ "since": (now - time::Duration::hours(1)).format(&Rfc3339).expect("ts") }),
            202,
        ),
        (
            Method::PATCH,
            format!("/api/v1/webhook-endpoints/{id}"),
            json!({ "secret": true }),
            200,
        ),
    ] {
        let res = app
            .api(method.clone(), &p, &portal)
            .json(&b)
            .send()
            .await
            .expect("send");
        assert_eq!(res.status().as_u16(), want, "{method} {p}");
        assert!(res.headers().contains_key("x-ratelimit-remaining"), "{p}");
    }
}

#[tokio::test]
async fn of_concurrent_exchanges_of_one_code_exactly_one_succeeds() {
    let app = TestApp::spawn().await;
    let acme = app.seed("acme", false).await;
    let (code, _) = mint(&app, &acme.token).await;
    let tries = (0..8).map(|_| exchange(&app, &code));
    let statuses: Vec<u16> = futures_util::future::join_all(tries)
        .await
        .into_iter()
        .map(|r| r.status().as_u16())
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 400).count(),
        7,
        "{statuses:?}"
    );
}

#[tokio::test]
async fn codes_and_sessions_expire_after_their_configured_lifetimes() {
    let clock = Arc::new(FixedClock::new(OffsetDateTime::now_utc()));
    let app = TestApp::spawn_full(
        |c| {
            c.portal_code_ttl = std::time::Duration::from_secs(120);
            c.portal_session_ttl = std::time::Duration::from_secs(900);
        },
        clock.clone(),
    )
    .await;
    let acme = app.seed("acme", false).await;
    let (late, _) = mint(&app, &acme.token).await;
    let (code, _) = mint(&app, &acme.token).await;
    clock.advance(time::Duration::seconds(119));
    let (portal, s) = session(&app, &code).await;
    assert_eq!(
        at(&s["data"]["expiresAt"]),
        clock.now() + time::Duration::minutes(15)
    );
    clock.advance(time::Duration::seconds(1));
    assert_error(exchange(&app, &late).await, 400, "invalid_request").await;
    app.get_ok("/api/v1/webhook-endpoints", &portal).await;
    clock.advance(time::Duration::seconds(899));
    let res = app
        .api(Method::GET, "/api/v1/webhook-endpoints", &portal)
        .send()
        .await
        .expect("send");
    assert_error(res, 401, "invalid_token").await;
}

/// Issue 22: expired portal sessions were never deleted (one `api_tokens` row per exchange,
/// forever). A mint deletes those expired for a day, oldest first, as it does spent codes.
#[tokio::test]
async fn expired_portal_sessions_are_pruned_a_day_after_their_expiry() {
    use diesel::sql_types::BigInt;
    use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};

    let clock = Arc::new(FixedClock::new(OffsetDateTime::now_utc()));
    let app = TestApp::spawn_full(
        |c| c.portal_session_ttl = std::time::Duration::from_secs(3600),
        clock.clone(),
    )
    .await;
    let acme = app.seed("acme", false).await;
    let mut conn = AsyncPgConnection::establish(&app.config.database_url)
        .await
        .expect("connect");
    let mut sessions = async || -> i64 {
        diesel::select(diesel::dsl::sql::<BigInt>(
            "(SELECT count(*) FROM api_tokens WHERE portal_of IS NOT NULL)",
        ))
        .get_result(&mut conn)
        .await
        .expect("count")
    };
    let (code, _) = mint(&app, &acme.token).await;
    session(&app, &code).await;
    clock.advance(time::Duration::minutes(30));
    let (code, _) = mint(&app, &acme.token).await;
    let (live, _) = session(&app, &code).await;
    assert_eq!(sessions().await, 2);

    // The first session expired a day ago less a second: kept.
    clock.advance(time::Duration::minutes(30) + time::Duration::DAY - time::Duration::seconds(1));
    mint(&app, &acme.token).await;
    assert_eq!(sessions().await, 2);
    // A second later the next mint deletes it, and only it.
    clock.advance(time::Duration::seconds(2));
    mint(&app, &acme.token).await;
    assert_eq!(sessions().await, 1);
    assert_error(
        app.api(Method::GET, "/api/v1/webhook-endpoints", &live)
            .send()
            .await
            .expect("send"),
        401,
        "invalid_token",
    )
    .await;
}

#[tokio::test]
async fn revoking_or_rotating_the_partner_token_ends_its_portal_sessions_and_codes() {
    let app = TestApp::spawn().await;
    let acme = app.seed("acme", false).await;
    let (_, other_token) = app.create_token(&acme.user_id).await;
    let (code, _) = mint(&app, &acme.token).await;
    let (unused, _) = mint(&app, &acme.token).await;
    let (portal, _) = session(&app, &code).await;
    let (other_code, _) = mint(&app, &other_token).await;
    let (other_portal, _) = session(&app, &other_code).await;
    app.get_ok("/api/v1/webhook-endpoints", &portal).await;
    // Portal sessions are not listed among the user's tokens.
    let res = app
        .internal(Method::GET, &format!("/users/{}/tokens", acme.user_id))
        .send()
        .await
        .expect("send");
    assert_eq!(body(res).await["data"].as_array().expect("tokens").len(), 2);

    let res = app
        .internal(Method::DELETE, &format!("/tokens/{}", acme.token_id))
        .send()
        .await
        .expect("send");
    assert!(res.status().is_success());
    let res = app
        .api(Method::GET, "/api/v1/webhook-endpoints", &portal)
        .send()
        .await
        .expect("send");
    assert_error(res, 401, "invalid_token").await;
    assert_error(exchange(&app, &unused).await, 400, "invalid_request").await;
    // A session opened with another token of the same user is not touched…
    app.get_ok("/api/v1/webhook-endpoints", &other_portal).await;
    // …until that token is rotated.
    let other_id = {
        let res = app
            .internal(Method::GET, &format!("/users/{}/tokens", acme.user_id))
            .send()
            .await
            .expect("send");
        let b = body(res).await;
        b["data"]
            .as_array()
            .expect("tokens")
            .iter()
            .find(|t| t["revokedAt"].is_null())
            .expect("the live token")["id"]
            .as_str()
            .expect("id")
            .to_owned()
    };
    let res = app
        .internal(Method::POST, &format!("/tokens/{other_id}/rotate"))
        .send()
        .await
        .expect("send");
    assert!(res.status().is_success());
    let res = app
        .api(Method::GET, "/api/v1/webhook-endpoints", &other_portal)
        .send()
        .await
        .expect("send");
    assert_error(res, 401, "invalid_token").await;
}

#[tokio::test]
async fn a_deactivated_partner_cannot_mint_or_use_a_portal() {
    let app = TestApp::spawn().await;
    let acme = app.seed("acme", false).await;
    let (code, _) = mint(&app, &acme.token).await;
    let (portal, _) = session(&app, &code).await;
    let (unused, _) = mint(&app, &acme.token).await;
    let res = app
        .put_partner("acme", &crate::helpers::partner_body(false))
        .await;
    assert!(res.status().is_success());
    let res = app
        .api(Method::GET, "/api/v1/webhook-endpoints", &portal)
        .send()
        .await
        .expect("send");
    assert_error(res, 403, "forbidden").await;
    assert_error(exchange(&app, &unused).await, 400, "invalid_request").await;
}

#[tokio::test]
async fn the_page_is_served_from_the_binary_with_a_strict_policy_in_the_browsers_language() {
    let app = TestApp::spawn().await;
    for (query, accept, lang) in [
        ("", Some("es-MX,es;q=0.9,en;q=0.5"), "es"),
        ("?lang=en", Some("es"), "en"),
        ("?lang=es", None, "es"),
        ("", None, "en"),
    ] {
        let mut req = app.request(Method::GET, &format!("/portal{query}"));
        if let Some(a) = accept {
            req = req.header("accept-language", a);
        }
        let res = req.send().await.expect("send");
        assert_eq!(res.status(), StatusCode::OK);
        let h = res.headers().clone();
        assert_eq!(h["content-type"], "text/html; charset=utf-8");
        assert_eq!(h["referrer-policy"], "no-referrer");
        assert_eq!(h["cache-control"], "no-store");
        let csp = h["content-security-policy"].to_str().expect("csp");
        assert!(csp.contains("frame-ancestors 'none'") && csp.contains("script-src 'self'"));
        assert!(
            !csp.contains("unsafe-inline") && !csp.contains("http"),
            "{csp}"
        );
        let html = res.text().await.expect("html");
        assert!(
            html.contains(&format!("<html lang=\"{lang}\">")),
            "{query} {accept:?}"
        );
        // No inline script or style, nothing from another origin.
        assert!(!html.contains("<script>") && !html.contains("<style") && !html.contains("style="));
        assert!(
            !html.contains("//"),
            "no absolute or protocol-relative address"
        );
    }
    for (path, kind) in [
        ("/portal/app.js", "text/javascript"),
        ("/portal/app.css", "text/css"),
    ] {
        let res = app.request(Method::GET, path).send().await.expect("send");
        assert_eq!(res.status(), StatusCode::OK);
        assert!(
            res.headers()["content-type"]
                .to_str()
                .expect("type")
                .starts_with(kind)
        );
        assert_eq!(res.headers()["x-content-type-options"], "nosniff");
        let text = res.text().await.expect("body");
        // Nothing is fetched from elsewhere (the SVG namespace is a name, not a request).
        let text = text.replace("http://www.w3.org/2000/svg", "");
        assert!(
            !text.contains("http://") && !text.contains("https://"),
            "{path}"
        );
    }
}

/// The chart's read counts what the delivery log lists, hour by hour, for the caller's partner
/// only (another partner's endpoint counts nothing).
#[tokio::test]
async fn the_hourly_counts_equal_the_log() {
    // No delivery worker: statuses cannot change between the two reads.
    let app = TestApp::spawn_with(|c| c.role = partner_server::config::Role::Api).await;
    let (acme, _) = populate(&app, "acme", "acme").await;
    let (zeta, _) = populate(&app, "zeta", "zeta").await;
    let endpoint = app.get_ok("/api/v1/webhook-endpoints", &acme.token).await["data"][0]["id"]
        .as_str()
        .expect("endpoint")
        .to_owned();
    for _ in 0..3 {
        let res = app
            .api(
                Method::POST,
                &format!("/api/v1/webhook-endpoints/{endpoint}/test"),
                &acme.token,
            )
            .send()
            .await
            .expect("send");
        assert_eq!(res.status(), StatusCode::ACCEPTED);
    }
    let (code, _) = mint(&app, &acme.token).await;
    let (portal, _) = session(&app, &code).await;
    let log = app
        .get_ok("/api/v1/webhook-deliveries?limit=200", &portal)
        .await;
    let logged = log["data"].as_array().expect("log");
    let hours = app
        .get_ok("/api/v1/webhook-deliveries/by-hour", &portal)
        .await;
    let hours = hours["data"].as_array().expect("hours");
    assert_eq!(hours.len(), 24);
    let last = at(&hours[23]["hour"]);
    assert!(OffsetDateTime::now_utc() - last < time::Duration::hours(1));
    for (i, h) in hours.iter().enumerate() {
        let start = at(&h["hour"]);
        let in_hour: Vec<&Value> = logged
            .iter()
            .filter(|d| {
                let c = at(&d["createdAt"]);
                c >= start && c < start + time::Duration::hours(1)
            })
            .collect();
        for status in ["delivered", "failed", "pending"] {
            let n = in_hour.iter().filter(|d| d["status"] == status).count();
            assert_eq!(h[status].as_u64(), Some(n as u64), "hour {i} {status}");
        }
    }
    let total = |v: &Value| -> u64 {
        v["data"]
            .as_array()
            .expect("hours")
            .iter()
            .map(|h| {
                h["delivered"].as_u64().unwrap_or(0)
                    + h["failed"].as_u64().unwrap_or(0)
                    + h["pending"].as_u64().unwrap_or(0)
            })
            .sum()
    };
    let one = app
        .get_ok(
            &format!("/api/v1/webhook-deliveries/by-hour?endpointId={endpoint}"),
            &portal,
        )
        .await;
    assert_eq!(
        total(&one),
        logged
            .iter()
            .filter(|d| d["endpointId"] == endpoint.as_str())
            .count() as u64
    );
    assert!(total(&one) >= 3);
    let zeta_endpoint = app.get_ok("/api/v1/webhook-endpoints", &zeta.token).await["data"][0]["id"]
        .as_str()
        .expect("endpoint")
        .to_owned();
    let other = app
        .get_ok(
            &format!("/api/v1/webhook-deliveries/by-hour?endpointId={zeta_endpoint}"),
            &portal,
        )
        .await;
    assert_eq!(
        total(&other),
        0,
        "another partner's endpoint counts nothing"
    );
    let res = app
        .api(
            Method::GET,
            "/api/v1/webhook-deliveries/by-hour?endpointId=nope",
            &portal,
        )
        .send()
        .await
        .expect("send");
    assert_error(res, 400, "invalid_request").await;
}
