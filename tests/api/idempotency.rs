//! `Idempotency-Key` on every `POST` and `PATCH` of the partner and operator APIs (extensions
//! §8.3): replay byte for byte, the two conflict answers, the key's form and when it is checked,
//! per-caller scoping, concurrency on one and on two instances, expiry and pruning.

use std::sync::Arc;

use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use partner_domain::idempotency::IdempotencyService;
use partner_domain::kernel::clock::{Clock, FixedClock};
use reqwest::header::HeaderValue;
use reqwest::{Method, Response, StatusCode};
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::helpers::{TestApp, assert_error, body, eventually, lead_body, mid_hour_clock};

const SUBS: &str = "/api/v1/sub-accounts";
const KEY: &str = "Idempotency-Key";

async fn post_sub(app: &TestApp, token: &str, key: &str, b: &Value) -> Response {
    app.api(Method::POST, SUBS, token)
        .header(KEY, key)
        .json(b)
        .send()
        .await
        .expect("send")
}

fn replayed(res: &Response) -> bool {
    res.headers()
        .get("idempotent-replayed")
        .is_some_and(|v| v == "true")
}

async fn subs(app: &TestApp, token: &str) -> Vec<Value> {
    app.get_ok(SUBS, token).await["data"]
        .as_array()
        .expect("data")
        .clone()
}

async fn connect(app: &TestApp) -> AsyncPgConnection {
    app.db().await
}

#[tokio::test]
async fn the_same_request_is_answered_once_and_replayed_byte_for_byte() {
    let app = TestApp::spawn().await;
    let acme = app.seed("acme", false).await;
    let b = json!({ "subId": "7", "nickname": "Front desk" });
    let first = post_sub(&app, &acme.token, "k-1", &b).await;
    assert_eq!(first.status(), StatusCode::CREATED);
    assert!(!replayed(&first));
    let first_type = first.headers().get("content-type").cloned();
    let first_body = first.bytes().await.expect("body");
    for _ in 0..2 {
        let again = post_sub(&app, &acme.token, "k-1", &b).await;
        assert_eq!(again.status(), StatusCode::CREATED);
        assert!(replayed(&again));
        assert_eq!(again.headers().get("content-type").cloned(), first_type);
        assert!(again.headers().contains_key("x-ratelimit-limit"));
        assert_eq!(again.bytes().await.expect("body"), first_body);
    }
    assert_eq!(subs(&app, &acme.token).await.len(), 1);
    // Another token of the same partner is the same caller.
    let (_, other_token) = app.create_token(&acme.user_id).await;
    let again = post_sub(&app, &other_token, "k-1", &b).await;
    assert!(replayed(&again));
    // Without a key, nothing is kept: a second create is the ordinary 409.
    let res = app
        .api(Method::POST, SUBS, &acme.token)
        .json(&b)
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::CONFLICT);
    assert!(!replayed(&res));
}

