//! Failure drills of issue 24 that fit in `cargo test`: each starts a PostgreSQL cluster of its
//! own ([`OwnCluster`]), never the shared one. The figures they print (`--nocapture`) are quoted in
//! docs/reliability.md.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use partner_server::config::Role;
use serde_json::{Value, json};

use crate::helpers::{TestApp, eventually_within, lead_body};
use crate::own_cluster::OwnCluster;
use crate::receiver::{Misbehaviour, Receiver};

/// One answer seen by the load: when it started and ended, its status, `Retry-After`, error
/// code, and the lead id of a 201.
#[derive(Debug, Clone)]
struct Seen {
    start: Instant,
    end: Instant,
    status: u16,
    retry_after: Option<String>,
    code: Option<String>,
    lead: Option<String>,
}

async fn observe(req: reqwest::RequestBuilder) -> Seen {
    let start = Instant::now();
    let (status, retry_after, body) = match req.send().await {
        Ok(res) => {
            let status = res.status().as_u16();
            let retry_after = res
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            (
                status,
                retry_after,
                res.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
        Err(_) => (0, None, Value::Null),
    };
    Seen {
        start,
        end: Instant::now(),
        status,
        retry_after,
        code: body["error"]["code"].as_str().map(str::to_owned),
        lead: (status == 201)
            .then(|| body["data"]["id"].as_str().map(str::to_owned))
            .flatten(),
    }
}

/// The answers the load has seen, with what asked (`"ingest"` or `"read"`).
type SeenLog = Arc<Mutex<Vec<(&'static str, Seen)>>>;

/// Operator ingest (leads of `partner`) and partner reads (with `token`) on `app`, one request
/// at a time each, paced at about 50 a second, until `stop`; every answer goes to `seen`.
fn start_load(
    app: &TestApp,
    token: &str,
    partner: &str,
    stop: &Arc<AtomicBool>,
    seen: &SeenLog,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut load = Vec::new();
    for what in ["ingest", "read"] {
        let (stop, seen) = (stop.clone(), seen.clone());
        let client = app.client.clone();
        let (address, token, partner) = (app.address.clone(), token.to_owned(), partner.to_owned());
        let ingest_url = format!("{address}/internal/v1/leads");
        load.push(tokio::spawn(async move {
            let mut pace = tokio::time::interval(Duration::from_millis(20));
            while !stop.load(Ordering::Relaxed) {
                pace.tick().await;
                let req = if what == "ingest" {
                    client
                        .post(&ingest_url)
                        .bearer_auth(crate::helpers::INTERNAL_TOKEN)
                        .json(&lead_body(&partner, json!({})))
                } else {
                    client
                        .get(format!("{address}/api/v1/leads?limit=5"))
                        .bearer_auth(&token)
                };
                let s = observe(req).await;
                seen.lock().expect("lock").push((what, s));
            }
        }));
    }
    load
}

/// How long after `at` the first 2xx of the load ended (waits for it, up to 10 s).
async fn first_success_after(seen: &SeenLog, at: Instant, what: &str) -> Duration {
    let first = eventually_within(Duration::from_secs(10), what, || async {
        seen.lock()
            .expect("lock")
            .iter()
            .filter(|(_, s)| s.start >= at && (200..300).contains(&s.status))
            .map(|(_, s)| s.end)
            .min()
    })
    .await;
    first.saturating_duration_since(at)
}

/// Lets the load run 2 s past `after`, stops it, and returns everything it saw.
async fn stop_load(
    after: Instant,
    stop: &AtomicBool,
    load: Vec<tokio::task::JoinHandle<()>>,
    seen: &SeenLog,
) -> Vec<(&'static str, Seen)> {
    eventually_within(Duration::from_secs(10), "load after recovery", || async {
        (after.elapsed() >= Duration::from_secs(2)).then_some(())
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    for l in load {
        l.await.expect("load task");
    }
    seen.lock().expect("lock").clone()
}

/// Drill 1 (short form): PostgreSQL stopped for 3 s and started again under operator ingest and
/// partner reads, with deliveries to two endpoints by a worker in another process role.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_stopped_and_started_under_load_answers_503_then_recovers_and_loses_nothing() {
    let Some(pg) = tokio::task::spawn_blocking(OwnCluster::start)
        .await
        .expect("join")
    else {
        return;
    };
    let pg = Arc::new(pg);
    let rx = Receiver::start().await;
    // The fallback poll is 5 s away: deliveries within a second after the restart show that the
    // LISTEN is back.
    let api = TestApp::spawn_on_url(&pg.url("partner"), |c| {
        rx.configure(c);
        c.role = Role::Api;
        c.webhook_poll_interval = Duration::from_secs(5);
    })
    .await;
    let mut worker_config = api.config.clone();
    worker_config.role = Role::Worker;
    let _worker = TestApp::on_database(worker_config).await;
    let s = api.seed("acme", false).await;
    for _ in 0..2 {
        api.create_webhook_endpoint(
            &s.token,
            &json!({ "url": rx.url, "events": ["lead.created"] }),
        )
        .await;
    }

    let stop = Arc::new(AtomicBool::new(false));
    let seen: SeenLog = Arc::default();
    let load = start_load(&api, &s.token, "acme", &stop, &seen);
    let leads_ok = |seen: &[(&str, Seen)]| seen.iter().filter(|(_, s)| s.status == 201).count();
    eventually_within(Duration::from_secs(10), "load running", || async {
        (leads_ok(&seen.lock().expect("lock")) >= 20).then_some(())
    })
    .await;

    let p = pg.clone();
    tokio::task::spawn_blocking(move || p.stop())
        .await
        .expect("join");
    let down_at = Instant::now();
    // Down for 3 s of load.
    eventually_within(
        Duration::from_secs(10),
        "3 s of load while down",
        || async { (down_at.elapsed() >= Duration::from_secs(3)).then_some(()) },
    )
    .await;
    // The database may accept connections before `pg_ctl start -w` returns (it polls): the
    // window "down" ends when the start begins.
    let starting_at = Instant::now();
    let p = pg.clone();
    tokio::task::spawn_blocking(move || p.pg_ctl_start())
        .await
        .expect("join");
    let up_at = Instant::now();
    let recovery = first_success_after(&seen, up_at, "a 2xx after the restart").await;
    let seen = stop_load(up_at, &stop, load, &seen).await;

    // While down (requests begun after the stop and ended before the start): 503 unavailable
    // with Retry-After: 1, each within a second. Never a 500, never a transport error.
    let down: Vec<&Seen> = seen
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s.start >= down_at && s.end <= starting_at)
        .collect();
    assert!(down.len() > 50, "load while down: {}", down.len());
    let mut slowest = Duration::ZERO;
    for s in &down {
        assert_eq!(
            s.status,
            503,
            "{s:?}, {:?} after the stop, {:?} before the start",
            s.start - down_at,
            starting_at - s.end
        );
        assert_eq!(s.code.as_deref(), Some("unavailable"), "{s:?}");
        assert_eq!(s.retry_after.as_deref(), Some("1"), "{s:?}");
        slowest = slowest.max(s.end - s.start);
    }
    assert!(
        slowest <= Duration::from_millis(1100),
        "slowest answer while down: {slowest:?}"
    );
    for (what, s) in &seen {
        assert!(
            s.status != 0 && s.status != 500 && (s.status < 500 || s.status == 503),
            "{what}: {s:?}"
        );
    }
    assert!(
        recovery <= Duration::from_secs(1),
        "first success {recovery:?} after the restart"
    );

    // Every lead answered 201 is delivered to both endpoints: two delivery ids per lead, and a
    // delivery seen twice only under its own id.
    let ok: HashSet<String> = seen.iter().filter_map(|(_, s)| s.lead.clone()).collect();
    let delivered = eventually_within(
        Duration::from_secs(30),
        "every 201 lead delivered twice",
        || async {
            let mut by_lead: HashMap<String, HashSet<String>> = HashMap::new();
            for r in rx.received() {
                let b = r.json();
                if let (Some(lead), Some(id)) = (
                    b["data"]["lead"]["id"].as_str(),
                    r.header("x-partner-delivery"),
                ) {
                    by_lead
                        .entry(lead.to_owned())
                        .or_default()
                        .insert(id.to_owned());
                }
            }
            ok.iter()
                .all(|l| by_lead.get(l).is_some_and(|d| d.len() == 2))
                .then_some(by_lead)
        },
    )
    .await;
    for (lead, ids) in &delivered {
        assert!(
            ids.len() <= 2,
            "lead {lead} under {} delivery ids",
            ids.len()
        );
    }

    // Wake-ups are back without the fallback poll: three new leads, each delivered within a
    // second (a poll every 5 s would meet that by chance once in 125).
    let mut wake = Duration::ZERO;
    for _ in 0..3 {
        let before = rx.received().len();
        let t = Instant::now();
        api.ingest_lead(&lead_body("acme", json!({}))).await;
        eventually_within(
            Duration::from_secs(1),
            "a delivery woken by LISTEN",
            || async { (rx.received().len() >= before + 2).then_some(()) },
        )
        .await;
        wake = wake.max(t.elapsed());
    }
    eprintln!(
        "drill 1: {} answers while down, slowest {slowest:?}; first success {recovery:?} after the restart; {} leads answered 201, all delivered to both endpoints; new leads delivered within {wake:?} of their ingest",
        down.len(),
        ok.len()
    );
}

/// Drill 2: PostgreSQL crashes (`kill -9` of the postmaster, then crash recovery) in the middle
/// of a batch of deliveries: none is lost, and a delivery seen twice is seen under one id.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_postgres_crash_mid_batch_loses_no_delivery_and_duplicates_keep_their_id() {
    let Some(pg) = tokio::task::spawn_blocking(OwnCluster::start)
        .await
        .expect("join")
    else {
        return;
    };
    let pg = Arc::new(pg);
    // 20 ms a delivery, one at a time: the batch is still going when the database dies.
    let rx = Receiver::start_misbehaving(Misbehaviour::Slow(Duration::from_millis(20))).await;
    let app = TestApp::spawn_on_url(&pg.url("partner"), |c| {
        rx.configure(c);
        c.webhook_endpoint_concurrency = 1;
        c.webhook_poll_interval = Duration::from_millis(200);
    })
    .await;
    let s = app.seed("acme", false).await;
    app.create_webhook_endpoint(
        &s.token,
        &json!({ "url": rx.url, "events": ["lead.created"] }),
    )
    .await;
    let mut leads = HashSet::new();
    for _ in 0..300 {
        let lead = app.ingest_lead(&lead_body("acme", json!({}))).await;
        leads.insert(lead["id"].as_str().expect("id").to_owned());
    }
    rx.wait_for(30).await;
    let p = pg.clone();
    tokio::task::spawn_blocking(move || {
        p.crash();
        p.pg_ctl_start();
    })
    .await
    .expect("join");
    let at_crash = rx.received().len();

    // Deliveries whose outcome the crash lost are due again when their lease runs out.
    let by_lead = eventually_within(Duration::from_secs(60), "every lead delivered", || async {
        let mut by_lead: HashMap<String, HashSet<String>> = HashMap::new();
        for r in rx.received() {
            let b = r.json();
            if let (Some(lead), Some(id)) = (
                b["data"]["lead"]["id"].as_str(),
                r.header("x-partner-delivery"),
            ) {
                by_lead
                    .entry(lead.to_owned())
                    .or_default()
                    .insert(id.to_owned());
            }
        }
        leads
            .iter()
            .all(|l| by_lead.contains_key(l))
            .then_some(by_lead)
    })
    .await;
    for (lead, ids) in &by_lead {
        assert_eq!(ids.len(), 1, "lead {lead} delivered under {ids:?}");
    }
    let received = rx.received().len();
    eprintln!(
        "drill 2: {at_crash} of 300 delivered when the crashed database was back up; all 300 delivered, {} requests in all ({} repeated under their own id)",
        received,
        received - leads.len()
    );
}

/// Drill 5: SIGTERM with a request in flight (its body half sent), a delivery in flight (the
/// receiver takes 1.5 s) and operator ingest on fresh connections through the signal: the
/// request is answered and its write kept, the delivery is recorded, `/readyz` answers 503 at
/// once while the drain still serves, every connection the server accepted is answered (201, or
/// 503 `unavailable` with `Retry-After: 1` when it was still queued as the listener stopped; the
/// others are refused at connect, nothing sent), and the process exits within the attempt timeout
/// plus a few seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_answers_the_request_in_flight_records_the_delivery_in_flight_and_exits_soon() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rx = Receiver::start_misbehaving(Misbehaviour::Slow(Duration::from_millis(1500))).await;
    let mut server = crate::process::LoggedServer::start_with(
        "info",
        &[
            (
                "PARTNER_WEBHOOK_CA_FILE",
                rx.ca_file.to_string_lossy().into_owned(),
            ),
            ("PARTNER_WEBHOOK_ALLOW_PRIVATE", "true".into()),
            ("PARTNER_WEBHOOK_TIMEOUT", "3s".into()),
            ("PARTNER_SHUTDOWN_DRAIN", "2s".into()),
        ],
    )
    .await;
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    server.seed_with_endpoint(&client, "acme", &rx.url).await;
    let res = server
        .internal(&client, reqwest::Method::POST, "/leads")
        .json(&lead_body("acme", json!({})))
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), 201);
    // The delivery is in flight: the receiver has the request and answers in 1.5 s.
    rx.wait_for(1).await;

    // A request in flight: its head and half its body sent.
    let lead =
        serde_json::to_vec(&lead_body("acme", json!({ "firstName": "Inflight" }))).expect("json");
    let host = server.address.trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(&host)
        .await
        .expect("connect");
    let head = format!(
        "POST /internal/v1/leads HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        crate::helpers::INTERNAL_TOKEN,
        lead.len()
    );
    stream.write_all(head.as_bytes()).await.expect("head");
    let (first, rest) = lead.split_at(lead.len() / 2);
    stream.write_all(first).await.expect("half the body");
    // Nothing outside the server shows that it has read the head; a moment lets it, so that the
    // signal finds a request begun, the case this part of the drill is about.
    tokio::time::sleep(Duration::from_millis(300)).await;

    // And load: operator ingest on fresh connections, 8 at a time, through the signal. Each
    // request is answered (201; or 503 `unavailable` with `Retry-After: 1` when its connection
    // was still queued as the listener stopped) or never sent (its connection refused or not
    // completed: the kernel drops new connection attempts once the drain is over); never cut.
    let stop = Arc::new(AtomicBool::new(false));
    let outcomes: Arc<Mutex<Vec<(Instant, Load)>>> = Arc::default();
    let mut load = Vec::new();
    for _ in 0..8 {
        let (stop, outcomes) = (stop.clone(), outcomes.clone());
        let url = format!("{}/internal/v1/leads", server.address);
        let fresh = reqwest::Client::builder()
            .no_proxy()
            .pool_max_idle_per_host(0)
            .connect_timeout(Duration::from_secs(2))
            .build()
            .expect("client");
        load.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let started = Instant::now();
                let r = fresh
                    .post(&url)
                    .bearer_auth(crate::helpers::INTERNAL_TOKEN)
                    .json(&lead_body("acme", json!({ "firstName": "Load" })))
                    .send()
                    .await;
                let outcome = match r {
                    Ok(res) => {
                        let status = res.status().as_u16();
                        let retry_after = res
                            .headers()
                            .get("retry-after")
                            .and_then(|v| v.to_str().ok())
                            .map(str::to_owned);
                        let b = res.json::<Value>().await.unwrap_or(Value::Null);
                        Load::Answered(
                            status,
                            retry_after,
                            b["error"]["code"].as_str().map(str::to_owned),
                        )
                    }
                    Err(e) if e.is_connect() => Load::NotConnected,
                    Err(e) => Load::Cut(format!("{e:?}")),
                };
                let refused = matches!(outcome, Load::NotConnected);
                outcomes.lock().expect("lock").push((started, outcome));
                if refused {
                    break;
                }
            }
        }));
    }
    eventually_within(Duration::from_secs(10), "load running", || async {
        (outcomes.lock().expect("lock").len() >= 20).then_some(())
    })
    .await;

    let signalled = Instant::now();
    server.sigterm();
    stream.write_all(rest).await.expect("the rest of the body");
    // Readiness says 503 at once, while the drain (2 s) still serves the load.
    let probe = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_millis(500))
        .build()
        .expect("client");
    // The readiness gauge turns 0 at the signal by itself, before anything calls `/readyz`
    // (a scrape during the drain must not show the stopping process as ready).
    eventually_within(Duration::from_millis(800), "partner_ready 0", || async {
        let scraped = probe
            .get(format!("{}/metrics", server.metrics_address))
            .send()
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        scraped
            .lines()
            .any(|l| l == "partner_ready 0")
            .then_some(())
    })
    .await;
    let unready = eventually_within(Duration::from_millis(1800), "/readyz 503", || async {
        let res = probe
            .get(format!("{}/readyz", server.address))
            .send()
            .await
            .ok()?;
        (res.status() == 503).then(Instant::now)
    })
    .await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    assert!(
        answer.starts_with("HTTP/1.1 201"),
        "the request in flight: {answer}"
    );

    let status = server.wait_exit().await;
    let exited = signalled.elapsed();
    stop.store(true, Ordering::Relaxed);
    for l in load {
        l.await.expect("load task");
    }
    let outcomes = outcomes.lock().expect("lock").clone();
    let wrong: Vec<&Load> = outcomes
        .iter()
        .map(|(_, o)| o)
        .filter(|o| match o {
            Load::Answered(201, _, _) | Load::NotConnected => false,
            Load::Answered(503, retry_after, code) => {
                retry_after.as_deref() != Some("1") || code.as_deref() != Some("unavailable")
            }
            _ => true,
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "requests cut or wrongly answered by the shutdown: {wrong:?}"
    );
    let created = outcomes
        .iter()
        .filter(|(_, o)| matches!(o, Load::Answered(201, _, _)))
        .count();
    let unavailable = outcomes
        .iter()
        .filter(|(_, o)| matches!(o, Load::Answered(503, _, _)))
        .count();
    let served_unready = outcomes
        .iter()
        .filter(|(at, o)| *at >= unready && matches!(o, Load::Answered(201, _, _)))
        .count();
    assert!(
        served_unready > 0,
        "the drain served nothing after /readyz said 503: {outcomes:?}"
    );
    assert!(status.success(), "{status:?}");
    assert!(
        exited <= Duration::from_secs(3 + 7),
        "exit {exited:?} after SIGTERM (attempt timeout 3 s, drain 2 s)"
    );

    // The delivery in flight at the signal was recorded delivered; the lead sent in flight is
    // kept.
    let log = server.log();
    let database_url = server.database_url.clone();
    let counts = {
        use diesel::sql_types::{BigInt, Text};
        use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
        #[derive(diesel::QueryableByName)]
        struct N {
            #[diesel(sql_type = BigInt)]
            n: i64,
        }
        let mut conn = AsyncPgConnection::establish(&database_url)
            .await
            .expect("connect");
        let delivered = diesel::sql_query(
            "SELECT count(*) AS n FROM webhook_deliveries WHERE status = 'delivered'",
        )
        .get_result::<N>(&mut conn)
        .await
        .expect("count")
        .n;
        let inflight_lead =
            diesel::sql_query("SELECT count(*) AS n FROM leads WHERE first_name = $1")
                .bind::<Text, _>("Inflight")
                .get_result::<N>(&mut conn)
                .await
                .expect("count")
                .n;
        let load_leads = diesel::sql_query("SELECT count(*) AS n FROM leads WHERE first_name = $1")
            .bind::<Text, _>("Load")
            .get_result::<N>(&mut conn)
            .await
            .expect("count")
            .n;
        (delivered, inflight_lead, load_leads)
    };
    server.stop().await;
    assert!(
        counts.0 >= 1,
        "the delivery in flight was recorded: {counts:?}\n{log}"
    );
    assert_eq!(counts.1, 1, "the lead answered 201 in flight is kept");
    assert_eq!(
        usize::try_from(counts.2).unwrap_or(0),
        created,
        "every lead of the load answered 201 is kept"
    );
    eprintln!(
        "drill 5: exit {exited:?} after SIGTERM; /readyz 503 after {:?}; request in flight answered 201 and kept; {} delivery recorded delivered; load: {created} leads answered 201 (all kept; {served_unready} of them begun after /readyz said 503), {unavailable} answered 503 unavailable (queued as the listener stopped), {} not connected, none cut",
        unready.saturating_duration_since(signalled),
        counts.0,
        outcomes.len() - created - unavailable
    );
}

