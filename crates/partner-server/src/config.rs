//! Settings from the environment (see `operator-api.md`, "Running the server"). Every
//! variable is parsed at start; a malformed one stops the process with a message naming it.

use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::time::Duration;

use partner_http::{Quota, TrustedProxies};
use url::Url;

/// A setting that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("{var}: {reason}")]
pub struct ConfigError {
    pub var: &'static str,
    pub reason: String,
}

fn bad(var: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        var,
        reason: reason.into(),
    }
}

/// The server's settings. `Debug` shows neither the pepper nor the operator token, nor the
/// passwords of the database and Redis URLs.
#[derive(Clone)]
pub struct Config {
    pub database_url: String,
    pub bind: String,
    /// `PARTNER_METRICS_BIND`: a second listener serving `GET /metrics`.
    pub metrics_bind: Option<String>,
    pub token_pepper: Option<String>,
    pub internal_token: Option<String>,
    /// `PARTNER_INTERNAL_BIND`: when set, the operator API listens only there.
    pub internal_bind: Option<String>,
    pub base_url: Url,
    pub catalog_url: Url,
    pub intake_url: Url,
    pub legacy_intake_url: Url,
    pub care_services_url: Url,
    pub care_services_enabled: bool,
    pub rate_limit: Quota,
    /// `PARTNER_PUBLIC_RATE`: requests per second per client address on the public surfaces
    /// (catalog, embedded view), bursts up to twice that.
    pub public_rate: u32,
    /// `PARTNER_TRUSTED_PROXIES`: peers whose `X-Forwarded-For` names the client.
    pub trusted_proxies: TrustedProxies,
    /// How long a refused public request is held before its 429 (a flooding client's
    /// connections then wait instead of asking again at once). Not an environment setting.
    pub public_refusal_hold: Duration,
    /// `PARTNER_REDIS_URL`: when set, rate-limit budgets are shared through this Redis.
    pub redis_url: Option<String>,
    /// Prefix of this deployment's Redis keys. Not an environment setting (tests give each
    /// server group its own).
    pub redis_key_prefix: String,
    pub webhook_retry_schedule: Vec<Duration>,
    pub webhook_timeout: Duration,
    pub webhook_allow_private: bool,
    pub webhook_ca_file: Option<PathBuf>,
    pub log_filter: String,
    /// `PARTNER_LOG_FORMAT`: `json`, `text`, or unset (text on a terminal, else JSON).
    pub log_format: Option<LogFormat>,
    pub db_pool_size: usize,
    /// Attempts in flight at once in this process (`PARTNER_WEBHOOK_CONCURRENCY`).
    pub webhook_concurrency: usize,
    /// Attempts in flight at once per endpoint (`PARTNER_WEBHOOK_ENDPOINT_CONCURRENCY`).
    pub webhook_endpoint_concurrency: usize,
    /// Finished deliveries older than this are deleted (`PARTNER_WEBHOOK_RETENTION`).
    pub webhook_retention: Duration,
    /// Events older than this leave the events feed (`PARTNER_EVENT_RETENTION`); never shorter
    /// than `webhook_retention`.
    pub event_retention: Duration,
    /// An endpoint whose attempts all failed for this long is disabled
    /// (`PARTNER_WEBHOOK_DISABLE_AFTER`; `None`: never).
    pub webhook_disable_after: Option<Duration>,
    /// How long a rotated-out secret still signs (`PARTNER_WEBHOOK_SECRET_OVERLAP`).
    pub webhook_secret_overlap: Duration,
    /// How long a portal link's one-time code is valid (`PARTNER_PORTAL_CODE_TTL`).
    pub portal_code_ttl: Duration,
    /// How long a portal session lasts (`PARTNER_PORTAL_SESSION_TTL`).
    pub portal_session_ttl: Duration,
    /// How often a webhook worker that nothing woke looks for due deliveries (retries falling
    /// due; new deliveries wake it at once). Not an environment setting.
    pub webhook_poll_interval: Duration,
    /// How often exhausted deliveries are ended and old ones pruned. Not an environment setting.
    pub webhook_maintenance_interval: Duration,
    /// What this process runs (`serve --role`). Not an environment setting.
    pub role: Role,
    /// `PARTNER_SHUTDOWN_DRAIN`: after SIGTERM, how long the listeners keep accepting and serving
    /// (with `/readyz` at 503) before they stop accepting (src/shutdown.rs).
    pub shutdown_drain: Duration,
    /// `PARTNER_DB_HOLD_TIMEOUT`: the longest one use of a pooled database connection (a
    /// repository call, a transaction) may take; past it the connection is closed and replaced,
    /// and the call fails as `unavailable` (issue 23, N12). `None` (`0`): unbounded.
    pub db_hold_timeout: Option<Duration>,
    /// `PARTNER_DB_PROBE_TIMEOUT`: how long the database liveness probe's `SELECT 1` may go
    /// unanswered before the database is marked unreachable (its pooled connections closed,
    /// calls answered 503 at once until it answers again; extensions §11). `None` (`0`): no
    /// probe.
    pub db_probe_timeout: Option<Duration>,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// One JSON object a line.
    Json,
    /// Human-readable lines.
    Text,
}