#[tokio::test]
async fn another_method_path_query_or_body_under_a_kept_key_is_422() {
    let app = TestApp::spawn().await;
    let acme = app.seed("acme", false).await;
    let b = json!({ "subId": "7", "nickname": "Front desk" });
    assert_eq!(
        post_sub(&app, &acme.token, "k-2", &b).await.status(),
        StatusCode::CREATED
    );
    // Another body (a byte differs: the same JSON written otherwise counts as another body).
    let res = app
        .api(Method::POST, SUBS, &acme.token)
        .header(KEY, "k-2")
        .header("content-type", "application/json")
        .body(r#"{ "subId": "7", "nickname": "Front desk" }"#)
        .send()
        .await
        .expect("send");
    assert_error(res, 422, "idempotency_key_reused").await;
    // Another query string.
    let res = app
        .api(Method::POST, &format!("{SUBS}?x=1"), &acme.token)
        .header(KEY, "k-2")
        .json(&b)
        .send()
        .await
        .expect("send");
    assert_error(res, 422, "idempotency_key_reused").await;
    // Another path and method.
    let res = app
        .api(Method::POST, "/api/v1/webhook-endpoints", &acme.token)
        .header(KEY, "k-2")
        .json(&b)
        .send()
        .await
        .expect("send");
    assert_error(res, 422, "idempotency_key_reused").await;
    assert_eq!(subs(&app, &acme.token).await.len(), 1);
}

#[tokio::test]
async fn a_key_is_checked_after_authentication_and_before_validation() {
    let app = TestApp::spawn().await;
    let acme = app.seed("acme", false).await;
    let bad: [HeaderValue; 4] = [
        HeaderValue::from_static(""),
        HeaderValue::from_str(&"k".repeat(256)).expect("header"),
        HeaderValue::from_static("has space"),
        HeaderValue::from_bytes("clé".as_bytes()).expect("header"),
    ];
    for key in bad {
        // An invalid body too: the key is what is refused.
        let res = app
            .api(Method::POST, SUBS, &acme.token)
            .header(KEY, key.clone())
            .body("{")
            .send()
            .await
            .expect("send");
        assert!(res.headers().contains_key("x-ratelimit-limit"));
        let message = assert_error(res, 400, "invalid_request").await;
        assert!(message.contains("Idempotency-Key"), "{message}");
        // An unknown token is 401 first.
        let unknown = format!("pk_live_{}", "a".repeat(43));
        let res = app
            .api(Method::POST, SUBS, &unknown)
            .header(KEY, key.clone())
            .send()
            .await
            .expect("send");
        assert_error(res, 401, "invalid_token").await;
        // The operator API checks it after its token too.
        let res = app
            .internal(Method::POST, "/leads")
            .header(KEY, key)
            .body("{")
            .send()
            .await
            .expect("send");
        let message = assert_error(res, 400, "invalid_request").await;
        assert!(message.contains("Idempotency-Key"), "{message}");
    }
    let longest = "~".repeat(255);
    let res = post_sub(
        &app,
        &acme.token,
        &longest,
        &json!({ "subId": "8", "nickname": "n" }),
    )
    .await;
    assert_eq!(res.status(), StatusCode::CREATED);
}

#[tokio::test]
async fn a_4xx_answer_is_kept_too() {
    let app = TestApp::spawn().await;
    let acme = app.seed("acme", false).await;
    let b = json!({ "subId": "0", "nickname": "n" });
    let first = post_sub(&app, &acme.token, "k-400", &b).await;
    assert_eq!(first.status(), StatusCode::BAD_REQUEST);
    let first_body = first.bytes().await.expect("body");
    let again = post_sub(&app, &acme.token, "k-400", &b).await;
    assert_eq!(again.status(), StatusCode::BAD_REQUEST);
    assert!(replayed(&again));
    assert_eq!(again.bytes().await.expect("body"), first_body);
}

#[tokio::test]
async fn the_same_key_from_two_partners_is_two_keys() {
    let app = TestApp::spawn().await;
    let acme = app.seed("acme", false).await;
    let zeta = app.seed("zeta", false).await;
    let b = json!({ "subId": "7", "nickname": "Same" });
    let a = post_sub(&app, &acme.token, "shared", &b).await;
    let z = post_sub(&app, &zeta.token, "shared", &b).await;
    assert_eq!(a.status(), StatusCode::CREATED);
    assert_eq!(z.status(), StatusCode::CREATED);
    assert!(!replayed(&z), "zeta ran its own request");
    let (a, z) = (body(a).await, body(z).await);
    assert_ne!(a["data"]["id"], z["data"]["id"]);
    // The operator's keys are its own too.
    let res = app
        .internal(Method::POST, "/leads")
        .header(KEY, "shared")
        .json(&lead_body("acme", json!({})))
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::CREATED);
    assert!(!replayed(&res));
}

