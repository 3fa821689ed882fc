//! A small HTTPS receiver for webhook tests: a self-signed certificate for 127.0.0.1 (its PEM
//! is handed to the server as `PARTNER_WEBHOOK_CA_FILE`), TLS through rustls, and just enough
//! HTTP/1.1 to record each request and answer with a scripted status.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One received request.
#[derive(Debug, Clone)]
pub struct Received {
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("JSON body")
    }
}

/// A scripted answer: the status and an optional `Retry-After` value.
type Answer = (u16, Option<String>);

/// How a misbehaving receiver answers (issue 24, drill 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Misbehaviour {
    /// Reads the request, then writes its answer one byte a second.
    Trickle,
    /// Answers 200 with a 100 MB body, streamed as fast as the client reads.
    HugeBody,
    /// Reads part of the request, then resets the connection (RST, not FIN).
    ResetMidRequest,
    /// A slow but well-behaved receiver: answers 200 after this long.
    Slow(Duration),
}

pub struct Receiver {
    pub url: String,
    pub ca_file: PathBuf,
    received: Arc<Mutex<Vec<Received>>>,
    script: Arc<Mutex<VecDeque<Answer>>>,
}

impl Receiver {
    pub async fn start() -> Self {
        Self::start_with(false, None).await
    }

    /// A receiver that misbehaves on every request (it still records the requests it reads).
    pub async fn start_misbehaving(how: Misbehaviour) -> Self {
        Self::start_with(false, Some(how)).await
    }

    /// A receiver whose self-signed certificate marks itself a CA (`basicConstraints CA:TRUE`,
    /// openssl's default for `req -x509`), which TLS refuses as a server's certificate.
    pub async fn start_as_ca() -> Self {
        Self::start_with(true, None).await
    }

    async fn start_with(is_ca: bool, misbehave: Option<Misbehaviour>) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut params =
            rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).expect("params");
        if is_ca {
            params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        }
        let signing_key = rcgen::KeyPair::generate().expect("key");
        let cert = params.self_signed(&signing_key).expect("certificate");
        let ca_file =
            std::env::temp_dir().join(format!("webhook-receiver-{}.pem", uuid::Uuid::new_v4()));
        std::fs::write(&ca_file, cert.pem()).expect("write PEM");
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(signing_key.serialize_der().into());
        let tls = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone()], key)
            .expect("TLS config");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!(
            "https://127.0.0.1:{}/hooks",
            listener.local_addr().expect("addr").port()
        );
        let received = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(VecDeque::new()));
        let (r, s) = (received.clone(), script.clone());
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, r, s) = (acceptor.clone(), r.clone(), s.clone());
                tokio::spawn(async move {
                    if misbehave == Some(Misbehaviour::ResetMidRequest) {
                        // Read a little of the handshake, then RST.
                        let mut tcp = tcp;
                        let mut some = [0u8; 64];
                        let _ = tcp.read(&mut some).await;
                        let _ = tcp.set_zero_linger();
                        drop(tcp);
                        return;
                    }
                    let Ok(mut stream) = acceptor.accept(tcp).await else {
                        return;
                    };
                    if let Some(how) = misbehave {
                        if let Some(req) = read_request(&mut stream).await {
                            r.lock().expect("lock").push(req);
                        }
                        misbehave_on(&mut stream, how).await;
                        return;
                    }
                    let Some(req) = read_request(&mut stream).await else {
                        return;
                    };
                    let (status, retry_after) =
                        s.lock().expect("lock").pop_front().unwrap_or((200, None));
                    r.lock().expect("lock").push(req);
                    let extra = retry_after
                        .map(|v| format!("Retry-After: {v}\r\n"))
                        .unwrap_or_default();
                    let reply = format!(
                        "HTTP/1.1 {status} X\r\n{extra}Content-Length: 0\r\nConnection: close\r\n\r\n"
                    );
                    let _ = stream.write_all(reply.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        Self {
            url,
            ca_file,
            received,
            script,
        }
    }

    /// Settings that let a test server deliver here quickly: this receiver's certificate
    /// trusted, private addresses allowed, a 100 ms/100 ms retry schedule, a 3 s attempt timeout
    /// and a fast fallback poll.
    pub fn configure(&self, c: &mut partner_server::Config) {
        c.webhook_allow_private = true;
        c.webhook_ca_file = Some(self.ca_file.clone());
        c.webhook_retry_schedule = vec![Duration::from_millis(100), Duration::from_millis(100)];
        c.webhook_timeout = Duration::from_secs(3);
        c.webhook_poll_interval = Duration::from_millis(25);
    }

    /// A test server that delivers here ([`Receiver::configure`]), with `tweak` applied after.
    pub async fn app(
        &self,
        tweak: impl FnOnce(&mut partner_server::Config),
    ) -> crate::helpers::TestApp {
        crate::helpers::TestApp::spawn_with(|c| {
            self.configure(c);
            tweak(c);
        })
        .await
    }

    /// The statuses of the next answers, in order (200 after that).
    pub fn answer_with(&self, statuses: &[u16]) {
        self.script
            .lock()
            .expect("lock")
            .extend(statuses.iter().map(|s| (*s, None)));
    }

    /// The next answer: `status` with a `Retry-After: value` header.
    pub fn answer_retry_after(&self, status: u16, value: &str) {
        self.script
            .lock()
            .expect("lock")
            .push_back((status, Some(value.to_owned())));
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().expect("lock").clone()
    }

    /// Waits until at least `n` requests arrived ([`crate::helpers::eventually`]).
    pub async fn wait_for(&self, n: usize) -> Vec<Received> {
        crate::helpers::eventually(&format!("{n} webhook requests"), || async {
            let got = self.received();
            (got.len() >= n).then_some(got)
        })
        .await
    }
}

async fn misbehave_on<S: AsyncWriteExt + Unpin>(stream: &mut S, how: Misbehaviour) {
    match how {
        Misbehaviour::Trickle => {
            for b in b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n" {
                if stream.write_all(&[*b]).await.is_err() || stream.flush().await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
        Misbehaviour::HugeBody => {
            let total: usize = 100 * 1024 * 1024;
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {total}\r\n\r\n");
            if stream.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let chunk = vec![b'x'; 64 * 1024];
            let mut sent = 0;
            while sent < total {
                if stream.write_all(&chunk).await.is_err() {
                    return; // the client stopped reading and closed: what it should do
                }
                sent += chunk.len();
            }
        }
        Misbehaviour::ResetMidRequest => {}
        Misbehaviour::Slow(d) => {
            // The receiver's own processing time, not a test waiting for something.
            tokio::time::sleep(d).await;
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .await;
            let _ = stream.shutdown().await;
        }
    }
}

async fn read_request<S: AsyncReadExt + Unpin>(s: &mut S) -> Option<Received> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let headers: Vec<(String, String)> = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < len {
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Received { headers, body })
}
