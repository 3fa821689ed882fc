//! Webhook delivery worker (reqwest + rustls).
//!
//! Deliveries are rows written with the change that caused them (the outbox). Each [`Worker`]
//! claims due rows with `FOR UPDATE SKIP LOCKED` under a lease, so any number of server instances
//! share the work and a crashed attempt is retried when its lease ends (at-least-once). Each
//! delivery runs as its own task with its own timeout, so a slow or failing endpoint never holds
//! up another. Payloads are built when sent (a delayed `lead.created` carries the phone supplied
//! during the delay), serialized once, signed over those exact bytes, and posted over HTTPS
//! without following redirects; only a 2xx ends a delivery, anything else is retried on the
//! configured schedule with ±10 % jitter. Names are resolved through a filter that refuses
//! loopback, private and other internal addresses at connect time, unless allowed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use partner_domain::clock::Clock;
use partner_domain::ports::{AddressCheck, DeliveryRepo};
use partner_domain::random::Random;
use partner_domain::webhook::{
    ClaimedDelivery, EventKind, delivery_body, is_internal, next_retry, signature_header,
};
use serde_json::json;
use tokio::sync::Semaphore;

/// Worker settings.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Delays after the first, second… failed attempt.
    pub retry_schedule: Vec<Duration>,
    /// One attempt's timeout.
    pub timeout: Duration,
    /// Let endpoints resolve to loopback and private addresses (tests, development).
    pub allow_private: bool,
    /// Extra PEM root certificates trusted for deliveries.
    pub extra_roots_pem: Option<Vec<u8>>,
    /// How long an idle worker waits before looking for due deliveries again.
    pub poll_interval: Duration,
    /// Deliveries in flight at once, per worker.
    pub concurrency: usize,
}

/// Errors of building a worker.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("PARTNER_WEBHOOK_CA_FILE holds no usable PEM certificate: {0}")]
    Roots(String),
    #[error("cannot build the HTTPS client: {0}")]
    Client(String),
}

/// Resolves names for reqwest, dropping internal addresses unless they are allowed. Doing this
/// at connect time (not only when an endpoint is saved) also defeats DNS rebinding.
#[derive(Debug, Clone, Copy)]
struct FilteringResolver {
    allow_private: bool,
}

impl reqwest::dns::Resolve for FilteringResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allow_private = self.allow_private;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = addrs
                .into_iter()
                .filter(|a| allow_private || !is_internal(a.ip()))
                .collect();
            if allowed.is_empty() {
                return Err(
                    format!("{host} resolves only to internal addresses, or not at all").into(),
                );
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
        match tokio::time::timeout(
            Duration::from_secs(3),
            tokio::net::lookup_host((host, port)),
        )
        .await
        {
            Ok(Ok(addrs)) => addrs.into_iter().any(|a| is_internal(a.ip())),
            _ => false,
        }
    }
}

/// The delivery worker.
#[derive(Clone)]
pub struct Worker {
    repo: Arc<dyn DeliveryRepo>,
    clock: Arc<dyn Clock>,
    rng: Arc<dyn Random>,
    client: reqwest::Client,
    config: WorkerConfig,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("config", &self.config)
            .finish()
    }
}

/// How one attempt ended.
enum Outcome {
    Delivered(u16),
    Failed(Option<u16>, String),
}

