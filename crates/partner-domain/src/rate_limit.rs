//! Per-token, per-endpoint-group fixed-window rate limits: the [`RateLimitStore`] port and its
//! in-process adapter, [`RateLimiter`].
//!
//! Windows are aligned to multiples of the window length (Unix time), so every adapter and
//! every instance agrees on when a budget is whole again (`X-RateLimit-Reset`).
//!
//! [`RateLimiter`] keeps budgets in this process's memory: each server instance enforces the
//! budget on the requests it serves, so behind a load balancer with N instances a token can get
//! up to N budgets per window. A shared adapter (Redis) gives every instance one budget.
//!
//! The public surfaces (catalog, embedded view, portal page; extensions.md §12) have a budget of
//! their own per client address: [`PublicQuota`] decided by [`gcra`], a pure function of the
//! stored state and the clock's time, behind the [`PublicLimitStore`] port ([`PublicLimiter`]
//! in-process; the Redis adapter runs the same rule in one script).
//!
//! ```
//! use partner_domain::kernel::ids::TokenId;
//! use partner_domain::rate_limit::{Group, Quota, RateLimiter};
//! use partner_domain::uuid::Uuid;
//!
//! let limiter = RateLimiter::new(Quota { limit: 2, window_secs: 60 });
//! let token = TokenId::from_uuid(Uuid::from_u128(1));
//! let now = 1_795_000_000;
//! assert!(limiter.charge(token, Group::Leads, now).allowed);
//! assert!(limiter.charge(token, Group::Leads, now).allowed);
//! let third = limiter.charge(token, Group::Leads, now);
//! assert!(!third.allowed && third.retry_after(now) >= 1);
//! // Each group has its own budget.
//! assert!(limiter.charge(token, Group::Orders, now).allowed);
//! ```

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

use async_trait::async_trait;

use crate::kernel::ids::TokenId;

/// Where budgets live. `charge` never fails: an adapter whose backing store is unreachable
/// decides itself how to answer (the Redis adapter falls back to in-process budgets).
#[async_trait]
pub trait RateLimitStore: Send + Sync + std::fmt::Debug {
    /// Charges one request of `token` in `group` at `now_unix` (seconds).
    async fn charge(&self, token: TokenId, group: Group, now_unix: i64) -> Decision;

    /// Gives back the unit [`Self::charge`] took for `token` in `group` at `now_unix`, for a
    /// request that turned out not to count: a partner read is charged from the token id this
    /// process saw the token authenticate as, BEFORE its read (extensions §12: a request over
    /// budget reads no partner data), and the read's own token check may then fail (401/403 cost
    /// no budget, `rulings.md`). Nothing when the window has turned since, or nothing is charged.
    /// Never fails.
    async fn refund(&self, token: TokenId, group: Group, now_unix: i64);
}

/// The contract's endpoint groups; each token has its own budget in each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Group {
    /// The lead endpoints.
    Leads,
    /// The link endpoints.
    Links,
    /// The coupon endpoints.
    Coupons,
    /// The order endpoints.
    Orders,
    /// The payout endpoints.
    Payouts,
    /// The sub-account endpoints.
    SubAccounts,
    /// The webhook endpoints, their deliveries and the events feed.
    WebhookEndpoints,
}

impl Group {
    /// A stable name, for storage keys and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Leads => "leads",
            Self::Links => "links",
            Self::Coupons => "coupons",
            Self::Orders => "orders",
            Self::Payouts => "payouts",
            Self::SubAccounts => "sub_accounts",
            Self::WebhookEndpoints => "webhook_endpoints",
        }
    }
}

/// A budget of `limit` requests per `window_secs` seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    /// Requests per window.
    pub limit: u32,
    /// The window's length in seconds.
    pub window_secs: u32,
}

