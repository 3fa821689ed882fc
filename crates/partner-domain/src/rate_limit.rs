//! Per-token, per-endpoint-group fixed-window rate limits: the [`RateLimitStore`] port and its
//! in-process adapter, [`RateLimiter`].
//!
//! Windows are aligned to multiples of the window length (Unix time), so every adapter and
//! every instance agrees on when a budget is whole again (`X-RateLimit-Reset`).
//!
//! [`RateLimiter`] keeps budgets in this process's memory: each server instance enforces the
//! budget on the requests it serves, so behind a load balancer with N instances a token can get
//! up to N budgets per window. A shared adapter (Redis) gives every instance one budget.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;

use crate::kernel::ids::TokenId;

/// Where budgets live. `charge` never fails: an adapter whose backing store is unreachable
/// decides itself how to answer (the Redis adapter falls back to in-process budgets).
#[async_trait]
pub trait RateLimitStore: Send + Sync + std::fmt::Debug {
    /// Charges one request of `token` in `group` at `now_unix` (seconds).
    async fn charge(&self, token: TokenId, group: Group, now_unix: i64) -> Decision;

    /// Whether `token`'s budget in `group` is already spent at `now_unix`, WITHOUT charging
    /// anything (extensions §12: a request over budget is answered from the token check alone,
    /// so a read that would fold the token lookup into its own statement first asks this).
    /// Only a hint: the decision is still [`Self::charge`]'s. Never fails: an adapter whose
    /// backing store is unreachable answers as its `charge` would decide.
    async fn spent(&self, token: TokenId, group: Group, now_unix: i64) -> bool;
}

/// The contract's endpoint groups; each token has its own budget in each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Group {
    Leads,
    Links,
    Coupons,
    Orders,
    Payouts,
    SubAccounts,
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
    pub limit: u32,
    pub window_secs: u32,
}

/// The outcome of charging one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub limit: u32,
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

    /// Whether `token`'s budget in `group` is spent at `now_unix` (nothing is charged).
    pub fn spent(&self, token: TokenId, group: Group, now_unix: i64) -> bool {
        let (start, _) = window(self.quota, now_unix);
        let map = match self.windows.lock() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        };
        map.get(&(token, group))
            .is_some_and(|w| w.start == start && w.used >= self.quota.limit)
    }

    pub fn quota(&self) -> Quota {
        self.quota
    }
}

#[async_trait]
impl RateLimitStore for RateLimiter {
    async fn charge(&self, token: TokenId, group: Group, now_unix: i64) -> Decision {
        RateLimiter::charge(self, token, group, now_unix)
    }

    async fn spent(&self, token: TokenId, group: Group, now_unix: i64) -> bool {
        RateLimiter::spent(self, token, group, now_unix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn spent_reads_the_budget_without_charging_it() {
        let rl = RateLimiter::new(Quota {
            limit: 2,
            window_secs: 60,
        });
        let t = TokenId::from_uuid(uuid::Uuid::from_u128(1));
        assert!(!rl.spent(t, Group::Leads, 120), "never charged");
        rl.charge(t, Group::Leads, 120);
        for _ in 0..5 {
            assert!(!rl.spent(t, Group::Leads, 121), "one unit left");
        }
        assert_eq!(
            rl.charge(t, Group::Leads, 121).remaining,
            0,
            "peeks cost nothing"
        );
        assert!(rl.spent(t, Group::Leads, 122));
        assert!(!rl.spent(t, Group::Orders, 122), "groups are separate");
        assert!(!rl.spent(t, Group::Leads, 180), "new window");
    }
}
