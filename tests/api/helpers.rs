//! `TestApp`: starts the real server against a fresh database, with typed request helpers.
//!
//! The database is a copy of a template migrated once per run ([`crate::database`]); the
//! server's logs are silent unless `TEST_LOG=1` ([`init_tracing`]).

use std::future::Future;
use std::sync::{Arc, Once};
use std::time::Duration;

use partner_domain::kernel::clock::{Clock, FixedClock, SystemClock};
use partner_server::config::Config;
use partner_server::startup::{Application, Migrations};
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde_json::{Value, json};

use crate::database;

pub const INTERNAL_TOKEN: &str = "internal-test-token-0123456789abcdef";
pub const PEPPER: &str = "test-pepper-0123456789abcdef0123456789";

/// A running server on its own throwaway database.
pub struct TestApp {
    pub address: String,
    /// `http://127.0.0.1:port` of the `/metrics` listener, when the config asked for one.
    pub metrics_address: Option<String>,
    /// `http://127.0.0.1:port` of the operator API's own listener, when the config asked for one.
    pub internal_address: Option<String>,
    pub client: reqwest::Client,
    pub config: Config,
    /// Whether the server runs a delivery worker ([`Application::runs_worker`]).
    pub runs_worker: bool,
    /// The server's clock; [`TestApp::sibling`] shares it.
    clock: Arc<dyn Clock>,
    owns_db: bool,
}

/// A partner with one portal user and one live token.
#[derive(Debug, Clone)]
pub struct Seeded {
    pub partner_id: String,
    pub user_id: String,
    pub token_id: String,
    pub token: String,
}

impl TestApp {
    pub async fn spawn() -> Self {
        Self::spawn_with(|_| {}).await
    }

    /// Starts a server whose settings `tweak` may change (pepper, limits…).
    pub async fn spawn_with(tweak: impl FnOnce(&mut Config)) -> Self {
        Self::spawn_full(tweak, Arc::new(SystemClock)).await
    }

    /// Starts a server with `clock`, on a copy of the migrated template: the server itself
    /// applies no migration.
    pub async fn spawn_full(tweak: impl FnOnce(&mut Config), clock: Arc<dyn Clock>) -> Self {
        let db = database::clone_template().await;
        Self::spawn_on(&db, Migrations::Skip, tweak, clock).await
    }

    /// Starts a server on a database that does not exist yet: the server creates it and applies
    /// every migration, as a first deployment does. For the tests of that path; the others use
    /// the faster [`TestApp::spawn`].
    pub async fn spawn_migrating(tweak: impl FnOnce(&mut Config)) -> Self {
        let db = database::fresh_name();
        Self::spawn_on(&db, Migrations::Apply, tweak, Arc::new(SystemClock)).await
    }

    /// Starts a server on the database at `url` (on a cluster of the test's own), creating it
    /// and applying the migrations; the database goes with its cluster.
    pub async fn spawn_on_url(url: &str, tweak: impl FnOnce(&mut Config)) -> Self {
        let url = url.to_owned();
        let mut app = Self::spawn_on(
            "unused",
            Migrations::Apply,
            move |c| {
                c.database_url = url;
                tweak(c);
            },
            Arc::new(SystemClock),
        )
        .await;
        app.owns_db = false;
        app
    }

    async fn spawn_on(
        db: &str,
        migrations: Migrations,
        tweak: impl FnOnce(&mut Config),
        clock: Arc<dyn Clock>,
    ) -> Self {
        static TLS: Once = Once::new();
        TLS.call_once(|| {
            let _ = rustls::crypto::ring::default_provider().install_default();
        });
        init_tracing();
        let mut config = Config::from_lookup(|k| match k {
            "DATABASE_URL" => Some(database::database_url(db)),
            "PARTNER_BIND" => Some("127.0.0.1:0".into()),
            "PARTNER_TOKEN_PEPPER" => Some(PEPPER.into()),
            "PARTNER_INTERNAL_TOKEN" => Some(INTERNAL_TOKEN.into()),
            _ => None,
        })
        .expect("test config");
        config.db_pool_size = 4;
        tweak(&mut config);
        Self::start(config, migrations, clock, true).await
    }

    async fn start(
        config: Config,
        migrations: Migrations,
        clock: Arc<dyn Clock>,
        owns_db: bool,
    ) -> Self {
        let app = Application::build_with_clock(&config, migrations, clock.clone())
            .await
            .expect("server builds");
        let address = format!("http://127.0.0.1:{}", app.port());
        let internal_address = app.internal_port().map(|p| format!("http://127.0.0.1:{p}"));
        let metrics_address = app.metrics_port().map(|p| format!("http://127.0.0.1:{p}"));
        let runs_worker = app.runs_worker();
        tokio::spawn(app.run_until_stopped());
        let client = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("client");
        Self {
            address,
            metrics_address,
            internal_address,
            client,
            config,
            runs_worker,
            clock,
            owns_db,
        }
    }