/// What a `serve` process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Role {
    /// The API and the delivery worker.
    #[default]
    All,
    /// The API only: no deliveries are sent from this process.
    Api,
    /// The delivery worker, with only `/healthz` and `/readyz` served.
    Worker,
}

/// The highest `PARTNER_PUBLIC_RATE` accepted (a request then costs one microsecond).
pub const MAX_PUBLIC_RATE: u32 = 1_000_000;

/// The shortest `PARTNER_INTERNAL_TOKEN` accepted.
pub const MIN_INTERNAL_TOKEN: usize = 32;

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secret = |s: &Option<String>| s.as_ref().map(|_| "<redacted>");
        f.debug_struct("Config")
            .field("database_url", &redact_url(&self.database_url))
            .field("bind", &self.bind)
            .field("metrics_bind", &self.metrics_bind)
            .field("internal_bind", &self.internal_bind)
            .field("token_pepper", &secret(&self.token_pepper))
            .field("internal_token", &secret(&self.internal_token))
            .field("base_url", &self.base_url.as_str())
            .field("catalog_url", &self.catalog_url.as_str())
            .field("intake_url", &self.intake_url.as_str())
            .field("legacy_intake_url", &self.legacy_intake_url.as_str())
            .field("care_services_url", &self.care_services_url.as_str())
            .field("care_services_enabled", &self.care_services_enabled)
            .field("rate_limit", &self.rate_limit)
            .field("public_rate", &self.public_rate)
            .field("trusted_proxies", &self.trusted_proxies)
            .field("public_refusal_hold", &self.public_refusal_hold)
            .field("redis_url", &self.redis_url.as_deref().map(redact_url))
            .field("redis_key_prefix", &self.redis_key_prefix)
            .field("webhook_retry_schedule", &self.webhook_retry_schedule)
            .field("webhook_timeout", &self.webhook_timeout)
            .field("webhook_allow_private", &self.webhook_allow_private)
            .field("webhook_ca_file", &self.webhook_ca_file)
            .field("log_filter", &self.log_filter)
            .field("log_format", &self.log_format)
            .field("db_pool_size", &self.db_pool_size)
            .field("webhook_concurrency", &self.webhook_concurrency)
            .field(
                "webhook_endpoint_concurrency",
                &self.webhook_endpoint_concurrency,
            )
            .field("webhook_retention", &self.webhook_retention)
            .field("event_retention", &self.event_retention)
            .field("portal_code_ttl", &self.portal_code_ttl)
            .field("portal_session_ttl", &self.portal_session_ttl)
            .field("webhook_poll_interval", &self.webhook_poll_interval)
            .field(
                "webhook_maintenance_interval",
                &self.webhook_maintenance_interval,
            )
            .field("role", &self.role)
            .field("shutdown_drain", &self.shutdown_drain)
            .field("db_hold_timeout", &self.db_hold_timeout)
            .field("db_probe_timeout", &self.db_probe_timeout)
            .finish()
    }
}

