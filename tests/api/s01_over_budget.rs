//! Security review (issue 23), S-01: a request over its rate budget is answered 429 after the
//! token check alone, and reads no partner data (extensions.md §12), on every partner read and
//! with either budget store; the order of checks (401, 403, then 429) stands.
//!
//! "Reads no partner data" is proved by the database itself: once the budgets are spent, every
//! table but the three the token check reads (`api_tokens`, `portal_users`, `partners`) is
//! renamed away, so any statement that reads partner data fails (a 500), and only an answer made
//! from the token check alone can still be the 429.

use std::sync::Arc;

use diesel::sql_types::Text;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use partner_domain::kernel::clock::Clock;
use partner_server::config::Config;
use reqwest::{Method, StatusCode};

use crate::helpers::{TestApp, assert_error, mid_hour_clock, partner_body};
use crate::one_trip::{READS, path, populate};
use crate::operate::REDIS_URL;

/// What the token check reads; every other table holds partner data (or the service's own).
const TOKEN_CHECK: [&str; 3] = ["api_tokens", "portal_users", "partners"];
const HIDDEN: &str = "s01_hidden_";

#[derive(diesel::QueryableByName)]
struct Table {
    #[diesel(sql_type = Text)]
    name: String,
}

async fn connect(app: &TestApp) -> AsyncPgConnection {
    app.db().await
}

/// Renames every table of partner data to `s01_hidden_<name>` (`hide`), or back.
async fn hide_partner_data(app: &TestApp, hide: bool) -> usize {
    let mut conn = connect(app).await;
    let tables: Vec<Table> = diesel::sql_query(
        "SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public' \
         AND tablename NOT LIKE '\\_\\_diesel%'",
    )
    .load(&mut conn)
    .await
    .expect("tables");
    let mut renamed = 0;
    for t in tables {
        if TOKEN_CHECK.contains(&t.name.as_str()) {
            continue;
        }
        let sql = match (hide, t.name.strip_prefix(HIDDEN)) {
            (true, None) => format!("ALTER TABLE \"{0}\" RENAME TO \"{HIDDEN}{0}\"", t.name),
            (false, Some(original)) => {
                format!("ALTER TABLE \"{}\" RENAME TO \"{original}\"", t.name)
            }
            _ => continue,
        };
        diesel::sql_query(sql)
            .execute(&mut conn)
            .await
            .expect("rename");
        renamed += 1;
    }
    renamed
}

/// Every partner read of `token`, until its group's budget answers 429 (each group is spent).
async fn spend_every_budget(app: &TestApp, token: &str, delivery: &crate::one_trip::Ids) {
    for read in READS {
        let p = path(read, delivery);
        let mut spent = false;
        for _ in 0..4 {
            let res = app.api(Method::GET, &p, token).send().await.expect("send");
            match res.status() {
                StatusCode::OK => {}
                StatusCode::TOO_MANY_REQUESTS => {
                    spent = true;
                    break;
                }
                other => panic!("GET {p} while spending the budget: {other}"),
            }
        }
        assert!(spent, "GET {p}: a budget of 2 is spent within 4 calls");
    }
}

/// The S-01 scenario on a server configured by `tweak`.
async fn over_budget_reads_no_partner_data(tweak: impl FnOnce(&mut Config)) {
    let clock = mid_hour_clock();
    let app = TestApp::spawn_full(
        |c| {
            c.rate_limit = partner_http::Quota {
                limit: 2,
                window_secs: 3600,
            };
            tweak(c);
        },
        clock.clone(),
    )
    .await;
    let now = clock.now().unix_timestamp();
    let (acme, delivery) = populate(&app, "acme", "acme").await;
    spend_every_budget(&app, &acme.token, &delivery).await;

    // Over budget: every read answers 429 with the rate-limit headers, though no partner data can
    // be read at all.
    assert!(hide_partner_data(&app, true).await >= 10, "partner tables");
    let mut answers = Vec::new();
    for read in READS {
        let p = path(read, &delivery);
        for _ in 0..3 {
            let res = app
                .api(Method::GET, &p, &acme.token)
                .send()
                .await
                .expect("send");
            let status = res.status();
            let retry = res
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok()?.parse::<i64>().ok());
            let remaining = res
                .headers()
                .get("x-ratelimit-remaining")
                .and_then(|v| v.to_str().ok()?.parse::<i64>().ok());
            let text = res.text().await.expect("body");
            if status != StatusCode::TOO_MANY_REQUESTS {
                answers.push(format!("GET {p}: {status} {text}"));
                continue;
            }
            assert!(text.contains("rate_limited"), "GET {p}: {text}");
            assert_eq!(remaining, Some(0), "GET {p}");
            let reset = now - now.rem_euclid(3600) + 3600;
            assert_eq!(retry, Some(reset - now), "GET {p}: Retry-After");
        }
    }
    hide_partner_data(&app, false).await;
    assert!(
        answers.is_empty(),
        "over budget, these reads read partner data (or failed) instead of answering 429 \
         from the token check alone:\n{}",
        answers.join("\n")
    );

    // The order of checks stands on the over-budget path: 403 for an inactive partner, then 401
    // for a revoked token, before 429.
    let res = app.put_partner("acme", &partner_body(false)).await;
    assert!(res.status().is_success(), "deactivate: {}", res.status());
    for read in READS {
        let p = path(read, &delivery);
        let res = app
            .api(Method::GET, &p, &acme.token)
            .send()
            .await
            .expect("send");
        assert_error(res, 403, "forbidden").await;
    }
    let res = app
        .internal(Method::DELETE, &format!("/tokens/{}", acme.token_id))
        .send()
        .await
        .expect("send");
    assert!(res.status().is_success(), "revoke: {}", res.status());
    for read in READS {
        let p = path(read, &delivery);
        let res = app
            .api(Method::GET, &p, &acme.token)
            .send()
            .await
            .expect("send");
        assert_error(res, 401, "invalid_token").await;
    }
}

