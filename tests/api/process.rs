//! The real binary as a child process, for what only a process shows: its whole log, its exit
//! on SIGTERM.

use reqwest::Method;
use serde_json::json;

use crate::helpers::body;

/// Starts the real binary (`partner-server serve`) on a copy of the template database with
/// `RUST_LOG=rust_log` and JSON logs; its standard output and error are gathered into one
/// string, read by the returned handle.
pub struct LoggedServer {
    pub child: std::process::Child,
    log: std::sync::Arc<std::sync::Mutex<String>>,
    readers: Vec<std::thread::JoinHandle<()>>,
    pub database_url: String,
    pub address: String,
    /// `http://127.0.0.1:port` of the `/metrics` listener.
    pub metrics_address: String,
}

impl LoggedServer {
    pub async fn start(rust_log: &str) -> Self {
        Self::start_with(rust_log, &[]).await
    }

    /// [`LoggedServer::start`] with more settings (`PARTNER_*` name and value).
    pub async fn start_with(rust_log: &str, extra: &[(&str, String)]) -> Self {
        Self::start_through(rust_log, extra, |url| url.to_owned()).await
    }

    /// [`LoggedServer::start_with`], the server given `through(url)` as its `DATABASE_URL` (a
    /// relay in front of the database, say); [`LoggedServer::database_url`] stays the direct one.
    pub async fn start_through(
        rust_log: &str,
        extra: &[(&str, String)],
        through: impl FnOnce(&str) -> String,
    ) -> Self {
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
            .env("DATABASE_URL", through(&database_url))
            .env("PARTNER_BIND", "127.0.0.1:0")
            .env("PARTNER_TOKEN_PEPPER", crate::helpers::PEPPER)
            .env("PARTNER_INTERNAL_TOKEN", crate::helpers::INTERNAL_TOKEN)
            .env("PARTNER_DB_POOL_SIZE", "4")
            .env("PARTNER_WEBHOOK_POLL_INTERVAL", "100ms")
            .env("PARTNER_LOG_FORMAT", "json")
            .env("PARTNER_METRICS_BIND", "127.0.0.1:0")
            .env("RUST_LOG", rust_log)
            .envs(extra.iter().map(|(k, v)| (*k, v.as_str())))
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
    pub fn internal(
        &self,
        client: &reqwest::Client,
        m: Method,
        p: &str,
    ) -> reqwest::RequestBuilder {
        client
            .request(m, format!("{}/internal/v1{p}", self.address))
            .bearer_auth(crate::helpers::INTERNAL_TOKEN)
    }

    /// An active partner with a user and a token: (token id, user id, token).
    pub async fn seed(
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

    /// [`Self::seed`] (not admin), then an endpoint of that partner for `lead.created` at `url`:
    /// the token.
    pub async fn seed_with_endpoint(
        &self,
        client: &reqwest::Client,
        partner: &str,
        url: &str,
    ) -> String {
        let (_, _, token) = self.seed(client, partner, false).await;
        let res = client
            .post(format!("{}/api/v1/webhook-endpoints", self.address))
            .bearer_auth(&token)
            .json(&json!({ "url": url, "events": ["lead.created"] }))
            .send()
            .await
            .expect("send");
        assert_eq!(res.status(), 201);
        token
    }

    /// The log so far.
    pub fn log(&self) -> String {
        self.log.lock().expect("log").clone()
    }

    /// Sends SIGTERM.
    pub fn sigterm(&self) {
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(sent.success());
    }

    /// Waits for the process to exit; its exit status.
    pub async fn wait_exit(&mut self) -> std::process::ExitStatus {
        let mut child = std::mem::replace(
            &mut self.child,
            std::process::Command::new("true").spawn().expect("true"),
        );
        tokio::task::spawn_blocking(move || child.wait())
            .await
            .expect("join")
            .expect("wait")
    }

    /// Stops the server and returns its whole log.
    pub async fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        let _ = partner_server::drop_database(&self.database_url).await;
        self.log.lock().expect("log").clone()
    }
}
