//! Security review (issue 23), the edge of the service: custom header names (S-08), what the
//! log may hold (S-02) and cross-partner reads by admin tokens (S-04). Each test is named after its finding.

use reqwest::Method;
use serde_json::json;

use crate::helpers::{TestApp, assert_error, body};

const ENDPOINTS: &str = "/api/v1/webhook-endpoints";

/// Names a delivery sets itself, hop-by-hop names, credentials and proxy headers, in the
/// spellings a receiver mapping headers to CGI names would merge with the real ones.
const RESERVED_NAMES: [&str; 22] = [
    "X_Partner_Signature",
    "x_partner_event",
    "webhook-signature",
    "Webhook-Id",
    "WEBHOOK_TIMESTAMP",
    "Connection",
    "Keep-Alive",
    "Proxy-Connection",
    "TE",
    "Trailer",
    "Upgrade",
    "Expect",
    "Content-Encoding",
    "Content_Type",
    "Proxy-Authorization",
    "Cookie",
    "Forwarded",
    "X-Forwarded-For",
    "x_forwarded_proto",
    "X-Forwarded-Host",
    "X-Real-IP",
    "x_real_ip",
];

#[tokio::test]
async fn s08_reserved_custom_header_names_are_refused_on_create_and_patch() {
    let app = TestApp::spawn().await;
    let s = app.seed("acme", false).await;
    let created = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": "https://hooks.example.com", "events": ["lead.created"],
                     "customHeader": { "name": "X_Api_Key", "value": "k" } }),
        )
        .await;
    let id = created["id"].as_str().expect("id").to_owned();
    for name in RESERVED_NAMES {
        let header = json!({ "name": name, "value": "x" });
        // Partner API: create and patch.
        let res = app
            .api(Method::POST, ENDPOINTS, &s.token)
            .json(
                &json!({ "url": "https://hooks.example.com", "events": ["lead.created"],
                           "customHeader": header }),
            )
            .send()
            .await
            .expect("send");
        assert_error(res, 400, "invalid_request").await;
        let res = app
            .api(Method::PATCH, &format!("{ENDPOINTS}/{id}"), &s.token)
            .json(&json!({ "customHeader": header }))
            .send()
            .await
            .expect("send");
        assert_error(res, 400, "invalid_request").await;
        // Operator API: create and patch.
        let res = app
            .internal(Method::POST, "/partners/acme/webhook-endpoints")
            .json(
                &json!({ "url": "https://hooks.example.com", "events": ["lead.created"],
                           "customHeader": header }),
            )
            .send()
            .await
            .expect("send");
        assert_error(res, 400, "invalid_request").await;
        let res = app
            .internal(
                Method::PATCH,
                &format!("/partners/acme/webhook-endpoints/{id}"),
            )
            .json(&json!({ "customHeader": header }))
            .send()
            .await
            .expect("send");
        assert_error(res, 400, "invalid_request").await;
    }
    // The endpoint kept its header; nothing reserved was stored.
    let list = app.get_ok(ENDPOINTS, &s.token).await;
    let rows = list["data"].as_array().expect("rows");
    assert_eq!(rows.len(), 1, "{list}");
    assert_eq!(rows[0]["customHeader"]["name"], "X_Api_Key");
}

/// Starts the real binary (`partner-server serve`) on a copy of the template database with
/// `RUST_LOG=rust_log` and JSON logs; its standard output and error are gathered into one
/// string, read by the returned handle.
struct LoggedServer {
    child: std::process::Child,
    log: std::sync::Arc<std::sync::Mutex<String>>,
    readers: Vec<std::thread::JoinHandle<()>>,
    database_url: String,
    address: String,
    /// `http://127.0.0.1:port` of the `/metrics` listener.
    metrics_address: String,
}