#[tokio::test]
async fn s01_over_budget_reads_no_partner_data() {
    over_budget_reads_no_partner_data(|_| {}).await;
}

#[tokio::test]
async fn s01_over_budget_reads_no_partner_data_with_redis_budgets() {
    // Keys of this test only, so tests running in parallel on the same Redis do not collide.
    let prefix = format!("test:{}:", uuid::Uuid::new_v4().simple());
    over_budget_reads_no_partner_data(|c| {
        c.redis_url = Some(REDIS_URL.into());
        c.redis_key_prefix = prefix;
    })
    .await;
}

/// A server that has not seen the token (another instance on the same Redis budgets) cannot
/// peek at the budget before its first lookup: its first request over budget is a 429 after a
/// read, and every one after that reads nothing.
#[tokio::test]
async fn s01_another_instance_reads_nothing_after_its_first_answer() {
    let prefix = format!("test:{}:", uuid::Uuid::new_v4().simple());
    let clock = mid_hour_clock();
    let app = TestApp::spawn_full(
        |c| {
            c.rate_limit = partner_http::Quota {
                limit: 2,
                window_secs: 3600,
            };
            c.redis_url = Some(REDIS_URL.into());
            c.redis_key_prefix = prefix;
        },
        clock.clone() as Arc<dyn Clock>,
    )
    .await;
    let (acme, delivery) = populate(&app, "acme", "acme").await;
    spend_every_budget(&app, &acme.token, &delivery).await;
    let other = app.sibling().await;
    let leads = "/api/v1/leads";
    let res = other
        .api(Method::GET, leads, &acme.token)
        .send()
        .await
        .expect("send");
    assert_error(res, 429, "rate_limited").await;
    hide_partner_data(&app, true).await;
    for _ in 0..3 {
        let res = other
            .api(Method::GET, leads, &acme.token)
            .send()
            .await
            .expect("send");
        let status = res.status();
        let text = res.text().await.expect("body");
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{text}");
    }
    hide_partner_data(&app, false).await;
}

/// N8 of issue 23's re-try: `n` requests of `token` for the leads page released together on
/// `app` when a window of 60 s has just opened, with every partner table hidden. Returns the
/// answers that are not the 429 (each of them reached partner data: a read of a hidden table
/// fails) and checks the headers of the 429s.
async fn burst_at_the_turn(app: &TestApp, token: &str, n: usize, now: i64) -> Vec<String> {
    let leads = "/api/v1/leads";
    let answers = futures_util::future::join_all((0..n).map(|_| async move {
        let res = app
            .api(Method::GET, leads, token)
            .send()
            .await
            .expect("send");
        let status = res.status();
        let header = |name: &str| {
            res.headers()
                .get(name)
                .and_then(|v| v.to_str().ok()?.parse::<i64>().ok())
        };
        let (retry, remaining) = (header("retry-after"), header("x-ratelimit-remaining"));
        let text = res.text().await.expect("body");
        (status, retry, remaining, text)
    }))
    .await;
    let reset = now - now.rem_euclid(60) + 60;
    let mut read = Vec::new();
    for (status, retry, remaining, text) in answers {
        if status == StatusCode::TOO_MANY_REQUESTS {
            assert!(text.contains("rate_limited"), "{text}");
            assert_eq!(retry, Some(reset - now), "Retry-After");
            assert_eq!(remaining, Some(0), "X-RateLimit-Remaining");
        } else {
            read.push(format!("{status} {text}"));
        }
    }
    read
}