/// What one request of drill 5's load came to.
#[derive(Debug, Clone)]
enum Load {
    /// Status, `Retry-After`, error code.
    Answered(u16, Option<String>, Option<String>),
    /// The connection was refused or never completed: nothing was sent.
    NotConnected,
    /// Anything else: a request cut (the error, shown by the assertion).
    Cut(#[allow(dead_code)] String),
}

/// Connections of another client on `url`, opened until the server refuses one (at most
/// `most`): the open ones, and the refusal.
async fn open_until_refused(
    url: &str,
    most: u32,
) -> (Vec<diesel_async::AsyncPgConnection>, Option<String>) {
    use diesel_async::AsyncConnection;
    let mut held = Vec::new();
    for _ in 0..most {
        match diesel_async::AsyncPgConnection::establish(url).await {
            Ok(c) => held.push(c),
            Err(e) => return (held, Some(e.to_string())),
        }
    }
    (held, None)
}

/// Drill 3: another client takes every connection PostgreSQL allows while the server answers
/// partner reads and operator ingest, and the server's own connections are cut (so it must open
/// new ones, as after a restart of the server or a network blip). Each request waits at most the
/// pool's timeout and answers 503 `unavailable` with `Retry-After: 1`, never hangs, never
/// another 5xx; when the other client lets go, the server recovers within a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn connections_exhausted_by_another_client_answer_503_in_time_then_recover() {
    use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
    const SLOTS: u32 = 20;
    let Some(pg) = tokio::task::spawn_blocking(|| OwnCluster::start_with_max_connections(SLOTS))
        .await
        .expect("join")
    else {
        return;
    };
    let api = TestApp::spawn_on_url(&pg.url("partner"), |_| {}).await;
    let s = api.seed("acme", false).await;
    let stop = Arc::new(AtomicBool::new(false));
    let seen: SeenLog = Arc::default();
    let load = start_load(&api, &s.token, "acme", &stop, &seen);
    let ok_since = |seen: &[(&str, Seen)], t: Instant| {
        seen.iter()
            .filter(|(_, s)| s.start >= t && (200..300).contains(&s.status))
            .count()
    };
    let began = Instant::now();
    eventually_within(Duration::from_secs(10), "load running", || async {
        (ok_since(&seen.lock().expect("lock"), began) >= 40).then_some(())
    })
    .await;

