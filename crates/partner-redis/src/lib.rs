//! Redis adapter of the rate-limit port ([`RateLimitStore`]): every server instance charges
//! the same budgets, so a token gets one budget per window behind any number of instances.
//!
//! The budget of a token in a group for an aligned window is one count in Redis, on a key named
//! after the token, the group and the window's start (so `X-RateLimit-Reset` is the same as with
//! the in-process limiter). An instance takes units of it by *leases* ([`lease`]): one atomic
//! script grants up to [`LEASE_MAX`] units, never beyond the budget, and the instance spends
//! them in memory, one per admitted request. A client calling one request at a time leases one
//! unit per request; a busy one, a batch per Redis round trip. No window admits more than the
//! budget; units leased by one instance are spent only by it (the bound: [`lease`]). A refund
//! (a charged request whose authentication then failed) gives the unit back to the lease.
//!
//! When Redis cannot be reached (refused, reset, or no answer within the decision timeout) the
//! request is decided by this process's in-process budgets instead: requests are served (fail
//! open) — the local count never exceeds what the shared count would have been, so nothing
//! Redis would have allowed is refused. Each such decision is counted (`rate_limiter_errors_total`,
//! [`RedisRateLimiter::errors`]) and logged at most once per [`LOG_INTERVAL`]. A lost
//! connection is re-established on a later request, at most once per [`RECONNECT_AFTER`]. The
//! requests waiting for one lease while Redis fails are decided in-process together, without
//! asking Redis again one after another.
//!
//! The same limiter holds the public surfaces' budgets per client address ([`PublicLimitStore`],
//! extensions.md §12): the domain's rule ([`partner_domain::rate_limit::gcra`]) run in one
//! script on the client's stored arrival time, with the time the server's clock gives (so every
//! instance shares one budget per address), and the same fallback when Redis cannot answer.

#![cfg_attr(test, allow(clippy::expect_used, clippy::indexing_slicing))]

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use partner_domain::kernel::ids::TokenId;
use partner_domain::rate_limit::{
    Decision, Group, PublicDecision, PublicLimitStore, PublicLimiter, PublicQuota, Quota,
    RateLimitStore, RateLimiter, window,
};
use redis::AsyncConnectionConfig;
use redis::aio::MultiplexedConnection;
use std::net::IpAddr;

pub mod lease;
use lease::Slot;
pub use lease::{LEASE_MAX, LEASE_SHARE};

/// Slots kept before those of past windows are dropped.
const PRUNE_ABOVE: usize = 100_000;

/// Errors are logged at most this often (the count is always kept).
pub const LOG_INTERVAL: Duration = Duration::from_secs(10);
/// After a failed connection attempt, the next is tried no sooner than this. Short enough that
/// the budgets are shared again within a second of Redis's return (extensions §11; drill 4 of
/// issue 24 measures it), long enough that a Redis that is down costs at most four connection
/// attempts a second per process.
pub const RECONNECT_AFTER: Duration = Duration::from_millis(250);

/// The GCRA of [`partner_domain::rate_limit::gcra`] on the client's stored arrival time
/// (microseconds; `string.format` keeps every digit, which `tostring` would not). Returns 0 when
/// admitted, else the microseconds to wait.
const PUBLIC_SCRIPT: &str = r"
local now = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local tolerance = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or ARGV[1])
if tat < now then tat = now end
local nxt = tat + interval
local over = nxt - now - tolerance
if over > 0 then return over end
redis.call('SET', KEYS[1], string.format('%d', nxt), 'PX', math.ceil((nxt - now) / 1000) + 1000)
return 0
";

