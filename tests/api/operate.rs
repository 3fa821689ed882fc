//! Operating the service (extensions.md §5): shared rate limits through Redis, fail-open when
//! Redis is unreachable.

use reqwest::{Method, Response, StatusCode};
use time::OffsetDateTime;

use crate::helpers::{TestApp, assert_error};

const LEADS: &str = "/api/v1/leads";
pub const REDIS_URL: &str = "redis://127.0.0.1:6379";
/// Nothing listens there (port 1 is privileged and unused).
pub const CLOSED_REDIS_URL: &str = "redis://127.0.0.1:1";

fn redis_quota(limit: u32) -> partner_http::Quota {
    partner_http::Quota {
        limit,
        window_secs: 3600,
    }
}

fn header(res: &Response, name: &str) -> i64 {
    res.headers()[name]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("integer")
}

#[tokio::test]
async fn two_instances_on_one_redis_share_a_tokens_budget() {
    // Keys of this test only, so tests running in parallel on the same Redis do not collide.
    let prefix = format!("test:{}:", uuid::Uuid::new_v4().simple());
    let a = TestApp::spawn_with(|c| {
        c.rate_limit = redis_quota(5);
        c.redis_url = Some(REDIS_URL.into());
        c.redis_key_prefix = prefix.clone();
    })
    .await;
    let b = a.sibling().await;
    let s = a.seed("acme", false).await;
    let now = OffsetDateTime::now_utc().unix_timestamp();
    for (i, app) in [&a, &b, &a, &b, &b].into_iter().enumerate() {
        let res = app
            .api(Method::GET, LEADS, &s.token)
            .send()
            .await
            .expect("send");
        assert_eq!(res.status(), StatusCode::OK, "call {}", i + 1);
        assert_eq!(header(&res, "x-ratelimit-limit"), 5);
        assert_eq!(
            header(&res, "x-ratelimit-remaining"),
            4 - i64::try_from(i).expect("small"),
            "one budget across instances"
        );
        // The window is aligned as with the in-process limiter.
        let reset = header(&res, "x-ratelimit-reset");
        assert_eq!(reset % 3600, 0);
        assert!(reset > now && reset <= now + 3600 + 1);
    }
    for app in [&a, &b] {
        let res = app
            .api(Method::GET, LEADS, &s.token)
            .send()
            .await
            .expect("send");
        assert_eq!(header(&res, "x-ratelimit-remaining"), 0);
        assert!(header(&res, "retry-after") >= 1);
        assert_error(res, 429, "rate_limited").await;
    }
    // Another group's budget is whole.
    let res = b
        .api(Method::GET, "/api/v1/sub-accounts", &s.token)
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(header(&res, "x-ratelimit-remaining"), 4);
}

#[tokio::test]
async fn an_unreachable_redis_fails_open_quickly() {
    let app = TestApp::spawn_with(|c| {
        c.rate_limit = redis_quota(100);
        c.redis_url = Some(CLOSED_REDIS_URL.into());
    })
    .await;
    let s = app.seed("acme", false).await;
    let started = std::time::Instant::now();
    for _ in 0..10 {
        let res = app
            .api(Method::GET, LEADS, &s.token)
            .send()
            .await
            .expect("send");
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(header(&res, "x-ratelimit-limit"), 100);
        assert!(header(&res, "x-ratelimit-remaining") < 100);
    }
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "no stall on the limiter: {:?}",
        started.elapsed()
    );
}