    // The other client: while the server's database takes no new connection, its connections
    // are cut, and every slot of the cluster is taken (connecting to another database); then
    // the server's database takes connections again, and finds no slot.
    let mut admin = AsyncPgConnection::establish(&pg.url("postgres"))
        .await
        .expect("admin connection");
    diesel::sql_query("ALTER DATABASE partner ALLOW_CONNECTIONS false")
        .execute(&mut admin)
        .await
        .expect("alter");
    let cut_at = Instant::now();
    diesel::sql_query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'partner'",
    )
    .execute(&mut admin)
    .await
    .expect("terminate");
    #[derive(diesel::QueryableByName)]
    struct Count {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    let backends = |which: &'static str| {
        diesel::sql_query(format!(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE {which}"
        ))
    };
    let cut = Instant::now();
    // Polling for the backends to exit, not waiting for a fixed time.
    while backends("datname = 'partner'")
        .get_result::<Count>(&mut admin)
        .await
        .expect("count")
        .n
        > 0
    {
        assert!(
            cut.elapsed() < Duration::from_secs(5),
            "the server's backends linger"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A backend that is exiting still holds its slot for a moment: topped up until two rounds
    // 100 ms apart open nothing more.
    // The server's liveness probe, refused by the database, keeps trying (every 250 ms while it
    // has the database marked unreachable): each try holds a slot for a moment, so a refusal
    // seen then is topped up again once the slots are counted.
    let mut held = Vec::new();
    let mut refusal = None;
    let mut clients = 0;
    for _ in 0..20 {
        let mut quiet = 0;
        while quiet < 2 && held.len() < SLOTS as usize {
            let most = SLOTS - u32::try_from(held.len()).expect("small");
            let (more, refused) = open_until_refused(&pg.url("postgres"), most).await;
            quiet = if more.is_empty() { quiet + 1 } else { 0 };
            held.extend(more);
            refusal = refused;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        clients = backends("backend_type = 'client backend'")
            .get_result::<Count>(&mut admin)
            .await
            .expect("count")
            .n;
        if clients == i64::from(SLOTS) {
            break;
        }
    }
    let refusal = refusal.expect("the cluster refuses a connection at last");
    assert!(
        refusal.contains("too many clients"),
        "refused: {refusal} after {} connections",
        held.len()
    );
    assert_eq!(
        clients,
        i64::from(SLOTS),
        "every slot held by the other client"
    );
    diesel::sql_query("ALTER DATABASE partner ALLOW_CONNECTIONS true")
        .execute(&mut admin)
        .await
        .expect("alter");
    let full_at = Instant::now();
    // Exhausted for 3 s of load.
    eventually_within(
        Duration::from_secs(10),
        "3 s of load while exhausted",
        || async { (full_at.elapsed() >= Duration::from_secs(3)).then_some(()) },
    )
    .await;
    let ready = api
        .request(reqwest::Method::GET, "/readyz")
        .send()
        .await
        .expect("readyz")
        .status();
    let held_count = held.len();
    let released_at = Instant::now();
    drop(held);
    drop(admin);
    let recovery =
        first_success_after(&seen, released_at, "a 2xx after the connections are freed").await;
    let seen = stop_load(released_at, &stop, load, &seen).await;

    assert_eq!(ready, 503, "/readyz while exhausted");
    let exhausted: Vec<&Seen> = seen
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s.start >= full_at && s.end <= released_at)
        .collect();
    assert!(
        exhausted.len() > 50,
        "load while exhausted: {}",
        exhausted.len()
    );
    let mut slowest = Duration::ZERO;
    for s in &exhausted {
        assert_eq!(
            s.status,
            503,
            "{s:?}, {:?} after exhaustion",
            s.start - full_at
        );
        assert_eq!(s.code.as_deref(), Some("unavailable"), "{s:?}");
        assert_eq!(s.retry_after.as_deref(), Some("1"), "{s:?}");
        slowest = slowest.max(s.end - s.start);
    }
    assert!(
        slowest <= Duration::from_millis(1100),
        "slowest answer while exhausted: {slowest:?}"
    );
    // From the cut to the end, including the moments in between: 2xx or §11's 503, nothing else.
    for (what, s) in seen.iter().filter(|(_, s)| s.end >= cut_at) {
        assert!(
            (200..300).contains(&s.status)
                || (s.status == 503 && s.code.as_deref() == Some("unavailable")),
            "{what}: {s:?}"
        );
    }
    assert!(
        recovery <= Duration::from_secs(1),
        "first success {recovery:?} after the connections were freed"
    );

    // Every lead answered 201 is there.
    let ok: Vec<String> = seen.iter().filter_map(|(_, s)| s.lead.clone()).collect();
    let ids: Vec<uuid::Uuid> = ok.iter().map(|l| l.parse().expect("uuid")).collect();
    #[derive(diesel::QueryableByName)]
    struct N {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    let mut conn = AsyncPgConnection::establish(&pg.url("partner"))
        .await
        .expect("connect");
    let kept = diesel::sql_query("SELECT count(*) AS n FROM leads WHERE id = ANY($1)")
        .bind::<diesel::sql_types::Array<diesel::sql_types::Uuid>, _>(&ids)
        .get_result::<N>(&mut conn)
        .await
        .expect("count")
        .n;
    assert_eq!(
        usize::try_from(kept).expect("count"),
        ok.len(),
        "leads answered 201 kept"
    );
    eprintln!(
        "drill 3: {held_count} connections held by another client; {} answers while exhausted, all 503, slowest {slowest:?}; first success {recovery:?} after they were freed; {} leads answered 201, all kept",
        exhausted.len(),
        ok.len()
    );
}

/// The `X-RateLimit-Remaining` of a partner read on `app` with `token` (which must answer 200).
async fn remaining(app: &TestApp, token: &str) -> i64 {
    let res = app
        .api(reqwest::Method::GET, "/api/v1/leads?limit=1", token)
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), 200, "a read on {}", app.address);
    res.headers()["x-ratelimit-remaining"]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("integer")
}