impl Worker {
    pub fn new(
        repo: Arc<dyn DeliveryRepo>,
        clock: Arc<dyn Clock>,
        rng: Arc<dyn Random>,
        config: WorkerConfig,
    ) -> Result<Self, WorkerError> {
        // reqwest is built without a default crypto provider; ring is the one this workspace uses.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .user_agent(concat!(
                "partner-portal-webhooks/",
                env!("CARGO_PKG_VERSION")
            ))
            .dns_resolver(FilteringResolver {
                allow_private: config.allow_private,
            });
        if let Some(pem) = &config.extra_roots_pem {
            let certs = reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| WorkerError::Roots(e.to_string()))?;
            if certs.is_empty() {
                return Err(WorkerError::Roots("no certificate in the file".into()));
            }
            builder = builder.tls_certs_merge(certs);
        }
        let client = builder
            .build()
            .map_err(|e| WorkerError::Client(e.to_string()))?;
        Ok(Self {
            repo,
            clock,
            rng,
            client,
            config,
        })
    }

    /// Runs forever: claims due deliveries while there are free slots, sends each in its own
    /// task, and sleeps `poll_interval` when nothing is due.
    pub async fn run(self) {
        let slots = Arc::new(Semaphore::new(self.config.concurrency.max(1)));
        loop {
            let free = slots.available_permits();
            let claimed = if free == 0 {
                0
            } else {
                self.claim_and_spawn(&slots, free).await
            };
            if claimed == 0 {
                tokio::time::sleep(self.config.poll_interval).await;
            }
        }
    }

    async fn claim_and_spawn(&self, slots: &Arc<Semaphore>, free: usize) -> usize {
        let now = self.clock.now();
        let lease = now + self.config.timeout + Duration::from_secs(30);
        let claimed = match self
            .repo
            .claim_due(now, lease, u16::try_from(free).unwrap_or(u16::MAX))
            .await
        {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "claiming webhook deliveries failed");
                return 0;
            }
        };
        let n = claimed.len();
        for d in claimed {
            let Ok(permit) = slots.clone().acquire_owned().await else {
                break;
            };
            let me = self.clone();
            tokio::spawn(async move {
                me.attempt(d).await;
                drop(permit);
            });
        }
        n
    }

    /// One attempt of one delivery, and its bookkeeping.
    async fn attempt(&self, d: ClaimedDelivery) {
        let outcome = match self.payload(&d).await {
            Ok(Some(body)) => self.send(&d, body).await,
            Ok(None) => Outcome::Failed(
                None,
                "the record this event is about no longer exists".into(),
            ),
            Err(e) => Outcome::Failed(None, format!("building the payload failed: {e}")),
        };
        let now = self.clock.now();
        let result = match outcome {
            Outcome::Delivered(status) => self.repo.record_success(d.id, now, status).await,
            Outcome::Failed(status, error) => {
                let attempts = u32::try_from(d.attempts).unwrap_or(0) + 1;
                let jitter = {
                    let mut b = [0u8; 4];
                    self.rng.fill(&mut b);
                    f64::from(u32::from_le_bytes(b)) / f64::from(u32::MAX)
                };
                let retry_at =
                    next_retry(&self.config.retry_schedule, attempts, jitter).map(|d| now + d);
                tracing::info!(delivery = %d.id, attempts, status, error = %error, retry = retry_at.is_some(), "webhook attempt failed");
                self.repo
                    .record_failure(d.id, now, status, &error, retry_at)
                    .await
            }
        };
        if let Err(e) = result {
            // The lease ends and the delivery is attempted again: at-least-once.
            tracing::warn!(delivery = %d.id, error = %e, "recording a webhook attempt failed");
        }
    }

    /// `{ id, event, created_at, data }`, with `data` read now. `None` when the subject is gone.
    async fn payload(
        &self,
        d: &ClaimedDelivery,
    ) -> Result<Option<Vec<u8>>, partner_domain::RepoError> {
        let uuid = || uuid::Uuid::parse_str(&d.subject).ok();
        let extra = |k: &str| d.extra.get(k).cloned().unwrap_or(serde_json::Value::Null);
        let data = match d.kind {
            EventKind::LeadCreated | EventKind::LeadEnriched => {
                let Some(id) = uuid() else { return Ok(None) };
                let Some(lead) = self.repo.lead(id).await? else {
                    return Ok(None);
                };
                if d.kind == EventKind::LeadCreated {
                    json!({ "lead": lead.row() })
                } else {
                    json!({ "lead": lead.row(), "previousPhone": extra("previousPhone"), "currentPhone": extra("currentPhone") })
                }
            }
            EventKind::OrderCreated => {
                let Some(o) = self.repo.order(&d.subject).await? else {
                    return Ok(None);
                };
                json!({ "source": extra("source"), "order": o.order.render(&o.sub_account, false) })
            }
            EventKind::PayoutCreated => {
                let Some(id) = uuid() else { return Ok(None) };
                let Some(p) = self.repo.payout(id).await? else {
                    return Ok(None);
                };
                json!({ "payout": p.row() })
            }
        };
        Ok(Some(delivery_body(d.id, d.kind, d.event_created_at, data)))
    }

    async fn send(&self, d: &ClaimedDelivery, body: Vec<u8>) -> Outcome {
        let url = match url::Url::parse(&d.url) {
            Ok(u) => u,
            Err(e) => return Outcome::Failed(None, format!("invalid endpoint URL: {e}")),
        };
        // Literal addresses skip the resolver, so they are checked here.
        let literal = match url.host() {
            Some(url::Host::Ipv4(ip)) => Some(std::net::IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => Some(std::net::IpAddr::V6(ip)),
            _ => None,
        };
        if literal.is_some_and(is_internal) && !self.config.allow_private {
            return Outcome::Failed(None, "the endpoint address is internal".into());
        }
        let mut req = self
            .client
            .post(url)
            .header("Content-Type", "application/json")
            .header("X-Partner-Event", d.kind.as_str())
            .header("X-Partner-Delivery", d.id.to_string());
        if let Some(secret) = &d.secret {
            req = req.header(
                "X-Partner-Signature",
                signature_header(secret, self.clock.now().unix_timestamp(), &body),
            );
        }
        if let Some(h) = &d.custom_header {
            req = req.header(h.name.as_str(), h.value.as_str());
        }
        match req.body(body).send().await {
            Ok(res) if res.status().is_success() => Outcome::Delivered(res.status().as_u16()),
            Ok(res) => Outcome::Failed(
                Some(res.status().as_u16()),
                format!("answered {}", res.status()),
            ),
            Err(e) => Outcome::Failed(None, error_chain(&e)),
        }
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
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
            !SystemAddressCheck
                .resolves_internal("name.invalid", 443)
                .await,
            "unresolvable: not refused here"
        );
    }
}