const BURST: usize = 48;
const LIMIT: u32 = 3;

/// N8: a burst released when a window opens (the budget whole, so nothing looks spent) reads
/// partner data only for the requests the budget admits: the budget is charged before the read,
/// never after it. Before the fix every request of the burst passed the peek and read.
async fn a_burst_at_the_turn_reads_only_for_what_the_budget_admits(
    tweak: impl FnOnce(&mut Config),
    on_a_sibling: bool,
) {
    let clock = mid_hour_clock();
    let app = TestApp::spawn_full(
        |c| {
            c.rate_limit = partner_http::Quota {
                limit: LIMIT,
                window_secs: 60,
            };
            tweak(c);
        },
        clock.clone(),
    )
    .await;
    let acme = app.seed("acme", false).await;
    // The token is known to the instance that takes the burst (it authenticated there once), or
    // not (a sibling on the same Redis budgets that never saw it).
    let res = app
        .api(Method::GET, "/api/v1/leads", &acme.token)
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    let target = if on_a_sibling {
        Some(app.sibling().await)
    } else {
        None
    };
    // The next window: the whole budget again.
    clock.advance(time::Duration::seconds(60));
    let now = clock.now().unix_timestamp();
    assert!(hide_partner_data(&app, true).await >= 10, "partner tables");
    let read = burst_at_the_turn(target.as_ref().unwrap_or(&app), &acme.token, BURST, now).await;
    hide_partner_data(&app, false).await;
    assert_eq!(
        read.len(),
        LIMIT as usize,
        "of {BURST} requests released together at the window's turn, only the {LIMIT} the \
         budget admits may read partner data (each such read fails here); these did:\n{}",
        read.join("\n")
    );
}

/// The budget in the shared Redis, under a prefix of this test's own.
fn redis_budget() -> impl FnOnce(&mut partner_server::Config) {
    let prefix = format!("test:{}:", uuid::Uuid::new_v4().simple());
    move |c| {
        c.redis_url = Some(REDIS_URL.into());
        c.redis_key_prefix = prefix;
    }
}

#[tokio::test]
async fn n8_a_burst_at_the_windows_turn_reads_only_for_what_the_budget_admits() {
    a_burst_at_the_turn_reads_only_for_what_the_budget_admits(|_| {}, false).await;
}

#[tokio::test]
async fn n8_a_burst_at_the_windows_turn_reads_only_for_what_the_budget_admits_with_redis() {
    a_burst_at_the_turn_reads_only_for_what_the_budget_admits(redis_budget(), false).await;
}

/// N8 on an instance that never saw the token: it checks the token alone, charges, then reads.
#[tokio::test]
async fn n8_a_burst_on_an_instance_that_never_saw_the_token_reads_only_for_what_the_budget_admits()
{
    a_burst_at_the_turn_reads_only_for_what_the_budget_admits(redis_budget(), true).await;
}