/// Whether `a` and `b` charge one budget for `token`: reads on a, b, a count down by one each.
async fn one_budget(a: &TestApp, b: &TestApp, token: &str) -> bool {
    let first = remaining(a, token).await;
    let second = remaining(b, token).await;
    let third = remaining(a, token).await;
    second == first - 1 && third == second - 1
}

/// Drill 4: Redis stopped and started again under two server instances that share budgets
/// through it, with load on both: no 5xx while it is down (§5's fail-open), and once it is back
/// the two share one budget again within a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_stopped_and_started_under_two_instances_fails_open_then_shares_budgets_again() {
    let Some(mut redis) = tokio::task::spawn_blocking(crate::own_cluster::OwnRedis::start)
        .await
        .expect("join")
    else {
        return;
    };
    let url = redis.url();
    // One window holds the whole drill, and the budget is never spent.
    let a = TestApp::spawn_full(
        |c| {
            c.rate_limit = partner_http::Quota {
                limit: 1_000_000,
                window_secs: 3600,
            };
            c.redis_url = Some(url);
            c.redis_key_prefix = "drill4:".into();
        },
        crate::helpers::mid_hour_clock(),
    )
    .await;
    let b = a.sibling().await;
    let s = a.seed("acme", false).await;
    // The probe's own token, so that the load does not move its budget.
    let (_, probe) = a.create_token(&s.user_id).await;
    assert!(
        one_budget(&a, &b, &probe).await,
        "one budget before the stop"
    );

    let stop = Arc::new(AtomicBool::new(false));
    let seen: SeenLog = Arc::default();
    let mut load = start_load(&a, &s.token, "acme", &stop, &seen);
    load.extend(start_load(&b, &s.token, "acme", &stop, &seen));
    tokio::time::sleep(Duration::from_millis(500)).await;

    redis = tokio::task::spawn_blocking(move || {
        redis.stop();
        redis
    })
    .await
    .expect("join");
    let down_at = Instant::now();
    // Down for 3 s of load, the probe reading on both instances meanwhile.
    while down_at.elapsed() < Duration::from_secs(3) {
        remaining(&a, &probe).await;
        remaining(&b, &probe).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let starting_at = Instant::now();
    redis = tokio::task::spawn_blocking(move || {
        redis.start_again();
        redis
    })
    .await
    .expect("join");
    let up_at = Instant::now();
    let shared_at = eventually_within(Duration::from_secs(10), "one budget again", || async {
        one_budget(&a, &b, &probe).await.then(Instant::now)
    })
    .await;
    let rejoined = shared_at.saturating_duration_since(up_at);
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    for l in load {
        l.await.expect("load task");
    }
    drop(redis);
    let seen = seen.lock().expect("lock").clone();

    // Every answer 2xx, while down too: the budgets fail open.
    let down: Vec<&Seen> = seen
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s.start >= down_at && s.end <= starting_at)
        .collect();
    assert!(down.len() > 100, "load while down: {}", down.len());
    let mut slowest = Duration::ZERO;
    for s in &down {
        slowest = slowest.max(s.end - s.start);
    }
    for (what, s) in &seen {
        assert!((200..300).contains(&s.status), "{what}: {s:?}");
    }
    assert!(
        rejoined <= Duration::from_secs(1),
        "one budget again {rejoined:?} after Redis answered"
    );
    eprintln!(
        "drill 4: {} answers while Redis was down, all 2xx, slowest {slowest:?}; {} answers in all, all 2xx; one budget again {rejoined:?} after Redis answered",
        down.len(),
        seen.len()
    );
}
