//! The HTTPS client and its guard: names resolve only to global unicast addresses (at connect
//! time, which defeats DNS rebinding), literal addresses are checked before the request, redirects
//! are not followed. One send posts a signed body and names a failure by a short, URL-free reason.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use partner_domain::kernel::clock::Clock;
use partner_domain::webhook::ports::AddressCheck;
use partner_domain::webhook::{
    ClaimedDelivery, WebhookSecret, is_internal, parse_retry_after, signature_header_with,
    standard_signature,
};

use crate::connect::{Attempt, ConnectLayer, ConnectTimedOut, is_connecting};
use crate::{WorkerConfig, WorkerError};

/// The resolver's refusal, recognised in reqwest's error chain as `address not allowed`.
#[derive(Debug, thiserror::Error)]
#[error("the name resolves only to addresses that are not allowed, or not at all")]
struct AddressNotAllowed;

/// The resolver found no address for the name, recognised as `dns error: name not resolved`.
#[derive(Debug, thiserror::Error)]
#[error("the name does not resolve")]
struct NameNotResolved;

/// Resolves names for reqwest, dropping every address that is not global unicast unless they are
/// allowed. Doing this at connect time (not only when an endpoint is saved) defeats DNS rebinding.
#[derive(Debug, Clone, Copy)]
struct FilteringResolver {
    allow_private: bool,
}