impl LoggedServer {
    async fn start(rust_log: &str) -> Self {
        use std::io::BufRead;
        use std::process::{Command, Stdio};
        // The tests' HTTP clients need a TLS provider, as in `TestApp`.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let db = crate::database::clone_template().await;
        let database_url = crate::database::database_url(&db);
        let mut child = Command::new(env!("CARGO_BIN_EXE_partner-server"))
            .args(["serve", "--no-migrate"])
            .env_clear()
            .current_dir(std::env::temp_dir())
            .env("DATABASE_URL", &database_url)
            .env("PARTNER_BIND", "127.0.0.1:0")
            .env("PARTNER_TOKEN_PEPPER", crate::helpers::PEPPER)
            .env("PARTNER_INTERNAL_TOKEN", crate::helpers::INTERNAL_TOKEN)
            .env("PARTNER_DB_POOL_SIZE", "4")
            .env("PARTNER_WEBHOOK_POLL_INTERVAL", "100ms")
            .env("PARTNER_LOG_FORMAT", "json")
            .env("PARTNER_METRICS_BIND", "127.0.0.1:0")
            .env("RUST_LOG", rust_log)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("partner-server starts");
        let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let (port_tx, port_rx) = std::sync::mpsc::channel::<(u16, u16)>();
        let mut readers = Vec::new();
        let out: Box<dyn std::io::Read + Send> = Box::new(child.stdout.take().expect("stdout"));
        let err: Box<dyn std::io::Read + Send> = Box::new(child.stderr.take().expect("stderr"));
        for stream in [out, err] {
            let log = log.clone();
            let port_tx = port_tx.clone();
            readers.push(std::thread::spawn(move || {
                for line in std::io::BufReader::new(stream).lines() {
                    let Ok(line) = line else { break };
                    if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line)
                        && v["message"] == "listening"
                        && let Some(p) = v["port"].as_u64()
                        && let Some(m) = v["metrics_port"].as_u64()
                    {
                        let port = |p| u16::try_from(p).expect("port");
                        let _ = port_tx.send((port(p), port(m)));
                    }
                    let mut l = log.lock().expect("log");
                    l.push_str(&line);
                    l.push('\n');
                }
            }));
        }
        let port = tokio::task::spawn_blocking(move || {
            port_rx.recv_timeout(std::time::Duration::from_secs(60))
        })
        .await
        .expect("join");
        let Ok((port, metrics_port)) = port else {
            let _ = child.kill();
            panic!("no `listening` line; log: {}", log.lock().expect("log"));
        };
        Self {
            child,
            log,
            readers,
            database_url,
            address: format!("http://127.0.0.1:{port}"),
            metrics_address: format!("http://127.0.0.1:{metrics_port}"),
        }
    }

    /// An operator API request.
    fn internal(&self, client: &reqwest::Client, m: Method, p: &str) -> reqwest::RequestBuilder {
        client
            .request(m, format!("{}/internal/v1{p}", self.address))
            .bearer_auth(crate::helpers::INTERNAL_TOKEN)
    }

    /// An active partner with a user and a token: (token id, user id, token).
    async fn seed(
        &self,
        client: &reqwest::Client,
        partner: &str,
        admin: bool,
    ) -> (String, String, String) {
        let res = self
            .internal(client, Method::PUT, &format!("/partners/{partner}"))
            .json(&crate::helpers::partner_body(true))
            .send()
            .await
            .expect("send");
        assert!(res.status().is_success(), "{}", res.status());
        let user = body(
            self.internal(client, Method::POST, "/users")
                .json(
                    &json!({ "email": format!("staff@{partner}.test"), "partnerId": partner,
                               "admin": admin }),
                )
                .send()
                .await
                .expect("send"),
        )
        .await;
        let user_id = user["data"]["id"].as_str().expect("user id").to_owned();
        let token = body(
            self.internal(client, Method::POST, &format!("/users/{user_id}/tokens"))
                .send()
                .await
                .expect("send"),
        )
        .await;
        (
            token["data"]["id"].as_str().expect("token id").to_owned(),
            user_id,
            token["data"]["token"].as_str().expect("token").to_owned(),
        )
    }

    /// The log so far.
    fn log(&self) -> String {
        self.log.lock().expect("log").clone()
    }

    /// Stops the server and returns its whole log.
    async fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        let _ = partner_server::drop_database(&self.database_url).await;
        self.log.lock().expect("log").clone()
    }
}