/// `url` with its password, if any, replaced.
fn redact_url(url: &str) -> String {
    match Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("redacted"));
            u.to_string()
        }
        Ok(u) => u.to_string(),
        Err(_) => "<unparsable>".to_owned(),
    }
}

pub const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/partner_portal";
pub const DEFAULT_BIND: &str = "127.0.0.1:8080";

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads settings through `get` (the environment, or a map in tests).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        // Empty values count as unset, as most deployment tools write them.
        let get = |k: &str| get(k).filter(|v| !v.trim().is_empty());
        let database_url = get("DATABASE_URL").unwrap_or_else(|| DEFAULT_DATABASE_URL.to_owned());
        match Url::parse(&database_url) {
            Ok(u) if matches!(u.scheme(), "postgres" | "postgresql") => {}
            _ => {
                return Err(bad(
                    "DATABASE_URL",
                    "expected postgres://user@host:port/database",
                ));
            }
        }
        let bind = get("PARTNER_BIND").unwrap_or_else(|| DEFAULT_BIND.to_owned());
        if bind
            .to_socket_addrs()
            .map(|mut a| a.next().is_none())
            .unwrap_or(true)
        {
            return Err(bad(
                "PARTNER_BIND",
                "expected host:port, e.g. 127.0.0.1:8080",
            ));
        }
        let metrics_bind = match get("PARTNER_METRICS_BIND") {
            None => None,
            Some(v) if is_socket_addr(&v) => Some(v),
            Some(_) => {
                return Err(bad(
                    "PARTNER_METRICS_BIND",
                    "expected host:port, e.g. 127.0.0.1:9090",
                ));
            }
        };
        let own = format!("http://{bind}");
        let url = |var: &'static str, default: &str| -> Result<Url, ConfigError> {
            let raw = get(var).unwrap_or_else(|| default.to_owned());
            let u = Url::parse(&raw).map_err(|e| bad(var, format!("not an absolute URL ({e})")))?;
            if !matches!(u.scheme(), "http" | "https") || u.host().is_none() {
                return Err(bad(var, "expected an http(s) URL with a host"));
            }
            Ok(u)
        };
        let retention = |var: &'static str| match get(var) {
            None => Ok(Duration::from_secs(30 * 86_400)),
            Some(v) => parse_duration(&v)
                .filter(|d| !d.is_zero())
                .ok_or_else(|| bad(var, "expected a duration such as 30d")),
        };
        // A bound that `0` turns off: `default` when unset, else a duration within `range`.
        let optional_bound = |var: &'static str,
                              default: Duration,
                              range: std::ops::RangeInclusive<Duration>,
                              expected: &str| match get(var) {
            None => Ok(Some(default)),
            Some(v) if v.trim() == "0" => Ok(None),
            Some(v) => parse_duration(v.trim())
                .filter(|d| range.contains(d))
                .map(Some)
                .ok_or_else(|| bad(var, expected)),
        };
        let webhook_retention = retention("PARTNER_WEBHOOK_RETENTION")?;
        // Unset: 30 days, or the deliveries' retention when that is longer; a value given
        // shorter than the deliveries' is refused (an event outlives its deliveries).
        let event_retention = match get("PARTNER_EVENT_RETENTION") {
            None => retention("PARTNER_EVENT_RETENTION")?.max(webhook_retention),
            Some(_) => retention("PARTNER_EVENT_RETENTION")?,
        };
        if event_retention < webhook_retention {
            return Err(bad(
                "PARTNER_EVENT_RETENTION",
                "must be at least PARTNER_WEBHOOK_RETENTION (events outlive their deliveries)",
            ));
        }
        Ok(Self {
            token_pepper: get("PARTNER_TOKEN_PEPPER"),
            internal_token: match get("PARTNER_INTERNAL_TOKEN") {
                Some(t) if t.chars().count() < MIN_INTERNAL_TOKEN => {
                    return Err(bad(
                        "PARTNER_INTERNAL_TOKEN",
                        format!("must be at least {MIN_INTERNAL_TOKEN} characters"),
                    ));
                }
                t => t,
            },
            internal_bind: match get("PARTNER_INTERNAL_BIND") {
                None => None,
                Some(v) if is_socket_addr(&v) => Some(v),
                Some(_) => {
                    return Err(bad(
                        "PARTNER_INTERNAL_BIND",
                        "expected host:port, e.g. 10.0.0.5:8081",
                    ));
                }
            },
            base_url: url("PARTNER_BASE_URL", &own)?,
            catalog_url: url("PARTNER_CATALOG_URL", &own)?,
            intake_url: url("PARTNER_INTAKE_URL", "https://intake.example.com")?,
            legacy_intake_url: url(
                "PARTNER_LEGACY_INTAKE_URL",
                "https://legacy-intake.example.com",
            )?,
            care_services_url: url("PARTNER_CARE_SERVICES_URL", "https://care.example.com")?,
            care_services_enabled: match get("CARE_SERVICES_API_ENABLED") {
                None => true,
                Some(v) => parse_bool(&v)
                    .ok_or_else(|| bad("CARE_SERVICES_API_ENABLED", "expected true or false"))?,
            },
            rate_limit: match get("PARTNER_RATE_LIMIT") {
                None => Quota {
                    limit: 600,
                    window_secs: 60,
                },
                Some(v) => parse_quota(&v).ok_or_else(|| {
                    bad(
                        "PARTNER_RATE_LIMIT",
                        "expected <count>/<seconds>s, e.g. 600/60s",
                    )
                })?,
            },
            public_rate: match get("PARTNER_PUBLIC_RATE") {
                None => 50,
                Some(v) => v
                    .trim()
                    .parse()
                    .ok()
                    .filter(|n| (1..=MAX_PUBLIC_RATE).contains(n))
                    .ok_or_else(|| {
                        bad(
                            "PARTNER_PUBLIC_RATE",
                            format!("expected an integer from 1 to {MAX_PUBLIC_RATE}"),
                        )
                    })?,
            },
            trusted_proxies: match get("PARTNER_TRUSTED_PROXIES") {
                None => TrustedProxies::default(),
                Some(v) => TrustedProxies::parse(&v).map_err(|entry| {
                    bad(
                        "PARTNER_TRUSTED_PROXIES",
                        format!(
                            "{entry:?} is not an IP address or CIDR range; expected e.g. 10.0.0.0/8,192.0.2.7"
                        ),
                    )
                })?,
            },
            public_refusal_hold: Duration::from_secs(1),
            redis_url: match get("PARTNER_REDIS_URL") {
                None => None,
                Some(v) => match Url::parse(v.trim()) {
                    Ok(u) if u.scheme() == "redis" && u.host().is_some() => {
                        Some(v.trim().to_owned())
                    }
                    _ => {
                        return Err(bad(
                            "PARTNER_REDIS_URL",
                            "expected redis://[:password@]host:port[/db]",
                        ));
                    }
                },
            },
            redis_key_prefix: "partner:".to_owned(),
            webhook_retry_schedule: match get("PARTNER_WEBHOOK_RETRY_SCHEDULE") {
                None => ["10s", "1m", "6m", "36m", "216m", "1296m"]
                    .iter()
                    .filter_map(|d| parse_duration(d))
                    .collect(),
                Some(v) => v
                    .split(',')
                    .map(|d| parse_duration(d.trim()))
                    .collect::<Option<Vec<_>>>()
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| {
                        bad(
                            "PARTNER_WEBHOOK_RETRY_SCHEDULE",
                            "expected comma-separated durations, e.g. 1s,2s,4s",
                        )
                    })?,
            },
            webhook_timeout: match get("PARTNER_WEBHOOK_TIMEOUT") {
                None => Duration::from_secs(10),
                Some(v) => parse_duration(&v).filter(|d| !d.is_zero()).ok_or_else(|| {
                    bad("PARTNER_WEBHOOK_TIMEOUT", "expected a duration such as 10s")
                })?,
            },
            webhook_allow_private: match get("PARTNER_WEBHOOK_ALLOW_PRIVATE") {
                None => false,
                Some(v) => parse_bool(&v).ok_or_else(|| {
                    bad("PARTNER_WEBHOOK_ALLOW_PRIVATE", "expected true or false")
                })?,
            },
            webhook_ca_file: match get("PARTNER_WEBHOOK_CA_FILE") {
                None => None,
                Some(v) => {
                    let p = PathBuf::from(v);
                    let pem = std::fs::read_to_string(&p).map_err(|e| {
                        bad(
                            "PARTNER_WEBHOOK_CA_FILE",
                            format!("cannot read the file ({e})"),
                        )
                    })?;
                    if !pem.contains("-----BEGIN CERTIFICATE-----") {
                        return Err(bad(
                            "PARTNER_WEBHOOK_CA_FILE",
                            "no PEM certificate in the file",
                        ));
                    }
                    Some(p)
                }
            },
            log_filter: get("RUST_LOG").unwrap_or_else(|| "info".to_owned()),
            log_format: match get("PARTNER_LOG_FORMAT").map(|v| v.trim().to_ascii_lowercase()) {
                None => None,
                Some(v) if v == "json" => Some(LogFormat::Json),
                Some(v) if v == "text" => Some(LogFormat::Text),
                Some(_) => return Err(bad("PARTNER_LOG_FORMAT", "expected json or text")),
            },
            db_pool_size: match get("PARTNER_DB_POOL_SIZE") {
                None => 16,
                Some(v) => v
                    .parse()
                    .ok()
                    .filter(|n| (1..=1000).contains(n))
                    .ok_or_else(|| {
                        bad("PARTNER_DB_POOL_SIZE", "expected an integer from 1 to 1000")
                    })?,
            },
            webhook_concurrency: count(&get, "PARTNER_WEBHOOK_CONCURRENCY", 256, 10_000)?,
            webhook_endpoint_concurrency: count(
                &get,
                "PARTNER_WEBHOOK_ENDPOINT_CONCURRENCY",
                4,
                1_000,
            )?,
            webhook_retention,
            event_retention,
            webhook_disable_after: match get("PARTNER_WEBHOOK_DISABLE_AFTER") {
                None => Some(Duration::from_secs(5 * 86_400)),
                Some(v) if v.trim() == "0" => None,
                Some(v) => Some(parse_duration(v.trim()).ok_or_else(|| {
                    bad(
                        "PARTNER_WEBHOOK_DISABLE_AFTER",
                        "expected a duration such as 5d, or 0 for never",
                    )
                })?)
                .filter(|d| !d.is_zero()),
            },
            webhook_secret_overlap: match get("PARTNER_WEBHOOK_SECRET_OVERLAP") {
                None => Duration::from_secs(86_400),
                Some(v) if v.trim() == "0" => Duration::ZERO,
                Some(v) => parse_duration(v.trim()).ok_or_else(|| {
                    bad(
                        "PARTNER_WEBHOOK_SECRET_OVERLAP",
                        "expected a duration such as 24h, or 0",
                    )
                })?,
            },
            portal_code_ttl: positive(&get, "PARTNER_PORTAL_CODE_TTL", 600, "10m")?,
            portal_session_ttl: positive(&get, "PARTNER_PORTAL_SESSION_TTL", 3600, "1h")?,
            webhook_poll_interval: Duration::from_millis(500),
            webhook_maintenance_interval: Duration::from_secs(30),
            role: Role::All,
            shutdown_drain: match get("PARTNER_SHUTDOWN_DRAIN") {
                None => Duration::from_secs(1),
                Some(v) if v.trim() == "0" => Duration::ZERO,
                Some(v) => parse_duration(v.trim())
                    .filter(|d| *d <= Duration::from_secs(300))
                    .ok_or_else(|| {
                        bad(
                            "PARTNER_SHUTDOWN_DRAIN",
                            "expected a duration such as 1s, or 0, at most 5m",
                        )
                    })?,
            },
            db_hold_timeout: optional_bound(
                "PARTNER_DB_HOLD_TIMEOUT",
                partner_postgres::DEFAULT_HOLD,
                Duration::from_millis(100)..=Duration::from_secs(600),
                "expected a duration from 100ms to 10m, such as 5s, or 0 (unbounded)",
            )?,
            db_probe_timeout: optional_bound(
                "PARTNER_DB_PROBE_TIMEOUT",
                partner_postgres::DEFAULT_PROBE,
                Duration::from_millis(100)..=Duration::from_secs(60),
                "expected a duration from 100ms to 60s, such as 600ms, or 0 (no probe)",
            )?,
            metrics_bind,
            database_url,
            bind,
        })
    }
}