impl reqwest::dns::Resolve for FilteringResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allow_private = self.allow_private;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await
                .map_err(|_| Box::new(NameNotResolved) as Box<dyn std::error::Error + Send + Sync>)?
                .collect();
            let allowed: Vec<SocketAddr> = addrs
                .into_iter()
                .filter(|a| allow_private || !is_internal(a.ip()))
                .collect();
            if allowed.is_empty() {
                return Err(Box::new(AddressNotAllowed) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// [`AddressCheck`] through the system resolver.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemAddressCheck;

#[async_trait::async_trait]
impl AddressCheck for SystemAddressCheck {
    async fn resolves_internal(&self, host: &str, port: u16) -> bool {
        let lookup = |name: &str| {
            let name = name.to_owned();
            async move {
                match tokio::time::timeout(
                    Duration::from_secs(3),
                    tokio::net::lookup_host((name.as_str(), port)),
                )
                .await
                {
                    Ok(Ok(addrs)) => addrs.into_iter().any(|a| is_internal(a.ip())),
                    _ => false,
                }
            }
        };
        // `name.` and `name` may resolve differently (search domains, hosts files): both count.
        let bare = host.trim_end_matches('.');
        lookup(host).await || (bare != host && !bare.is_empty() && lookup(bare).await)
    }
}

/// How one send ended.
#[derive(Debug)]
pub(crate) enum Sent {
    /// The status, and the wait a `429` or `503` asked for with `Retry-After`.
    Answered(u16, Option<time::Duration>),
    /// No answer; `timed_out` feeds the circuit breaker.
    NoAnswer {
        error: &'static str,
        timed_out: bool,
    },
    /// Nothing was written: the connection made for the send is up, and the check that was to
    /// vouch for writing on it did not (issue 23, N9c). Its answer: `Some(false)`, the endpoint
    /// changed; `None`, the check failed or answered too late.
    Unsent(Option<bool>),
}

/// The worker's HTTPS client.
pub(crate) struct Client {
    http: reqwest::Client,
    allow_private: bool,
    clock: Arc<dyn Clock>,
}

impl Client {
    pub(crate) fn new(config: &WorkerConfig, clock: Arc<dyn Clock>) -> Result<Self, WorkerError> {
        // reqwest is built without a default crypto provider; ring is the one this workspace uses.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .pool_idle_timeout(Duration::from_secs(60))
            .tcp_nodelay(true)
            .user_agent(concat!(
                "partner-portal-webhooks/",
                env!("CARGO_PKG_VERSION")
            ))
            .dns_resolver(FilteringResolver {
                allow_private: config.allow_private,
            })
            .connector_layer(ConnectLayer {
                timeout: config.timeout,
            });
        if let Some(pem) = &config.extra_roots_pem {
            let certs = reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| WorkerError::Roots(Some(e)))?;
            if certs.is_empty() {
                return Err(WorkerError::Roots(None));
            }
            builder = builder.tls_certs_merge(certs);
        }
        Ok(Self {
            http: builder.build().map_err(WorkerError::Client)?,
            allow_private: config.allow_private,
            clock,
        })
    }

    /// Posts `body`, signed, to the delivery's endpoint, within `timeout`. When the send needs a
    /// new connection, nothing is written until it is up and `recheck` (the endpoint-row check,
    /// asked then) answers `Some(true)`; otherwise the send ends [`Sent::Unsent`].
    pub(crate) async fn send<F, Fut>(
        &self,
        d: &ClaimedDelivery,
        body: Vec<u8>,
        timeout: Duration,
        recheck: F,
    ) -> Sent
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Option<bool>>,
    {
        let started = tokio::time::Instant::now();
        let no_answer = |error| Sent::NoAnswer {
            error,
            timed_out: false,
        };
        let Ok(url) = url::Url::parse(&d.url) else {
            return no_answer("invalid url");
        };
        // Literal addresses skip the resolver, so they are checked here.
        let literal = match url.host() {
            Some(url::Host::Ipv4(ip)) => Some(std::net::IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => Some(std::net::IpAddr::V6(ip)),
            _ => None,
        };
        if literal.is_some_and(is_internal) && !self.allow_private {
            return no_answer("address not allowed");
        }
        let mut req = self
            .http
            .post(url)
            .header("Content-Type", "application/json")
            .header("X-Partner-Event", d.event.kind().as_str())
            .header("X-Partner-Delivery", d.id.to_string())
            .header("X-Partner-Event-Id", d.event_id.to_string());
        if let Some(secret) = &d.secret {
            // During a rotation's overlap, a second `v1` under the previous secret.
            let secrets: Vec<&WebhookSecret> = std::iter::once(secret)
                .chain(d.previous_secret.as_ref())
                .collect();
            let t = self.clock.now().unix_timestamp();
            let id = d.id.to_string();
            // Standard Webhooks (extensions §9) for secrets of the `whsec_<base64>` form, with
            // the same `t`, so both schemes verify one request.
            if let Some(sig) = standard_signature(&secrets, &id, t, &body) {
                req = req
                    .header("webhook-id", id)
                    .header("webhook-timestamp", t.to_string())
                    .header("webhook-signature", sig);
            }
            req = req.header(
                "X-Partner-Signature",
                signature_header_with(&secrets, t, &body),
            );
        }
        if let Some(h) = &d.custom_header {
            req = req.header(h.name(), h.value());
        }
        let Ok(req) = req.body(body).timeout(timeout).build() else {
            return no_answer("invalid request");
        };
        // A body of bytes clones.
        let Some(once) = req.try_clone() else {
            return no_answer("invalid request");
        };
        let attempt = Attempt::default();
        let first = attempt.scope(self.http.execute(once)).await;
        let answer = match first {
            Err(e) if is_connecting(&e) => {
                // No idle connection: one is being made, and nothing was written.
                match tokio::time::timeout_at(started + timeout, attempt.connected()).await {
                    Err(_) => return no_answer_timed_out(),
                    Ok(Err(e)) => return classify_chain(&*e),
                    Ok(Ok(())) => {}
                }
                match recheck().await {
                    Some(true) => {}
                    other => return Sent::Unsent(other),
                }
                let mut req = req;
                let left = timeout.saturating_sub(started.elapsed());
                if left.is_zero() {
                    return no_answer_timed_out();
                }
                *req.timeout_mut() = Some(left);
                match attempt.scope(self.http.execute(req)).await {
                    // Not the connection made (or not only): give it back rather than connect
                    // again unchecked.
                    Err(e) if is_connecting(&e) => return Sent::Unsent(None),
                    other => other,
                }
            }
            other => other,
        };
        match answer {
            Ok(mut res) => {
                let code = res.status().as_u16();
                let retry_after = if code == 429 || code == 503 {
                    res.headers()
                        .get(reqwest::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| parse_retry_after(v, self.clock.now()))
                } else {
                    None
                };
                // Read a little of the answer so the connection can be reused; a receiver that
                // sends more gets its connection closed instead.
                let mut read = 0usize;
                while read < 16 * 1024 {
                    match res.chunk().await {
                        Ok(Some(c)) => read += c.len(),
                        Ok(None) | Err(_) => break,
                    }
                }
                Sent::Answered(code, retry_after)
            }
            Err(e) => classify(&e),
        }
    }
}

/// Which TLS check failed, so a partner can fix their receiver from `lastError` alone (the most
/// common: a self-signed certificate that marks itself a CA, openssl's default).
fn tls_reason(e: &rustls::Error) -> &'static str {
    use rustls::CertificateError as C;
    match e {
        rustls::Error::InvalidCertificate(c) => match c {
            C::Expired | C::ExpiredContext { .. } => "tls error: certificate expired",
            C::NotValidYet | C::NotValidYetContext { .. } => "tls error: certificate not valid yet",
            C::UnknownIssuer => "tls error: unknown issuer",
            C::NotValidForName | C::NotValidForNameContext { .. } => "tls error: name mismatch",
            C::Revoked => "tls error: certificate revoked",
            // webpki's `CaUsedAsEndEntity` reaches rustls as an `Other` error.
            C::Other(o) if format!("{o:?}").contains("CaUsedAsEndEntity") => {
                "tls error: certificate is a CA"
            }
            _ => "tls error: invalid certificate",
        },
        _ => "tls error",
    }
}

fn no_answer_timed_out() -> Sent {
    Sent::NoAnswer {
        error: "timeout",
        timed_out: true,
    }
}

/// A short, URL-free reason for a request that got no answer.
fn classify(e: &reqwest::Error) -> Sent {
    if e.is_timeout() {
        return no_answer_timed_out();
    }
    classify_chain(e)
}

/// [`classify`] for any error: a request's, or a connection's made apart from its send.
fn classify_chain(e: &(dyn std::error::Error + 'static)) -> Sent {
    let no_answer = |error| Sent::NoAnswer {
        error,
        timed_out: error == "timeout",
    };
    // `io::Error::source` skips the error it wraps, so wrapped errors are visited explicitly.
    let mut stack: Vec<&(dyn std::error::Error + 'static)> = vec![e];
    while let Some(err) = stack.pop() {
        if err.is::<ConnectTimedOut>() {
            return no_answer("timeout");
        }
        if err.is::<AddressNotAllowed>() {
            return no_answer("address not allowed");
        }
        if err.is::<NameNotResolved>() {
            return no_answer("dns error: name not resolved");
        }
        if let Some(tls) = err.downcast_ref::<rustls::Error>() {
            return no_answer(tls_reason(tls));
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::ConnectionRefused => return no_answer("connection refused"),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted => {
                    return no_answer("connection reset");
                }
                std::io::ErrorKind::TimedOut => return no_answer("timeout"),
                _ => {}
            }
            if let Some(inner) = io.get_ref() {
                stack.push(inner);
            }
        }
        if let Some(source) = err.source() {
            stack.push(source);
        }
    }
    no_answer("connection error")
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use reqwest::dns::{Name, Resolve};

    use super::*;

    #[tokio::test]
    async fn the_resolver_refuses_names_that_resolve_to_internal_addresses() {
        let refusing = FilteringResolver {
            allow_private: false,
        };
        let name = Name::from_str("localhost").expect("name");
        assert!(
            refusing.resolve(name).await.is_err(),
            "localhost is internal"
        );
        let allowing = FilteringResolver {
            allow_private: true,
        };
        let addrs: Vec<SocketAddr> = allowing
            .resolve(Name::from_str("localhost").expect("name"))
            .await
            .expect("resolves")
            .collect();
        assert!(addrs.iter().all(|a| a.ip().is_loopback()));
    }

    #[tokio::test]
    async fn the_save_time_check_reports_internal_names() {
        assert!(SystemAddressCheck.resolves_internal("localhost", 443).await);
        assert!(
            SystemAddressCheck
                .resolves_internal("localhost.", 443)
                .await
        );
        assert!(
            !SystemAddressCheck
                .resolves_internal("name.invalid", 443)
                .await,
            "unresolvable: not refused here"
        );
    }

    #[test]
    fn a_tls_failure_names_the_check_that_failed() {
        use rustls::CertificateError as C;
        let cert = |c: C| tls_reason(&rustls::Error::InvalidCertificate(c));
        assert_eq!(cert(C::Expired), "tls error: certificate expired");
        assert_eq!(cert(C::UnknownIssuer), "tls error: unknown issuer");
        assert_eq!(cert(C::NotValidForName), "tls error: name mismatch");
        #[derive(Debug)]
        struct CaUsedAsEndEntity;
        impl std::fmt::Display for CaUsedAsEndEntity {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("CaUsedAsEndEntity")
            }
        }
        impl std::error::Error for CaUsedAsEndEntity {}
        let other = rustls::OtherError(std::sync::Arc::new(CaUsedAsEndEntity));
        assert_eq!(cert(C::Other(other)), "tls error: certificate is a CA");
        assert_eq!(
            tls_reason(&rustls::Error::DecryptError),
            "tls error",
            "not a certificate check"
        );
    }

    #[tokio::test]
    async fn errors_are_classified_without_the_url() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("client");
        // A closed port on loopback: refused at once.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        drop(listener);
        let e = client
            .post(format!("https://127.0.0.1:{port}/h?token=SECRET"))
            .send()
            .await
            .expect_err("refused");
        match classify(&e) {
            Sent::NoAnswer { error, timed_out } => {
                assert_eq!(error, "connection refused");
                assert!(!timed_out);
            }
            Sent::Answered(..) | Sent::Unsent(_) => panic!("no answer expected"),
        }
    }
}