/// The outcome of charging one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request may proceed.
    pub allowed: bool,
    /// The window's budget (`X-RateLimit-Limit`).
    pub limit: u32,
    /// What is left of it (`X-RateLimit-Remaining`).
    pub remaining: u32,
    /// Unix time (seconds) at which the budget is whole again.
    pub reset: i64,
}

impl Decision {
    /// Seconds until the reset, at least 1 (for `Retry-After`).
    pub fn retry_after(&self, now_unix: i64) -> u64 {
        u64::try_from((self.reset - now_unix).max(1)).unwrap_or(1)
    }
}

#[derive(Debug)]
struct Window {
    start: i64,
    used: u32,
}

/// The limiter. Windows are aligned to multiples of the window length.
#[derive(Debug)]
pub struct RateLimiter {
    quota: Quota,
    windows: Mutex<HashMap<(TokenId, Group), Window>>,
}

const PRUNE_ABOVE: usize = 100_000;

/// The aligned window containing `now_unix`: (start, end), both Unix seconds.
pub fn window(quota: Quota, now_unix: i64) -> (i64, i64) {
    let len = i64::from(quota.window_secs.max(1));
    let start = now_unix - now_unix.rem_euclid(len);
    (start, start + len)
}

impl RateLimiter {
    /// An in-process limiter giving every token `quota` in every group.
    pub fn new(quota: Quota) -> Self {
        Self {
            quota,
            windows: Mutex::new(HashMap::new()),
        }
    }

    /// Charges one request of `token` in `group` at `now_unix` (seconds).
    pub fn charge(&self, token: TokenId, group: Group, now_unix: i64) -> Decision {
        let (start, reset) = window(self.quota, now_unix);
        let limit = self.quota.limit;
        let mut map = match self.windows.lock() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        };
        if map.len() > PRUNE_ABOVE {
            map.retain(|_, w| w.start == start);
        }
        let w = map
            .entry((token, group))
            .or_insert(Window { start, used: 0 });
        if w.start != start {
            *w = Window { start, used: 0 };
        }
        let allowed = w.used < limit;
        if allowed {
            w.used += 1;
        }
        Decision {
            allowed,
            limit,
            remaining: limit - w.used,
            reset,
        }
    }

    /// Gives back one unit of `token`'s budget in `group` charged in the window of `now_unix`.
    pub fn refund(&self, token: TokenId, group: Group, now_unix: i64) {
        let (start, _) = window(self.quota, now_unix);
        let mut map = match self.windows.lock() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(w) = map.get_mut(&(token, group))
            && w.start == start
        {
            w.used = w.used.saturating_sub(1);
        }
    }

    /// The quota it enforces.
    pub fn quota(&self) -> Quota {
        self.quota
    }
}

#[async_trait]
impl RateLimitStore for RateLimiter {
    async fn charge(&self, token: TokenId, group: Group, now_unix: i64) -> Decision {
        RateLimiter::charge(self, token, group, now_unix)
    }

    async fn refund(&self, token: TokenId, group: Group, now_unix: i64) {
        RateLimiter::refund(self, token, group, now_unix);
    }
}

/// The public surfaces' budget: `rate` requests per second per client address, with bursts of
/// up to `burst` requests (the ruling: twice the rate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PublicQuota {
    /// Requests per second.
    pub rate: u32,
    /// The largest burst.
    pub burst: u32,
}

impl PublicQuota {
    /// `rate` per second (at least 1), bursts up to twice that.
    pub fn per_second(rate: u32) -> Self {
        let rate = rate.max(1);
        Self {
            rate,
            burst: rate.saturating_mul(2),
        }
    }

    /// The time one request costs, in microseconds (the GCRA's emission interval).
    pub fn interval_us(self) -> i64 {
        (1_000_000 / i64::from(self.rate.max(1))).max(1)
    }

    /// How far ahead of now the theoretical arrival time may run: a full burst's worth.
    pub fn tolerance_us(self) -> i64 {
        self.interval_us()
            .saturating_mul(i64::from(self.burst.max(1)))
    }
}