    /// Another server on the database of `config` (it does not drop it).
    pub async fn on_database(config: Config) -> Self {
        Self::start(config, Migrations::Skip, Arc::new(SystemClock), false).await
    }

    /// A second server instance on the same database and clock (it does not drop it).
    pub async fn sibling(&self) -> Self {
        Self::start(
            self.config.clone(),
            Migrations::Skip,
            self.clock.clone(),
            false,
        )
        .await
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.address)
    }

    pub fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.client.request(method, self.url(path))
    }

    /// A partner API request with `token` as bearer.
    pub fn api(&self, method: Method, path: &str, token: &str) -> RequestBuilder {
        self.request(method, path).bearer_auth(token)
    }

    /// An operator API request.
    pub fn internal(&self, method: Method, path: &str) -> RequestBuilder {
        let base = self.internal_address.as_deref().unwrap_or(&self.address);
        self.client
            .request(method, format!("{base}/internal/v1{path}"))
            .bearer_auth(INTERNAL_TOKEN)
    }

    pub async fn put_partner(&self, id: &str, body: &Value) -> Response {
        self.internal(Method::PUT, &format!("/partners/{id}"))
            .json(body)
            .send()
            .await
            .expect("send")
    }

    pub async fn create_user(&self, partner_id: &str, admin: bool) -> String {
        let res = self
            .internal(Method::POST, "/users")
            .json(&json!({ "email": format!("user@{partner_id}.test"), "partnerId": partner_id, "admin": admin }))
            .send()
            .await
            .expect("send");
        assert_eq!(res.status(), StatusCode::CREATED);
        body(res).await["data"]["id"]
            .as_str()
            .expect("id")
            .to_owned()
    }

    /// Creates a token for `user_id`: (token id, token text).
    pub async fn create_token(&self, user_id: &str) -> (String, String) {
        let res = self
            .internal(Method::POST, &format!("/users/{user_id}/tokens"))
            .send()
            .await
            .expect("send");
        assert_eq!(res.status(), StatusCode::CREATED);
        let b = body(res).await;
        (
            b["data"]["id"].as_str().expect("id").into(),
            b["data"]["token"].as_str().expect("token").into(),
        )
    }

    /// An active partner with a (non-admin unless `admin`) user and a token.
    pub async fn seed(&self, partner_id: &str, admin: bool) -> Seeded {
        let res = self.put_partner(partner_id, &partner_body(true)).await;
        assert!(res.status().is_success(), "partner: {}", res.status());
        let user_id = self.create_user(partner_id, admin).await;
        let (token_id, token) = self.create_token(&user_id).await;
        Seeded {
            partner_id: partner_id.into(),
            user_id,
            token_id,
            token,
        }
    }

    /// A connection of its own to the test's database, for reading or writing what no route
    /// shows (markers, leases) as an operator's hand would.
    pub async fn db(&self) -> diesel_async::AsyncPgConnection {
        use diesel_async::AsyncConnection;
        diesel_async::AsyncPgConnection::establish(&self.config.database_url)
            .await
            .expect("the test's database")
    }

    pub async fn get_health(&self) -> StatusCode {
        self.request(Method::GET, "/healthz")
            .send()
            .await
            .expect("send")
            .status()
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if !self.owns_db {
            return;
        }
        let url = self.config.database_url.clone();
        // Drop runs inside the test's runtime; the teardown gets a thread and runtime of its own.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            if let Err(e) = rt.block_on(partner_server::drop_database(&url)) {
                eprintln!("could not drop test database: {e}");
            }
        })
        .join();
    }
}

/// How long [`eventually`] waits: generous, so that only a state that never comes fails.
pub const EVENTUALLY: Duration = Duration::from_secs(10);

/// Polls `f` until it returns `Some` and returns that value; panics naming `what` after
/// [`EVENTUALLY`]. The way to wait for state the server reaches off the request path (a
/// delivery sent, a counter moved): never a fixed sleep.
pub async fn eventually<T, F, Fut>(what: &str, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    eventually_within(EVENTUALLY, what, f).await
}