#[tokio::test]
async fn a_retried_operator_ingest_creates_one_lead_and_a_patch_is_replayed() {
    let app = TestApp::spawn().await;
    let acme = app.seed("acme", false).await;
    let b = lead_body("acme", json!({}));
    let mut ids = Vec::new();
    for i in 0..3 {
        let res = app
            .internal(Method::POST, "/leads")
            .header(KEY, "ingest-1")
            .json(&b)
            .send()
            .await
            .expect("send");
        assert_eq!(res.status(), StatusCode::CREATED);
        assert_eq!(replayed(&res), i > 0);
        ids.push(body(res).await["data"]["id"].clone());
    }
    assert!(ids.iter().all(|id| *id == ids[0]));
    let leads = app
        .get_ok("/api/v1/leads?includeTest=true", &acme.token)
        .await;
    assert_eq!(leads["data"].as_array().expect("data").len(), 1);

    let id = ids[0].as_str().expect("id");
    let patch = |phone: &'static str| {
        app.internal(Method::PATCH, &format!("/leads/{id}"))
            .header(KEY, "patch-1")
            .json(&json!({ "phone": phone }))
            .send()
    };
    let first = patch("+1 555 0101").await.expect("send");
    assert_eq!(first.status(), StatusCode::OK);
    let again = patch("+1 555 0101").await.expect("send");
    assert!(replayed(&again));
    assert_error(
        patch("+1 555 0102").await.expect("send"),
        422,
        "idempotency_key_reused",
    )
    .await;
}