impl Default for PublicQuota {
    /// The ruling's default: 50 a second.
    fn default() -> Self {
        Self::per_second(50)
    }
}

/// The outcome of one public request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PublicDecision {
    /// Whether the request may proceed.
    pub allowed: bool,
    /// When refused: microseconds until one more request would be admitted.
    pub wait_us: i64,
}

impl PublicDecision {
    /// Whole seconds to put in `Retry-After` (rounded up, at least 1).
    pub fn retry_after(&self) -> u64 {
        let secs = (self.wait_us.max(1) + 999_999) / 1_000_000;
        u64::try_from(secs.max(1)).unwrap_or(1)
    }
}

/// The generic cell rate algorithm (a token bucket of `burst` tokens refilled at `rate` a
/// second, kept as one number): `tat` is the stored theoretical arrival time (`None`: a client
/// not seen, or whose bucket is full again), `now_us` the clock's time, both in microseconds.
/// Returns the decision and the new `tat` to store (unchanged when refused).
pub fn gcra(quota: PublicQuota, tat: Option<i64>, now_us: i64) -> (PublicDecision, i64) {
    let t = quota.interval_us();
    let tat = tat.map_or(now_us, |v| v.max(now_us));
    let next = tat.saturating_add(t);
    let over = next - now_us - quota.tolerance_us();
    if over > 0 {
        (
            PublicDecision {
                allowed: false,
                wait_us: over,
            },
            tat,
        )
    } else {
        (
            PublicDecision {
                allowed: true,
                wait_us: 0,
            },
            next,
        )
    }
}

/// Where the public budgets live; the key is the client's address. Never fails: an adapter
/// whose backing store is unreachable decides in-process (fail open, §5).
#[async_trait]
pub trait PublicLimitStore: Send + Sync + std::fmt::Debug {
    /// Charges one public request of `client` at `now_us` (microseconds since the Unix epoch).
    async fn charge_public(&self, client: IpAddr, now_us: i64) -> PublicDecision;
}

/// The in-process public limiter: one theoretical arrival time per client address.
#[derive(Debug)]
pub struct PublicLimiter {
    quota: PublicQuota,
    tats: Mutex<HashMap<IpAddr, i64>>,
}

impl PublicLimiter {
    /// An in-process limiter giving every client address `quota`.
    pub fn new(quota: PublicQuota) -> Self {
        Self {
            quota,
            tats: Mutex::new(HashMap::new()),
        }
    }

    /// The quota it enforces.
    pub fn quota(&self) -> PublicQuota {
        self.quota
    }

    /// Charges one request of `client` at `now_us`.
    pub fn charge(&self, client: IpAddr, now_us: i64) -> PublicDecision {
        let mut map = match self.tats.lock() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        };
        if map.len() > PRUNE_ABOVE {
            // A client whose arrival time has passed has a full bucket: forgetting it changes
            // nothing.
            map.retain(|_, tat| *tat > now_us);
        }
        let (decision, tat) = gcra(self.quota, map.get(&client).copied(), now_us);
        if decision.allowed {
            map.insert(client, tat);
        }
        decision
    }
}