/// [`eventually`] with another timeout.
pub async fn eventually_within<T, F, Fut>(timeout: Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        // The polling interval, not a wait for anything.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A clock stopped in the middle of the current hour: a rate-limit window of an hour (aligned
/// to the hour) holds every request of a test, whenever the test runs.
pub fn mid_hour_clock() -> Arc<FixedClock> {
    let now = time::OffsetDateTime::now_utc();
    let hour = now
        .replace_minute(0)
        .and_then(|t| t.replace_second(0))
        .and_then(|t| t.replace_nanosecond(0))
        .expect("start of the hour");
    Arc::new(FixedClock::new(hour + time::Duration::minutes(30)))
}

/// With `TEST_LOG` set (to anything but `0`), the servers' logs go to the test output, filtered
/// by `RUST_LOG` (default `info`); otherwise tests are silent. Installed once per test binary;
/// libtest captures the output of passing tests unless `--nocapture` is given.
pub fn init_tracing() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        let on = std::env::var("TEST_LOG").is_ok_and(|v| !v.is_empty() && v != "0");
        if on {
            let filter = tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
            let _ = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
                .with_test_writer()
                .try_init();
        }
    });
}

/// A valid `PUT /internal/v1/partners/{id}` body.
pub fn partner_body(active: bool) -> Value {
    json!({
        "name": "Acme Health",
        "email": "ops@acme.test",
        "active": active,
        "dnaAccess": true,
        "headlessLinks": true,
        "defaultLang": "en",
        "enabledLangs": ["en", "es"],
        "careServices": {
            "subscriptionActive": true,
            "manualOverride": false,
            "yearlyBundle": true,
            "services": ["primary-care"]
        }
    })
}

pub async fn body(res: Response) -> Value {
    let text = res.text().await.expect("body");
    serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"))
}

/// Asserts the status and the spec's error body with `code`; returns the message.
pub async fn assert_error(res: Response, status: u16, code: &str) -> String {
    let got = res.status().as_u16();
    let ct = res
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let b = body(res).await;
    assert_eq!(got, status, "status; body {b}");
    assert!(ct.starts_with("application/json"), "content type {ct}");
    assert_eq!(b["error"]["code"], code, "body {b}");
    let msg = b["error"]["message"].as_str().expect("message is a string");
    assert!(!msg.is_empty());
    assert_eq!(
        b.as_object().map(|o| o.len()),
        Some(1),
        "only `error` in {b}"
    );
    msg.to_owned()
}

/// A valid `POST /internal/v1/leads` body for `partner`, with `extra` fields merged over it.
pub fn lead_body(partner: &str, extra: Value) -> Value {
    let mut b = json!({
        "partnerId": partner,
        "firstName": "Ann",
        "lastName": "Lee",
        "email": "ann@example.com",
        "emailConsent": true,
        "phone": "+1 555 0100",
        "smsConsent": true,
        "origin": "managed-website",
        "location": "Austin, TX",
    });
    if let (Some(b), Some(e)) = (b.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            b.insert(k.clone(), v.clone());
        }
    }
    b
}

impl TestApp {
    /// Ingests a lead and returns its row.
    pub async fn ingest_lead(&self, body_: &Value) -> Value {
        let res = self
            .internal(Method::POST, "/leads")
            .json(body_)
            .send()
            .await
            .expect("send");
        assert_eq!(res.status(), StatusCode::CREATED, "lead ingest");
        body(res).await["data"].clone()
    }

    /// `POST /api/v1/webhook-endpoints` with `b`, asserting 201; the created endpoint.
    pub async fn create_webhook_endpoint(&self, token: &str, b: &Value) -> Value {
        let res = self
            .api(Method::POST, "/api/v1/webhook-endpoints", token)
            .json(b)
            .send()
            .await
            .expect("send");
        assert_eq!(res.status(), StatusCode::CREATED, "endpoint creation");
        body(res).await["data"].clone()
    }

    /// `GET path` with `token`, asserting 200; the parsed body.
    pub async fn get_ok(&self, path: &str, token: &str) -> Value {
        let res = self
            .api(Method::GET, path, token)
            .send()
            .await
            .expect("send");
        assert_eq!(res.status(), StatusCode::OK, "GET {path}");
        body(res).await
    }
}

/// What a receiver does with one secret: the domain's `WebhookVerifier` (its one entry point) on
/// an `X-Partner-Signature` value, at `now_unix`, with the default tolerance.
pub fn verify_signature(
    header: &str,
    body: &[u8],
    secret: &str,
    now_unix: i64,
) -> Result<(), partner_domain::webhook::VerifyError> {
    use partner_domain::webhook::{VerifyError, WebhookSecret, WebhookVerifier};
    let now =
        time::OffsetDateTime::from_unix_timestamp(now_unix).map_err(|_| VerifyError::TooOld)?;
    WebhookVerifier::new([WebhookSecret::from_stored(secret.to_owned())])?
        .verify_partner_signature(header, body, now)
}