/// A keyed request whose first unit of work fails (a `PATCH` of a lead that does not exist: the
/// lock finds nothing) answers its 404, and that answer is kept: the claim its unit of work took
/// rolled back with it, and the key was claimed again for the answer, not refused by itself. The
/// key then runs as any other: the same request replayed, another one 422, and a fresh key on a
/// lead that exists runs.
#[tokio::test]
async fn a_keyed_request_whose_first_write_fails_keeps_its_4xx() {
    let app = TestApp::spawn().await;
    app.seed("acme", false).await;
    let patch = |id: String, key: &'static str, phone: &'static str| {
        app.internal(Method::PATCH, &format!("/leads/{id}"))
            .header(KEY, key)
            .json(&json!({ "phone": phone }))
            .send()
    };
    let missing = "0190a0b0-0000-7000-8000-000000000000".to_owned();
    let first = patch(missing.clone(), "gone-1", "+1 555 0101")
        .await
        .expect("send");
    assert_eq!(first.status(), StatusCode::NOT_FOUND);
    assert!(!replayed(&first));
    let first_body = first.bytes().await.expect("body");
    let again = patch(missing.clone(), "gone-1", "+1 555 0101")
        .await
        .expect("send");
    assert_eq!(again.status(), StatusCode::NOT_FOUND);
    assert!(replayed(&again), "the 404 was kept");
    assert_eq!(again.bytes().await.expect("body"), first_body);
    assert_error(
        patch(missing, "gone-1", "+1 555 0102").await.expect("send"),
        422,
        "idempotency_key_reused",
    )
    .await;
    let lead = app
        .internal(Method::POST, "/leads")
        .json(&lead_body("acme", json!({})))
        .send()
        .await
        .expect("send");
    let id = body(lead).await["data"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let res = patch(id, "gone-2", "+1 555 0103").await.expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    assert!(!replayed(&res));
}

/// Sends a sub-account `POST` with `key` whose write waits on a table lock the returned
/// connection holds (in its transaction), and waits until the request holds its key.
async fn first_request_held(
    app: &TestApp,
    token: &str,
    key: &'static str,
    b: &Value,
) -> (
    AsyncPgConnection,
    tokio::task::JoinHandle<reqwest::Result<Response>>,
) {
    let mut lock = connect(app).await;
    diesel::sql_query("BEGIN")
        .execute(&mut lock)
        .await
        .expect("begin");
    diesel::sql_query("LOCK TABLE sub_accounts IN EXCLUSIVE MODE")
        .execute(&mut lock)
        .await
        .expect("lock");
    let req = app.api(Method::POST, SUBS, token).header(KEY, key).json(b);
    let first = tokio::spawn(async move { req.send().await });
    let url = app.config.database_url.clone();
    eventually("the first request holds the key", || {
        let url = url.clone();
        async move {
            let mut conn = AsyncPgConnection::establish(&url).await.ok()?;
            let n: Vec<Count> = diesel::sql_query(HELD_KEYS).load(&mut conn).await.ok()?;
            (n.into_iter().next()?.n == 1).then_some(())
        }
    })
    .await;
    (lock, first)
}

/// A request holding its key (its write blocked by a lock the test holds) makes every other
/// request with that key 409, on this instance and another, with its body or another; once it
/// answers, the same request is replayed everywhere.
#[tokio::test]
async fn while_the_first_request_runs_others_get_409_on_every_instance() {
    let app = TestApp::spawn().await;
    let other = app.sibling().await;
    let acme = app.seed("acme", false).await;
    let b = json!({ "subId": "9", "nickname": "Slow" });
    let (mut lock, first) = first_request_held(&app, &acme.token, "slow", &b).await;
    for instance in [&app, &other] {
        for body_ in [&b, &json!({ "subId": "10", "nickname": "Other" })] {
            let res = post_sub(instance, &acme.token, "slow", body_).await;
            assert_error(res, 409, "idempotency_key_in_use").await;
        }
    }
    diesel::sql_query("COMMIT")
        .execute(&mut lock)
        .await
        .expect("commit");
    let first = first.await.expect("task").expect("send");
    assert_eq!(first.status(), StatusCode::CREATED);
    assert!(!replayed(&first));
    let first_body = first.bytes().await.expect("body");
    for instance in [&app, &other] {
        let res = post_sub(instance, &acme.token, "slow", &b).await;
        assert!(replayed(&res));
        assert_eq!(res.bytes().await.expect("body"), first_body);
    }
    assert_eq!(subs(&app, &acme.token).await.len(), 1);
}

/// The keys claimed now: the advisory locks granted in the test's database (a claim is a lock
/// held by the transaction of the request's writes).
const HELD_KEYS: &str = "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' \
    AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())";

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

/// Requests with one key sent at once to two instances: exactly one runs; each other one gets
/// 409 or the kept answer.
#[tokio::test]
async fn concurrent_requests_with_one_key_on_two_instances_run_once() {
    let app = TestApp::spawn().await;
    let other = app.sibling().await;
    let acme = app.seed("acme", false).await;
    let b = json!({ "subId": "11", "nickname": "Race" });
    let mut tasks = Vec::new();
    for i in 0..12 {
        let instance = if i % 2 == 0 { &app } else { &other };
        let req = instance
            .api(Method::POST, SUBS, &acme.token)
            .header(KEY, "race")
            .json(&b);
        tasks.push(tokio::spawn(async move {
            let res = req.send().await.expect("send");
            let (status, again) = (res.status(), replayed(&res));
            (status, again, res.text().await.expect("body"))
        }));
    }
    let mut ran = Vec::new();
    let mut answers = Vec::new();
    for t in tasks {
        let (status, again, text) = t.await.expect("task");
        match (status, again) {
            (StatusCode::CREATED, false) => ran.push(text),
            (StatusCode::CREATED, true) => answers.push(text),
            (StatusCode::CONFLICT, false) => {
                assert!(text.contains("idempotency_key_in_use"), "{text}");
            }
            other => panic!("unexpected answer {other:?}: {text}"),
        }
    }
    assert_eq!(ran.len(), 1, "exactly one request ran");
    assert!(answers.iter().all(|a| *a == ran[0]));
    assert_eq!(subs(&app, &acme.token).await.len(), 1);
}

/// A replay is one request of its group's budget.
#[tokio::test]
async fn a_replay_counts_against_the_rate_limit() {
    let app = TestApp::spawn_full(
        |c| {
            c.rate_limit = partner_http::Quota {
                limit: 2,
                window_secs: 3600,
            };
        },
        mid_hour_clock(),
    )
    .await;
    let acme = app.seed("acme", false).await;
    let b = json!({ "subId": "7", "nickname": "n" });
    let first = post_sub(&app, &acme.token, "k", &b).await;
    assert_eq!(first.headers()["x-ratelimit-remaining"], "1");
    let again = post_sub(&app, &acme.token, "k", &b).await;
    assert!(replayed(&again));
    assert_eq!(again.headers()["x-ratelimit-remaining"], "0");
    let third = post_sub(&app, &acme.token, "k", &b).await;
    assert!(!replayed(&third));
    assert_error(third, 429, "rate_limited").await;
}

/// A kept answer lives 24 hours: then the key is free again, and maintenance prunes it. A claim
/// row that an earlier version wrote (it kept claims as rows with a lease of 60 s) holds its key
/// until its lease has run out.
#[tokio::test]
async fn keys_expire_after_24_hours_and_a_dead_claim_after_its_lease() {
    let clock = Arc::new(FixedClock::new(OffsetDateTime::now_utc()));
    let app = TestApp::spawn_full(|_| {}, clock.clone()).await;
    let acme = app.seed("acme", false).await;
    let first = post_sub(
        &app,
        &acme.token,
        "day",
        &json!({ "subId": "1", "nickname": "a" }),
    )
    .await;
    assert_eq!(first.status(), StatusCode::CREATED);
    clock.advance(time::Duration::hours(24) - time::Duration::seconds(1));
    let res = post_sub(
        &app,
        &acme.token,
        "day",
        &json!({ "subId": "2", "nickname": "b" }),
    )
    .await;
    assert_error(res, 422, "idempotency_key_reused").await;
    clock.advance(time::Duration::seconds(1));
    let res = post_sub(
        &app,
        &acme.token,
        "day",
        &json!({ "subId": "2", "nickname": "b" }),
    )
    .await;
    assert_eq!(
        res.status(),
        StatusCode::CREATED,
        "the expired key ran again"
    );

    // Pruning deletes what expired, nothing else.
    clock.advance(time::Duration::hours(24));
    let fresh = post_sub(
        &app,
        &acme.token,
        "fresh",
        &json!({ "subId": "3", "nickname": "c" }),
    )
    .await;
    assert_eq!(fresh.status(), StatusCode::CREATED);
    let store =
        Arc::new(partner_postgres::PgStore::new(&app.config.database_url, 2).expect("store"));
    let service = IdempotencyService::new(store, clock.clone() as Arc<dyn Clock>);
    assert_eq!(service.prune(500, 10).await.expect("prune"), 1);
    assert!(replayed(
        &post_sub(
            &app,
            &acme.token,
            "fresh",
            &json!({ "subId": "3", "nickname": "c" })
        )
        .await
    ));

    // A claim row of an earlier version: 409 until its lease ends, then the request runs.
    let mut conn = connect(&app).await;
    let now = clock.now();
    diesel::sql_query(
        "INSERT INTO idempotency_keys (caller, key, fingerprint, created_at, lease_until, expires_at) \
         VALUES ('partner:acme', 'dead', '\\x00', $1, $2, $3)",
    )
    .bind::<diesel::sql_types::Timestamptz, _>(now)
    .bind::<diesel::sql_types::Timestamptz, _>(now + time::Duration::seconds(60))
    .bind::<diesel::sql_types::Timestamptz, _>(now + time::Duration::hours(24))
    .execute(&mut conn)
    .await
    .expect("a dead claim");
    let b = json!({ "subId": "4", "nickname": "d" });
    assert_error(
        post_sub(&app, &acme.token, "dead", &b).await,
        409,
        "idempotency_key_in_use",
    )
    .await;
    clock.advance(time::Duration::seconds(60));
    let res = post_sub(&app, &acme.token, "dead", &b).await;
    assert_eq!(res.status(), StatusCode::CREATED);
    assert!(!replayed(&res));
}

/// A body over 1 MiB is 413 before the key is claimed: the key stays free.
#[tokio::test]
async fn an_oversized_body_claims_nothing() {
    let app = TestApp::spawn().await;
    let acme = app.seed("acme", false).await;
    let res = app
        .api(Method::POST, SUBS, &acme.token)
        .header(KEY, "big")
        .header("content-type", "application/json")
        .body(vec![b' '; (1 << 20) + 1])
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let res = post_sub(
        &app,
        &acme.token,
        "big",
        &json!({ "subId": "7", "nickname": "n" }),
    )
    .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    assert!(!replayed(&res));
}

/// A claim lasts as long as the transaction of the writes it guards: a request cut off from the
/// database mid-write (its connection ended, as when its process dies) leaves its key free at
/// once, not 409 for a lease, and nothing of it is stored.
#[tokio::test]
async fn a_claim_ends_with_its_transaction_when_its_connection_is_cut() {
    let app = TestApp::spawn().await;
    let acme = app.seed("acme", false).await;
    let b = json!({ "subId": "12", "nickname": "Cut" });
    let (mut lock, first) = first_request_held(&app, &acme.token, "cut", &b).await;
    assert_error(
        post_sub(&app, &acme.token, "cut", &b).await,
        409,
        "idempotency_key_in_use",
    )
    .await;
    // The connection of the request holding the key ends, as its process's would.
    let cut: Vec<Count> = diesel::sql_query(
        "SELECT count(pg_terminate_backend(pid)) AS n FROM pg_locks \
         WHERE locktype = 'advisory' AND granted \
         AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
    )
    .load(&mut lock)
    .await
    .expect("terminate");
    assert_eq!(cut[0].n, 1);
    let first = first.await.expect("task").expect("send");
    assert!(first.status().is_server_error(), "{}", first.status());
    diesel::sql_query("COMMIT")
        .execute(&mut lock)
        .await
        .expect("commit");
    let res = post_sub(&app, &acme.token, "cut", &b).await;
    assert_eq!(res.status(), StatusCode::CREATED);
    assert!(!replayed(&res), "the key ran again");
    assert_eq!(subs(&app, &acme.token).await.len(), 1);
}

/// The claim reads the key's row with its statement's snapshot, taken before its lock: an
/// answer another request committed in between (simulated here by writing it while this request
/// holds the claim) is not seen, so the request runs, but its own answer is not kept over the
/// other's, nor its writes committed: it answers the other's (the store, through the domain's
/// port).
#[tokio::test]
async fn an_answer_kept_between_the_claims_snapshot_and_its_lock_wins() {
    use partner_domain::idempotency::{
        Caller, Claim, End, Fingerprint, IdempotencyKey, KeptAnswer,
    };
    use partner_domain::kernel::ambient::Ambient;
    use partner_domain::kernel::readiness::Readiness;
    let app = TestApp::spawn().await;
    let clock = Arc::new(FixedClock::new(OffsetDateTime::now_utc()));
    let store =
        Arc::new(partner_postgres::PgStore::new(&app.config.database_url, 2).expect("store"));
    let service = IdempotencyService::new(store.clone(), clock.clone() as Arc<dyn Clock>);
    let fp = Fingerprint::of("POST", "/x", b"{}");
    let answer = |body: &[u8]| KeptAnswer {
        status: 201,
        content_type: None,
        body: body.to_vec(),
    };
    let mut other = connect(&app).await;
    for (key, end_with_kept) in [("late-kept", true), ("late-5xx", false)] {
        let ticket = service.ticket(
            &Caller::Operator,
            &IdempotencyKey::parse(key.as_bytes()).expect("key"),
            &fp,
        );
        let ambient = Ambient::new();
        service.arm(&ambient, &ticket);
        // The request's first statement claims the key: no row yet.
        ambient.scope(store.ping()).await.expect("claimed");
        let held: Vec<Count> = diesel::sql_query(HELD_KEYS)
            .load(&mut other)
            .await
            .expect("locks");
        assert_eq!(held[0].n, 1, "the request holds its key");
        diesel::sql_query(
            "INSERT INTO idempotency_keys \
             (caller, key, fingerprint, created_at, lease_until, expires_at, status, body) \
             VALUES ('operator', $1, $2, $3, $3, $4, 201, 'theirs')",
        )
        .bind::<diesel::sql_types::Text, _>(key)
        .bind::<diesel::sql_types::Bytea, _>(fp.as_bytes().as_slice())
        .bind::<diesel::sql_types::Timestamptz, _>(clock.now())
        .bind::<diesel::sql_types::Timestamptz, _>(clock.now() + time::Duration::hours(24))
        .execute(&mut other)
        .await
        .expect("the other request's answer");
        let mine = answer(b"mine");
        let failed = KeptAnswer {
            status: 503,
            ..answer(b"failed")
        };
        let end = if end_with_kept {
            End::Keep(&mine)
        } else {
            End::answered(&failed)
        };
        assert_eq!(
            service
                .finish(&ambient, &ticket, end)
                .await
                .expect("finish"),
            Some(Claim::Replay(answer(b"theirs"))),
            "{key}"
        );
    }
}

/// N10 of issue 23's re-try: a kept answer showing a secret once (a new endpoint's signing
/// secret, a rotation's, a custom header's value, an issued token's text) is replayed only to
/// the token that made the request: another token of the same partner, same key and request,
/// gets 422 `idempotency_key_reused` and not the secret, and the stored rows hold none of them
/// in clear. An answer without a secret is still replayed to every token of the partner (§8.3).
#[tokio::test]
async fn n10_a_kept_answer_with_a_secret_is_replayed_only_to_the_token_that_asked() {
    #[derive(diesel::QueryableByName)]
    struct Kept {
        #[diesel(sql_type = diesel::sql_types::Text)]
        key: String,
        #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Binary>)]
        body: Option<Vec<u8>>,
    }
    let app = TestApp::spawn().await;
    let acme = app.seed("acme", false).await;
    let (_, other) = app.create_token(&acme.user_id).await;
    let endpoints = "/api/v1/webhook-endpoints";
    let send = |token: &str, method: Method, path: &str, key: &str, b: &Value| {
        app.api(method, path, token).header(KEY, key).json(b).send()
    };
    let header_value = "Bearer sk_live_n10_header_value";
    let create = json!({ "url": "https://hooks.acme.invalid/n10", "events": ["lead.created"],
        "secret": true, "customHeader": { "name": "X-Api-Key", "value": header_value } });
    let res = send(&acme.token, Method::POST, endpoints, "n10-create", &create)
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::CREATED);
    let created = body(res).await;
    let secret = created["data"]["secret"]
        .as_str()
        .expect("secret")
        .to_owned();
    assert_eq!(created["data"]["customHeader"]["value"], header_value);
    let id = created["data"]["id"].as_str().expect("id").to_owned();
    let rotate_path = format!("{endpoints}/{id}");
    let rotate = json!({ "secret": true });
    let res = send(
        &acme.token,
        Method::PATCH,
        &rotate_path,
        "n10-rotate",
        &rotate,
    )
    .await
    .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    let rotated = body(res).await;
    let new_secret = rotated["data"]["secret"]
        .as_str()
        .expect("new secret")
        .to_owned();
    let shown = [secret.as_str(), new_secret.as_str(), header_value];

    for (method, path, key, b, first) in [
        (Method::POST, endpoints, "n10-create", &create, &created),
        (
            Method::PATCH,
            rotate_path.as_str(),
            "n10-rotate",
            &rotate,
            &rotated,
        ),
    ] {
        // Another token of the partner: a clear 422, no secret.
        let res = send(&other, method.clone(), path, key, b)
            .await
            .expect("send");
        assert_eq!(
            res.status(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "{method} {path}"
        );
        assert!(!replayed(&res));
        let text = res.text().await.expect("body");
        assert!(text.contains("idempotency_key_reused"), "{text}");
        for s in shown {
            assert!(
                !text.contains(s),
                "{method} {path}: another token saw a secret: {text}"
            );
        }
        // The token that asked: the kept answer, secret included.
        let res = send(&acme.token, method.clone(), path, key, b)
            .await
            .expect("send");
        assert!(replayed(&res), "{method} {path}");
        assert_eq!(
            &body(res).await,
            first,
            "{method} {path}: replayed as it was"
        );
    }
    // No secret in the answer: every token of the partner gets the replay, as before.
    let events = json!({ "events": ["lead.created", "order.created"] });
    let res = send(
        &acme.token,
        Method::PATCH,
        &rotate_path,
        "n10-events",
        &events,
    )
    .await
    .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    let res = send(&other, Method::PATCH, &rotate_path, "n10-events", &events)
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::OK);
    assert!(replayed(&res));
    // The operator's issued token: kept, sealed for the operator's token.
    let res = app
        .internal(Method::POST, &format!("/users/{}/tokens", acme.user_id))
        .header(KEY, "n10-token")
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::CREATED);
    let issued = body(res).await;
    let token_text = issued["data"]["token"].as_str().expect("token").to_owned();
    let res = app
        .internal(Method::POST, &format!("/users/{}/tokens", acme.user_id))
        .header(KEY, "n10-token")
        .send()
        .await
        .expect("send");
    assert!(replayed(&res));
    assert_eq!(body(res).await, issued);

    // What is stored: no secret in clear.
    let mut conn = connect(&app).await;
    let rows: Vec<Kept> = diesel::sql_query("SELECT key, body FROM idempotency_keys")
        .load(&mut conn)
        .await
        .expect("kept answers");
    assert_eq!(rows.len(), 4, "every answer was kept");
    for row in rows {
        let stored = row.body.unwrap_or_default();
        for s in shown.iter().copied().chain([token_text.as_str()]) {
            assert!(
                !stored.windows(s.len()).any(|w| w == s.as_bytes()),
                "key {}: a secret in clear in idempotency_keys",
                row.key
            );
        }
    }
}