#[async_trait]
impl PublicLimitStore for PublicLimiter {
    async fn charge_public(&self, client: IpAddr, now_us: i64) -> PublicDecision {
        self.charge(client, now_us)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_bursts_up_to_twice_the_rate_then_the_rate() {
        let q = PublicQuota::per_second(50);
        assert_eq!((q.rate, q.burst, q.interval_us()), (50, 100, 20_000));
        let rl = PublicLimiter::new(q);
        let a: IpAddr = "192.0.2.1".parse().expect("ip");
        let b: IpAddr = "2001:db8::1".parse().expect("ip");
        let t0 = 1_700_000_000_000_000;
        for i in 0..100 {
            assert!(rl.charge(a, t0).allowed, "request {i} of the burst");
        }
        let refused = rl.charge(a, t0);
        assert!(!refused.allowed);
        assert_eq!(refused.wait_us, 20_000);
        assert_eq!(refused.retry_after(), 1);
        assert!(rl.charge(b, t0).allowed, "addresses are separate");
        // One interval later, one more; a second later, the rate's worth.
        assert!(rl.charge(a, t0 + 20_000).allowed);
        assert!(!rl.charge(a, t0 + 20_000).allowed);
        let admitted = (0..200)
            .filter(|_| rl.charge(a, t0 + 1_020_000).allowed)
            .count();
        assert_eq!(admitted, 50);
        // Idle for two seconds: the whole burst again, no more.
        let admitted = (0..200)
            .filter(|_| rl.charge(a, t0 + 3_020_000).allowed)
            .count();
        assert_eq!(admitted, 100);
    }

    #[test]
    fn gcra_refusal_keeps_the_state_and_says_how_long_to_wait() {
        let q = PublicQuota::per_second(1);
        let (d, tat) = gcra(q, None, 0);
        assert!(d.allowed);
        let (d, tat) = gcra(q, Some(tat), 0);
        assert!(d.allowed);
        let (d, same) = gcra(q, Some(tat), 0);
        assert_eq!((d.allowed, d.wait_us, same), (false, 1_000_000, tat));
        let (d, _) = gcra(q, Some(tat), 250_000);
        assert_eq!((d.allowed, d.wait_us, d.retry_after()), (false, 750_000, 1));
        assert!(gcra(q, Some(tat), 1_000_000).0.allowed);
    }

    #[test]
    fn budget_per_token_and_group_resets_with_the_window() {
        let rl = RateLimiter::new(Quota {
            limit: 2,
            window_secs: 60,
        });
        let t = TokenId::from_uuid(uuid::Uuid::from_u128(1));
        let a = rl.charge(t, Group::Leads, 120);
        assert_eq!((a.allowed, a.remaining, a.reset), (true, 1, 180));
        assert!(rl.charge(t, Group::Leads, 150).allowed);
        let c = rl.charge(t, Group::Leads, 179);
        assert_eq!((c.allowed, c.remaining), (false, 0));
        assert_eq!(c.retry_after(179), 1);
        assert!(
            rl.charge(t, Group::Orders, 179).allowed,
            "groups are separate"
        );
        assert!(
            rl.charge(
                TokenId::from_uuid(uuid::Uuid::from_u128(2)),
                Group::Leads,
                179
            )
            .allowed,
            "tokens are separate"
        );
        assert!(rl.charge(t, Group::Leads, 180).allowed, "new window");
    }

    #[test]
    fn a_refund_gives_back_one_unit_of_the_same_window_only() {
        let rl = RateLimiter::new(Quota {
            limit: 2,
            window_secs: 60,
        });
        let t = TokenId::from_uuid(uuid::Uuid::from_u128(1));
        rl.refund(t, Group::Leads, 120);
        assert_eq!(
            rl.charge(t, Group::Leads, 120).remaining,
            1,
            "nothing to refund"
        );
        assert_eq!(rl.charge(t, Group::Leads, 121).remaining, 0);
        assert!(!rl.charge(t, Group::Leads, 121).allowed);
        rl.refund(t, Group::Leads, 122);
        let again = rl.charge(t, Group::Leads, 122);
        assert_eq!(
            (again.allowed, again.remaining),
            (true, 0),
            "the unit came back"
        );
        rl.refund(t, Group::Orders, 122);
        assert!(
            !rl.charge(t, Group::Leads, 123).allowed,
            "groups are separate"
        );
        rl.charge(t, Group::Leads, 180);
        rl.refund(t, Group::Leads, 179);
        assert_eq!(
            rl.charge(t, Group::Leads, 180).remaining,
            0,
            "a refund of a window gone changes nothing"
        );
    }
}