#[tokio::test]
async fn s02_no_log_level_puts_secrets_or_personal_data_into_the_log() {
    // Every level open, and the statement-logging crates named explicitly.
    let server = LoggedServer::start(
        "trace,tokio_postgres=trace,postgres_protocol=trace,diesel=trace,diesel_async=trace,\
         reqwest=trace,hyper=trace,hyper_util=trace,rustls=trace,actix_http=trace,actix_web=trace",
    )
    .await;
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    let internal = |m: Method, p: &str| {
        client
            .request(m, format!("{}/internal/v1{p}", server.address))
            .bearer_auth(crate::helpers::INTERNAL_TOKEN)
    };
    let res = internal(Method::PUT, "/partners/acme")
        .json(&crate::helpers::partner_body(true))
        .send()
        .await
        .expect("send");
    assert!(res.status().is_success(), "{}", res.status());
    let user = body(
        internal(Method::POST, "/users")
            .json(&json!({ "email": "staff@acme.test", "partnerId": "acme", "admin": false }))
            .send()
            .await
            .expect("send"),
    )
    .await;
    let user_id = user["data"]["id"].as_str().expect("user id").to_owned();
    let token = body(
        internal(Method::POST, &format!("/users/{user_id}/tokens"))
            .send()
            .await
            .expect("send"),
    )
    .await["data"]["token"]
        .as_str()
        .expect("token")
        .to_owned();

    let header_value = format!("hv-{}", uuid::Uuid::new_v4().simple());
    let created = body(
        client
            .post(format!("{}{ENDPOINTS}", server.address))
            .bearer_auth(&token)
            .json(
                &json!({ "url": "https://hooks.example.com/s02", "events": ["lead.created"],
                           "secret": true,
                           "customHeader": { "name": "X-Api-Key", "value": header_value } }),
            )
            .send()
            .await
            .expect("send"),
    )
    .await;
    let secret = created["data"]["secret"]
        .as_str()
        .unwrap_or_else(|| panic!("a secret in {created}"))
        .to_owned();
    let email = format!("s02-{}@example.com", uuid::Uuid::new_v4().simple());
    let phone = "+1 555 0142";
    let res = internal(Method::POST, "/leads")
        .json(&crate::helpers::lead_body(
            "acme",
            json!({ "email": email, "phone": phone, "lastName": "Zyxwvutsrq" }),
        ))
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), 201);
    for path in ["/api/v1/leads", ENDPOINTS] {
        let res = client
            .get(format!("{}{path}", server.address))
            .bearer_auth(&token)
            .send()
            .await
            .expect("send");
        assert_eq!(res.status(), 200, "{path}");
    }
    // The worker claims the delivery and tries it.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let log = server.stop().await;

    assert!(
        log.contains("\"level\":\"DEBUG\"") || log.contains("\"level\":\"TRACE\""),
        "the filter let no debug line through; log:\n{log}"
    );
    let digits: String = phone.chars().filter(char::is_ascii_digit).collect();
    for (what, needle) in [
        ("webhook secret", secret.as_str()),
        ("webhook secret key", secret.trim_start_matches("whsec_")),
        ("custom header value", header_value.as_str()),
        ("lead e-mail", email.as_str()),
        ("lead phone", phone),
        ("lead phone digits", digits.as_str()),
        ("lead last name", "Zyxwvutsrq"),
        ("partner token", token.as_str()),
        ("operator token", crate::helpers::INTERNAL_TOKEN),
        ("token pepper", crate::helpers::PEPPER),
    ] {
        // The value as text, and as tokio_postgres prints a bound parameter: its bytes, in
        // decimal (`Some([119, 104, …])`).
        let bytes = format!("{:?}", needle.as_bytes());
        let bytes = bytes.trim_start_matches('[').trim_end_matches(']');
        for form in [needle, bytes] {
            if let Some(at) = log.find(form) {
                let start = log[..at].rfind('\n').map_or(0, |i| i + 1);
                let line: String = log[start..].chars().take(300).collect();
                panic!("the {what} is in the log, on the line starting: {line}");
            }
        }
    }
}

/// The value of the sample `name` (with its labels, as exported) in a Prometheus text page.
fn sample(page: &str, name: &str) -> Option<f64> {
    page.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

#[tokio::test]
async fn s04_cross_partner_reads_by_admin_tokens_are_audited_and_counted() {
    let server = LoggedServer::start("info").await;
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    let metrics = || async {
        client
            .get(format!("{}/metrics", server.metrics_address))
            .send()
            .await
            .expect("send")
            .text()
            .await
            .expect("metrics")
    };
    assert_eq!(
        sample(&metrics().await, "partner_cross_reads_total"),
        Some(0.0),
        "exported from the start"
    );
    let (admin_token_id, admin_user_id, admin_token) = server.seed(&client, "hq", true).await;
    let (_, _, beta_token) = server.seed(&client, "beta", false).await;
    let res = server
        .internal(&client, Method::POST, "/care-services-coupons/bulk-orders")
        .json(
            &json!({ "partnerId": "beta", "productSlug": "primary", "months": 12, "quantity": 3,
                       "unitPriceCents": 9900, "purchaserEmail": "buyer@beta.test",
                       "purchaserSource": "portal" }),
        )
        .send()
        .await
        .expect("send");
    assert_eq!(res.status(), 201);
    let get = |token: &str, query: &str| {
        client
            .get(format!(
                "{}/api/v1/care-services-coupons{query}",
                server.address
            ))
            .bearer_auth(token)
            .send()
    };
    // Not cross-partner reads: the admin's own partner, named or not; a partner's own read.
    for (token, query) in [
        (admin_token.as_str(), ""),
        (admin_token.as_str(), "?partner_id=hq"),
        (beta_token.as_str(), "?partner_id=beta"),
    ] {
        assert_eq!(get(token, query).await.expect("send").status(), 200);
    }
    // Two cross-partner reads: JSON and CSV.
    let page = body(get(&admin_token, "?partner_id=beta").await.expect("send")).await;
    assert_eq!(page["data"].as_array().map(Vec::len), Some(3), "{page}");
    let res = get(&admin_token, "?partner_id=beta&format=csv&limit=2")
        .await
        .expect("send");
    assert_eq!(res.status(), 200);
    assert_eq!(
        sample(&metrics().await, "partner_cross_reads_total"),
        Some(2.0)
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let log = server.log();
    let audit: Vec<serde_json::Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["target"] == "audit")
        .collect();
    assert_eq!(
        audit.len(),
        2,
        "one audit line per cross-partner read:\n{log}"
    );
    for (line, rows) in audit.iter().zip([3, 2]) {
        assert_eq!(line["level"], "INFO", "{line}");
        assert_eq!(line["tokenId"], admin_token_id.as_str(), "{line}");
        assert_eq!(line["userId"], admin_user_id.as_str(), "{line}");
        assert_eq!(line["partnerId"], "beta", "{line}");
        assert_eq!(line["path"], "/api/v1/care-services-coupons", "{line}");
        assert_eq!(line["rows"], rows, "{line}");
    }
    server.stop().await;
}