/// A positive duration setting (`10m`, `1h`, …), at most a day; `default_secs` when unset.
fn positive(
    get: &impl Fn(&str) -> Option<String>,
    var: &'static str,
    default_secs: u64,
    example: &'static str,
) -> Result<Duration, ConfigError> {
    match get(var) {
        None => Ok(Duration::from_secs(default_secs)),
        Some(v) => parse_duration(v.trim())
            .filter(|d| !d.is_zero() && *d <= Duration::from_secs(86_400))
            .ok_or_else(|| {
                bad(
                    var,
                    format!("expected a duration such as {example}, at most 24h"),
                )
            }),
    }
}

fn is_socket_addr(s: &str) -> bool {
    s.to_socket_addrs().is_ok_and(|mut a| a.next().is_some())
}

/// A positive integer setting up to `max`.
fn count(
    get: &impl Fn(&str) -> Option<String>,
    var: &'static str,
    default: usize,
    max: usize,
) -> Result<usize, ConfigError> {
    match get(var) {
        None => Ok(default),
        Some(v) => v
            .trim()
            .parse()
            .ok()
            .filter(|n| (1..=max).contains(n))
            .ok_or_else(|| bad(var, format!("expected an integer from 1 to {max}"))),
    }
}

fn parse_bool(s: &str) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Some(true),
        "false" | "0" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// `600/60s`.