/// A `PARTNER_REDIS_URL` that the driver does not accept; the driver's error is the source.
#[derive(Debug, thiserror::Error)]
#[error("not a Redis URL the driver accepts: {0}")]
pub struct BadUrl(#[source] redis::RedisError);

/// The Redis-backed limiter.
pub struct RedisRateLimiter {
    client: redis::Client,
    quota: Quota,
    prefix: String,
    timeout: Duration,
    script: redis::Script,
    slots: Mutex<HashMap<(TokenId, Group), Arc<Slot>>>,
    leases: AtomicU64,
    fallback: RateLimiter,
    public_script: redis::Script,
    public_fallback: PublicLimiter,
    conn: Mutex<Option<MultiplexedConnection>>,
    connecting: tokio::sync::Mutex<Option<Instant>>,
    errors: AtomicU64,
    log: Mutex<LogState>,
}

#[derive(Debug, Default)]
struct LogState {
    last: Option<Instant>,
    suppressed: u64,
}

impl std::fmt::Debug for RedisRateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may carry a password: it is not shown.
        f.debug_struct("RedisRateLimiter")
            .field("quota", &self.quota)
            .field("public_quota", &self.public_fallback.quota())
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("errors", &self.errors.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl RedisRateLimiter {
    /// A limiter on the Redis at `url` (`redis://[:password@]host:port[/db]`), with keys
    /// starting with `prefix`, giving Redis at most `timeout` per decision. Connects lazily: a
    /// Redis that is down at start is not an error.
    pub fn new(url: &str, prefix: &str, quota: Quota, timeout: Duration) -> Result<Self, BadUrl> {
        let client = redis::Client::open(url).map_err(BadUrl)?;
        Ok(Self {
            client,
            quota,
            prefix: prefix.to_owned(),
            timeout,
            script: redis::Script::new(lease::LEASE_SCRIPT),
            slots: Mutex::new(HashMap::new()),
            leases: AtomicU64::new(0),
            fallback: RateLimiter::new(quota),
            public_script: redis::Script::new(PUBLIC_SCRIPT),
            public_fallback: PublicLimiter::new(PublicQuota::default()),
            conn: Mutex::new(None),
            connecting: tokio::sync::Mutex::new(None),
            errors: AtomicU64::new(0),
            log: Mutex::new(LogState::default()),
        })
    }

    /// The public surfaces' budget per client address (default: [`PublicQuota::default`]).
    #[must_use]
    pub fn with_public_quota(mut self, quota: PublicQuota) -> Self {
        self.public_fallback = PublicLimiter::new(quota);
        self
    }

    /// Connects now, so the first requests find a connection (without this, the requests that
    /// arrive while the first one connects are decided in-process). A Redis that cannot be
    /// reached is logged, not an error: requests will be served, and it is retried later.
    pub async fn warm_up(&self) {
        if let Err(reason) = self.connection().await {
            tracing::warn!(
                error = %reason,
                "rate limiter: Redis unavailable at start, using in-process budgets until it answers"
            );
        }
    }

    /// Decisions so far that could not use Redis.
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    /// Leases Redis answered so far (grants and refusals): the partner API's round trips to
    /// Redis.
    pub fn leases(&self) -> u64 {
        self.leases.load(Ordering::Relaxed)
    }

    /// The slot of `token`'s budget in `group` (created empty), dropping those of past windows
    /// now and then.
    fn slot_of(&self, token: TokenId, group: Group, start: i64) -> Arc<Slot> {
        let mut slots = match self.slots.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if slots.len() > PRUNE_ABOVE {
            slots.retain(|_, s| Arc::strong_count(s) > 1 || s.current(start));
        }
        slots.entry((token, group)).or_default().clone()
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<MultiplexedConnection>> {
        match self.conn.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// The shared connection, connecting when there is none (one request at a time, at most
    /// once per [`RECONNECT_AFTER`]; the others do not wait).
    async fn connection(&self) -> Result<MultiplexedConnection, String> {
        if let Some(c) = self.slot().clone() {
            return Ok(c);
        }
        let Ok(mut last_try) = self.connecting.try_lock() else {
            return Err("connecting to Redis".to_owned());
        };
        if let Some(c) = self.slot().clone() {
            return Ok(c);
        }
        if last_try.is_some_and(|t| t.elapsed() < RECONNECT_AFTER) {
            return Err("Redis unreachable (waiting to reconnect)".to_owned());
        }
        *last_try = Some(Instant::now());
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(self.timeout)
            .set_response_timeout(self.timeout);
        let conn = tokio::time::timeout(
            self.timeout,
            self.client
                .get_multiplexed_async_connection_with_config(&config),
        )
        .await
        .map_err(|_| "timed out connecting to Redis".to_owned())?
        .map_err(|e| format!("cannot connect to Redis: {e}"))?;
        *self.slot() = Some(conn.clone());
        Ok(conn)
    }

    /// Asks Redis for a lease of `want` units: `(count after the grant, units granted)`.
    async fn lease(&self, key: String, ttl_ms: i64, want: u32) -> Result<(i64, i64), String> {
        let mut call = self.script.key(key);
        call.arg(ttl_ms)
            .arg(self.quota.limit)
            .arg(want)
            .arg(LEASE_SHARE);
        let mut conn = self.connection().await?;
        let answer =
            tokio::time::timeout(self.timeout, call.invoke_async::<(i64, i64)>(&mut conn)).await;
        let answer = self.answered(answer)?;
        self.leases.fetch_add(1, Ordering::Relaxed);
        Ok(answer)
    }

    async fn invoke(&self, call: redis::ScriptInvocation<'_>) -> Result<i64, String> {
        let mut conn = self.connection().await?;
        let answer = tokio::time::timeout(self.timeout, call.invoke_async::<i64>(&mut conn)).await;
        self.answered(answer)
    }

    /// Redis's answer, or why there is none (a lost connection is dropped, to be re-established
    /// by a later request).
    fn answered<T>(
        &self,
        answer: Result<redis::RedisResult<T>, tokio::time::error::Elapsed>,
    ) -> Result<T, String> {
        match answer {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => {
                if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() {
                    *self.slot() = None;
                }
                Err(format!("Redis error: {e}"))
            }
            Err(_) => Err("Redis did not answer in time".to_owned()),
        }
    }

    /// The key of `token`'s budget in `group` for the window starting at `start`.
    fn key(&self, token: TokenId, group: Group, start: i64) -> String {
        format!(
            "{}rl:{}:{}:{start}",
            self.prefix,
            group.as_str(),
            token.as_uuid().simple()
        )
    }

    fn failed(&self, reason: &str) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("rate_limiter_errors_total").increment(1);
        let mut log = match self.log.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if log.last.is_none_or(|t| t.elapsed() >= LOG_INTERVAL) {
            tracing::warn!(
                error = reason,
                suppressed = log.suppressed,
                "rate limiter: Redis unavailable, using in-process budgets"
            );
            log.last = Some(Instant::now());
            log.suppressed = 0;
        } else {
            log.suppressed += 1;
        }
    }
}

#[async_trait]
impl PublicLimitStore for RedisRateLimiter {
    async fn charge_public(&self, client: IpAddr, now_us: i64) -> PublicDecision {
        let quota = self.public_fallback.quota();
        let mut call =
            self.public_script
                .key(format!("{}pub:{}", self.prefix, client.to_canonical()));
        call.arg(now_us)
            .arg(quota.interval_us())
            .arg(quota.tolerance_us());
        match self.invoke(call).await {
            Ok(over) => PublicDecision {
                allowed: over <= 0,
                wait_us: over.max(0),
            },
            Err(reason) => {
                self.failed(&reason);
                self.public_fallback.charge(client, now_us)
            }
        }
    }
}

#[async_trait]
impl RateLimitStore for RedisRateLimiter {
    /// A unit of this instance's lease; when it has none, a new lease from Redis (one request
    /// at a time per token and group: the others wait for its answer and spend what it brings).
    async fn charge(&self, token: TokenId, group: Group, now_unix: i64) -> Decision {
        let (start, reset) = window(self.quota, now_unix);
        let limit = self.quota.limit;
        let slot = self.slot_of(token, group, start);
        if let Some(d) = slot.take(start, limit, reset, true) {
            return d;
        }
        let since = Instant::now();
        let _waiting = slot.wait();
        let _asking = slot.fetch.lock().await;
        if let Some(d) = slot.take(start, limit, reset, false) {
            return d;
        }
        let Some(want) = slot.want(since) else {
            // Redis failed the request this one waited behind: decided in-process at once.
            self.failed("Redis unavailable (failed for the request ahead)");
            return self.fallback.charge(token, group, now_unix);
        };
        let key = self.key(token, group, start);
        // Outlives the window by a second, whatever the clocks of the instances.
        let ttl_ms = (reset - now_unix + 1).max(1).saturating_mul(1000);
        match self.lease(key, ttl_ms, want).await {
            Ok((count, granted)) => slot.granted(start, limit, reset, count, granted),
            Err(reason) => {
                slot.failed();
                self.failed(&reason);
                self.fallback.charge(token, group, now_unix)
            }
        }
    }

    /// The unit goes back to this instance's lease of the window (no Redis round trip), or to
    /// the in-process budgets when the charge was decided there (no lease in this window).
    async fn refund(&self, token: TokenId, group: Group, now_unix: i64) {
        let (start, _) = window(self.quota, now_unix);
        if !self.slot_of(token, group, start).refund(start) {
            self.fallback.refund(token, group, now_unix);
        }
    }
}

#[cfg(test)]
mod tests;