/// N11 of issue 23's re-try: a 403 decided by who the caller is reads no partner data, even for
/// a token the process has seen (so its budget is charged before the read): a portal session
/// calling partner reads outside its scope (leads, orders, the events feed, whose requirement is
/// "not a portal session"), and a token whose account may not use DNA links. Every partner table
/// is renamed away, so a request that reached partner data fails instead of answering 403.
/// Before the fix each of them did a full read, answered 403 and got its unit back: unlimited
/// full reads. The 403s cost no budget (rulings.md: 403 comes before the rate limit), so
/// however many there are, none is a 429.
#[tokio::test]
async fn n11_a_403_decided_by_the_caller_reads_no_partner_data_for_a_token_already_seen() {
    let clock = mid_hour_clock();
    let app = TestApp::spawn_full(
        |c| {
            c.rate_limit = partner_http::Quota {
                limit: LIMIT,
                window_secs: 60,
            };
        },
        clock.clone(),
    )
    .await;
    let acme = app.seed("acme", false).await;
    let (code, _) = crate::portal::mint(&app, &acme.token).await;
    let (portal, _) = crate::portal::session(&app, &code).await;
    // Both tokens authenticate once in this process, within what they may call.
    let endpoints = "/api/v1/webhook-endpoints";
    let res = app
        .api(Method::GET, endpoints, &portal)
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK, "the portal's own call");
    let beta = app.seed("beta", false).await;
    let mut no_dna = partner_body(true);
    no_dna["dnaAccess"] = serde_json::json!(false);
    assert!(app.put_partner("beta", &no_dna).await.status().is_success());
    let res = app
        .api(Method::GET, "/api/v1/leads", &beta.token)
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK, "beta's leads");

    assert!(hide_partner_data(&app, true).await >= 10, "partner tables");
    let refused = [
        (portal.as_str(), "/api/v1/leads?includeTest=true&limit=200"),
        (portal.as_str(), "/api/v1/orders?limit=200"),
        (portal.as_str(), "/api/v1/events?limit=200"),
        (beta.token.as_str(), "/api/v1/dna-links"),
    ];
    let mut read = Vec::new();
    for (token, p) in refused {
        for _ in 0..3 * LIMIT {
            let res = app.api(Method::GET, p, token).send().await.expect("send");
            let status = res.status();
            let limited = res.headers().contains_key("x-ratelimit-limit");
            let text = res.text().await.expect("body");
            if status != StatusCode::FORBIDDEN || !text.contains("forbidden") {
                read.push(format!("GET {p}: {status} {text}"));
            }
            assert!(!limited, "GET {p}: a 403 comes before the rate limit");
        }
    }
    hide_partner_data(&app, false).await;
    assert!(
        read.is_empty(),
        "a 403 decided by the caller read partner data (each such read fails here), or was \
         refused otherwise:\n{}",
        read.join("\n")
    );
    // None of them cost budget: the links group of beta is whole, and so is its DNA path's.
    let res = app
        .api(Method::GET, "/api/v1/medical-intake-links", &beta.token)
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(
        res.headers()["x-ratelimit-remaining"],
        (LIMIT - 1).to_string().as_str(),
        "the {} refused DNA-link calls cost no unit of the links budget",
        3 * LIMIT
    );
}

/// N11b of issue 23's re-try: a token this process has seen, that stops authenticating (revoked
/// or rotated, or its partner deactivated), used to stay seen: each of its requests was charged,
/// ran its full read, failed the token check and was refunded, an unbudgeted loop of reads. Now
/// the first request after the change (which still reads, as the token was seen) forgets it, and
/// every request after that takes the token check alone: with every partner table renamed away,
/// the 2nd..Nth requests on every partner read still answer 401 / 403, never a failed read.
#[tokio::test]
async fn n11b_a_seen_token_that_stopped_authenticating_reads_no_partner_data_after_its_first_failure()
 {
    let app = TestApp::spawn_full(|_| {}, mid_hour_clock()).await;
    let (acme, delivery) = populate(&app, "acme", "acme").await;
    let beta = app.seed("beta", false).await;
    let leads = "/api/v1/leads";
    for token in [&acme.token, &beta.token] {
        let res = app
            .api(Method::GET, leads, token)
            .send()
            .await
            .expect("send");
        assert_eq!(res.status(), StatusCode::OK, "seen once");
    }
    // acme's token is revoked, beta is deactivated; the first request of each still reads.
    let res = app
        .internal(Method::DELETE, &format!("/tokens/{}", acme.token_id))
        .send()
        .await
        .expect("send");
    assert!(res.status().is_success(), "revoke: {}", res.status());
    let res = app.put_partner("beta", &partner_body(false)).await;
    assert!(res.status().is_success(), "deactivate: {}", res.status());
    let res = app
        .api(Method::GET, leads, &acme.token)
        .send()
        .await
        .expect("send");
    assert_error(res, 401, "invalid_token").await;
    let res = app
        .api(Method::GET, leads, &beta.token)
        .send()
        .await
        .expect("send");
    assert_error(res, 403, "forbidden").await;

    assert!(hide_partner_data(&app, true).await >= 10, "partner tables");
    let cases = [
        (
            acme.token.as_str(),
            StatusCode::UNAUTHORIZED,
            "invalid_token",
        ),
        (beta.token.as_str(), StatusCode::FORBIDDEN, "forbidden"),
    ];
    let mut read = Vec::new();
    for (token, expected, code) in cases {
        for r in READS {
            let p = path(r, &delivery);
            for _ in 0..2 {
                let res = app.api(Method::GET, &p, token).send().await.expect("send");
                let status = res.status();
                let text = res.text().await.expect("body");
                if status != expected || !text.contains(code) {
                    read.push(format!("GET {p}: {status} {text}"));
                }
            }
        }
    }
    hide_partner_data(&app, false).await;
    assert!(
        read.is_empty(),
        "a token that stopped authenticating read partner data after its first failure (each \
         such read fails here):\n{}",
        read.join("\n")
    );
}