fn parse_quota(s: &str) -> Option<Quota> {
    let (count, window) = s.trim().split_once('/')?;
    let limit: u32 = count.parse().ok().filter(|n| *n > 0)?;
    let window_secs: u32 = window.strip_suffix('s')?.parse().ok().filter(|n| *n > 0)?;
    Some(Quota { limit, window_secs })
}

/// `250ms`, `10s`, `6m`, `2h`, `30d`.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let split = s.find(|c: char| !c.is_ascii_digit())?;
    let (n, unit) = s.split_at(split);
    let n: u64 = n.parse().ok()?;
    match unit {
        "ms" => Some(Duration::from_millis(n)),
        "s" => Some(Duration::from_secs(n)),
        "m" => n.checked_mul(60).map(Duration::from_secs),
        "h" => n.checked_mul(3600).map(Duration::from_secs),
        "d" => n.checked_mul(86_400).map(Duration::from_secs),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn with(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Config::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn defaults() {
        let c = with(&[]).expect("defaults parse");
        assert_eq!(c.database_url, DEFAULT_DATABASE_URL);
        assert_eq!(c.base_url.as_str(), "http://127.0.0.1:8080/");
        assert_eq!(c.portal_code_ttl, Duration::from_secs(600));
        assert_eq!(c.portal_session_ttl, Duration::from_secs(3600));
        assert_eq!(
            c.rate_limit,
            Quota {
                limit: 600,
                window_secs: 60
            }
        );
        assert_eq!(c.webhook_retry_schedule.len(), 6);
        assert_eq!(c.webhook_retry_schedule[5], Duration::from_secs(1296 * 60));
        assert!(c.token_pepper.is_none() && c.internal_token.is_none() && c.care_services_enabled);
        assert_eq!(
            (c.webhook_concurrency, c.webhook_endpoint_concurrency),
            (256, 4)
        );
        assert_eq!(c.webhook_retention, Duration::from_secs(30 * 86_400));
        assert_eq!(c.event_retention, Duration::from_secs(30 * 86_400));
        assert_eq!(
            c.webhook_disable_after,
            Some(Duration::from_secs(5 * 86_400))
        );
        assert_eq!(c.webhook_secret_overlap, Duration::from_secs(86_400));
        assert_eq!(c.shutdown_drain, Duration::from_secs(1));
        assert_eq!(c.db_hold_timeout, Some(Duration::from_secs(5)));
        assert_eq!(c.db_probe_timeout, Some(Duration::from_millis(600)));
        assert_eq!(c.public_rate, 50);
        assert!(c.trusted_proxies.is_empty());
    }

    #[test]
    fn the_database_probe_timeout_is_a_duration_or_0_for_none() {
        let c = with(&[("PARTNER_DB_PROBE_TIMEOUT", "1s")]).expect("parses");
        assert_eq!(c.db_probe_timeout, Some(Duration::from_secs(1)));
        let c = with(&[("PARTNER_DB_PROBE_TIMEOUT", "0")]).expect("parses");
        assert_eq!(c.db_probe_timeout, None);
    }

    #[test]
    fn each_malformed_variable_is_named() {
        for (var, value) in [
            ("DATABASE_URL", "mysql://x"),
            ("PARTNER_BIND", "nowhere"),
            ("PARTNER_METRICS_BIND", "9090"),
            ("PARTNER_LOG_FORMAT", "xml"),
            ("PARTNER_INTERNAL_TOKEN", "short-operator-token"),
            ("PARTNER_INTERNAL_BIND", "internal"),
            ("PARTNER_BASE_URL", "not a url"),
            ("PARTNER_INTAKE_URL", "ftp://x.test"),
            ("CARE_SERVICES_API_ENABLED", "maybe"),
            ("PARTNER_RATE_LIMIT", "600"),
            ("PARTNER_RATE_LIMIT", "0/60s"),
            ("PARTNER_PUBLIC_RATE", "0"),
            ("PARTNER_PUBLIC_RATE", "50/s"),
            ("PARTNER_TRUSTED_PROXIES", "10.0.0.0/8,lb.internal"),
            ("PARTNER_TRUSTED_PROXIES", "10.0.0.0/40"),
            ("PARTNER_REDIS_URL", "localhost:6379"),
            ("PARTNER_REDIS_URL", "rediss://cache.internal:6379"),
            ("PARTNER_WEBHOOK_RETRY_SCHEDULE", "1s,soon"),
            ("PARTNER_PORTAL_CODE_TTL", "0"),
            ("PARTNER_PORTAL_CODE_TTL", "10"),
            ("PARTNER_PORTAL_SESSION_TTL", "2d"),
            ("PARTNER_WEBHOOK_TIMEOUT", "0s"),
            ("PARTNER_WEBHOOK_ALLOW_PRIVATE", "2"),
            ("PARTNER_WEBHOOK_CA_FILE", "/nonexistent.pem"),
            ("PARTNER_DB_POOL_SIZE", "0"),
            ("PARTNER_WEBHOOK_CONCURRENCY", "0"),
            ("PARTNER_WEBHOOK_ENDPOINT_CONCURRENCY", "many"),
            ("PARTNER_WEBHOOK_RETENTION", "0d"),
            ("PARTNER_WEBHOOK_RETENTION", "month"),
            ("PARTNER_WEBHOOK_DISABLE_AFTER", "soon"),
            ("PARTNER_WEBHOOK_SECRET_OVERLAP", "1y"),
            ("PARTNER_EVENT_RETENTION", "0d"),
            ("PARTNER_EVENT_RETENTION", "a while"),
            ("PARTNER_SHUTDOWN_DRAIN", "soon"),
            ("PARTNER_SHUTDOWN_DRAIN", "1h"),
            ("PARTNER_DB_PROBE_TIMEOUT", "50ms"),
            ("PARTNER_DB_PROBE_TIMEOUT", "2m"),
            ("PARTNER_DB_PROBE_TIMEOUT", "fast"),
        ] {
            let err = with(&[(var, value)]).expect_err(var);
            assert_eq!(err.var, var);
            assert!(err.to_string().starts_with(var));
        }
    }

    #[test]
    fn events_are_kept_at_least_as_long_as_their_deliveries() {
        let c = with(&[("PARTNER_WEBHOOK_RETENTION", "60d")]).expect("parses");
        assert_eq!(c.event_retention, Duration::from_secs(60 * 86_400));
        let err = with(&[
            ("PARTNER_WEBHOOK_RETENTION", "30d"),
            ("PARTNER_EVENT_RETENTION", "7d"),
        ])
        .expect_err("shorter than the deliveries'");
        assert_eq!(err.var, "PARTNER_EVENT_RETENTION");
        let c = with(&[("PARTNER_EVENT_RETENTION", "90d")]).expect("parses");
        assert_eq!(c.event_retention, Duration::from_secs(90 * 86_400));
    }

    #[test]
    fn debug_shows_no_secret() {
        let c = with(&[
            ("PARTNER_TOKEN_PEPPER", "pepper-secret-value"),
            (
                "PARTNER_INTERNAL_TOKEN",
                "operator-secret-value-0123456789abcdef",
            ),
            ("DATABASE_URL", "postgres://app:db-secret-pw@db:5432/pp"),
            ("PARTNER_REDIS_URL", "redis://:redis-secret-pw@cache:6379"),
        ])
        .expect("parses");
        let shown = format!("{c:?}");
        for secret in [
            "pepper-secret-value",
            "operator-secret-value",
            "db-secret-pw",
            "redis-secret-pw",
        ] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        assert!(shown.contains("<redacted>") && shown.contains("db:5432"));
    }

    #[test]
    fn values_parse() {
        let c = with(&[
            ("PARTNER_RATE_LIMIT", "5/2s"),
            ("PARTNER_WEBHOOK_RETRY_SCHEDULE", "1s, 2s,250ms"),
            ("CARE_SERVICES_API_ENABLED", "false"),
            ("PARTNER_TOKEN_PEPPER", "p"),
            ("PARTNER_BIND", "127.0.0.1:0"),
            ("PARTNER_WEBHOOK_CONCURRENCY", "64"),
            ("PARTNER_WEBHOOK_ENDPOINT_CONCURRENCY", "2"),
            ("PARTNER_WEBHOOK_RETENTION", "7d"),
            ("PARTNER_EVENT_RETENTION", "14d"),
            ("PARTNER_WEBHOOK_DISABLE_AFTER", "0"),
            ("PARTNER_WEBHOOK_SECRET_OVERLAP", "90m"),
            ("PARTNER_REDIS_URL", "redis://127.0.0.1:6379/0"),
            ("PARTNER_LOG_FORMAT", "JSON"),
            ("PARTNER_INTERNAL_TOKEN", "an-operator-token-of-32-chars-xx"),
            ("PARTNER_INTERNAL_BIND", "127.0.0.1:0"),
            ("PARTNER_PUBLIC_RATE", " 200 "),
            ("PARTNER_TRUSTED_PROXIES", "10.0.0.0/8, 192.0.2.7, fd00::/8"),
        ])
        .expect("parses");
        assert_eq!(c.public_rate, 200);
        assert!(
            c.trusted_proxies
                .contains("10.20.30.40".parse().expect("ip"))
        );
        assert!(c.trusted_proxies.contains("192.0.2.7".parse().expect("ip")));
        assert!(!c.trusted_proxies.contains("192.0.2.8".parse().expect("ip")));
        assert_eq!(c.redis_url.as_deref(), Some("redis://127.0.0.1:6379/0"));
        assert_eq!(c.log_format, Some(LogFormat::Json));
        assert_eq!(c.internal_bind.as_deref(), Some("127.0.0.1:0"));
        assert!(c.internal_token.is_some());
        assert_eq!(
            (c.webhook_concurrency, c.webhook_endpoint_concurrency),
            (64, 2)
        );
        assert_eq!(c.webhook_retention, Duration::from_secs(7 * 86_400));
        assert_eq!(c.event_retention, Duration::from_secs(14 * 86_400));
        assert_eq!(c.webhook_disable_after, None);
        assert_eq!(c.webhook_secret_overlap, Duration::from_secs(90 * 60));
        assert_eq!(
            c.rate_limit,
            Quota {
                limit: 5,
                window_secs: 2
            }
        );
        assert_eq!(c.webhook_retry_schedule[2], Duration::from_millis(250));
        assert!(!c.care_services_enabled);
        assert_eq!(c.token_pepper.as_deref(), Some("p"));
    }
}