#[derive(diesel::QueryableByName)]
struct Xmins {
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    lead: Option<String>,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    kept: Option<String>,
}

/// Issue 25: a keyed write and its kept answer commit in one transaction (the lead's row and
/// the key's row carry the same `xmin`), and the deliveries it wrote are announced once it has
/// committed (delivered with the fallback poll a minute away).
#[tokio::test]
async fn issue25_a_keyed_write_and_its_kept_answer_commit_in_one_transaction() {
    let rx = crate::receiver::Receiver::start().await;
    let app = rx
        .app(|c| c.webhook_poll_interval = std::time::Duration::from_secs(60))
        .await;
    let acme = app.seed("acme", false).await;
    app.create_webhook_endpoint(
        &acme.token,
        &json!({ "url": rx.url, "events": ["lead.created"] }),
    )
    .await;
    let res = app
        .internal(Method::POST, "/leads")
        .header(KEY, "one-commit")
        .json(&lead_body("acme", json!({})))
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), StatusCode::CREATED);
    let id = body(res).await["data"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let mut conn = connect(&app).await;
    let x: Xmins = diesel::sql_query(
        "SELECT (SELECT xmin::text FROM leads WHERE id = $1::uuid) AS lead, \
         (SELECT xmin::text FROM idempotency_keys WHERE key = 'one-commit' AND status = 201) AS kept",
    )
    .bind::<diesel::sql_types::Text, _>(&id)
    .get_result(&mut conn)
    .await
    .expect("xmins");
    assert!(
        x.lead.is_some() && x.kept.is_some(),
        "{:?} {:?}",
        x.lead,
        x.kept
    );
    assert_eq!(
        x.lead, x.kept,
        "the lead and its kept answer: one transaction"
    );
    let got = crate::helpers::eventually_within(
        std::time::Duration::from_secs(5),
        "the delivery, woken by the commit",
        || async {
            let got = rx.received();
            (!got.is_empty()).then_some(got)
        },
    )
    .await;
    assert_eq!(got[0].header("x-partner-event"), Some("lead.created"));
}
