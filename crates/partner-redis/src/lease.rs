//! Local leases of a shared budget (issue 23: the Redis budget cost 20 % of the leads read path).
//!
//! A decision no longer asks Redis for one unit: an instance asks for a *lease* of up to
//! [`LEASE_MAX`] units of a token's budget in a group for the current window, and spends it in
//! memory, one unit per request; it asks again when the lease is spent. What it asks for is the
//! demand it saw since its previous request to Redis (the requests of that token and group that
//! arrived meanwhile, at least 1; when requests queue for it, twice the previous lease), and the script grants at most an eighth ([`LEASE_SHARE`]) of
//! what is left of the budget (at least 1): a client that calls one request at a time leases one
//! unit per request (as before: every instance sees every unit go), a client with 64 requests in
//! flight leases 32 at a time (one Redis round trip per 32 requests).
//!
//! The rules this keeps (docs/decisions.md, "Local leases of the shared budget"):
//! - **No overshoot**: units are granted atomically by Redis from one count per token, group and
//!   window, never beyond the budget, and each admitted request spends one granted unit. Behind
//!   any number of instances a window admits at most the budget (fail-open aside, §5).
//! - **Bounded undershoot**: a unit leased by one instance is spent only there. When Redis says
//!   the budget is all leased, the units other instances still hold are refused to this one: at
//!   most one lease per other instance ([`LEASE_MAX`], and at most an eighth of the budget left
//!   when it was leased), plus the units refunded to them (an authentication failure after the
//!   charge gives its unit back to the lease it came from). They are spent by the instance that
//!   holds them, or lapse with the window.
//! - **Spent is final for the window**: the shared count never goes down within a window (refunds
//!   stay in the lease), so once Redis has refused, this instance refuses the rest of the window
//!   without asking again: a flood over budget costs Redis nothing.
//! - `X-RateLimit-Remaining` is the budget less what every instance had leased at this instance's
//!   last grant, plus what this instance still holds: exact for a client calling one request at a
//!   time, behind any number of instances.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use partner_domain::rate_limit::Decision;

/// The most units one lease takes.
pub const LEASE_MAX: u32 = 32;
/// A lease takes at most 1/`LEASE_SHARE` of what is left of the budget (at least one unit).
pub const LEASE_SHARE: u32 = 8;

/// Grants a lease: `ARGV[3]` units wanted, at most 1/`ARGV[4]` of what is left of the budget
/// (`ARGV[2]`), at least 1 while anything is left; the window's expiry (`ARGV[1]` ms) is set on
/// its first grant. Returns `{count after the grant, units granted}` (granted 0: all leased).
pub(crate) const LEASE_SCRIPT: &str = r"
local limit = tonumber(ARGV[2])
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
local left = limit - n
if left <= 0 then return {n, 0} end
local grant = math.min(tonumber(ARGV[3]), math.max(1, math.floor(left / tonumber(ARGV[4]))))
n = redis.call('INCRBY', KEYS[1], grant)
if n == grant then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return {n, grant}
";

/// What this instance holds of one token's budget in one group.
#[derive(Debug, Default)]
pub(crate) struct Lease {
    /// The window `left`, `shared` and `spent` belong to.
    start: i64,
    /// Units leased and not spent yet.
    left: u32,
    /// The shared count (units leased by every instance) after this instance's last grant.
    shared: u32,
    /// Redis had nothing left to lease in this window.
    spent: bool,
    /// Charges since this instance last asked Redis.
    demand: u32,
    /// The units of this instance's last grant (kept across windows).
    last_grant: u32,
    /// When the last request to Redis for this slot failed (a wave waiting behind it does not
    /// wait for Redis again: it is decided in-process at once).
    failed_at: Option<Instant>,
}

/// One token's budget in one group: the lease, and the lock that lets one request at a time ask
/// Redis for it (the others wait for that answer rather than each asking).
#[derive(Debug, Default)]
pub(crate) struct Slot {
    lease: Mutex<Lease>,
    pub(crate) fetch: tokio::sync::Mutex<()>,
    /// Requests waiting for a unit (queued behind a request to Redis, or making it).
    waiting: AtomicU32,
}

/// A request counted in [`Slot::waiting`] until it is dropped (decided, or its request gone).
#[derive(Debug)]
pub(crate) struct Waiting<'a>(&'a AtomicU32);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

fn decision(allowed: bool, limit: u32, shared: u32, left: u32, reset: i64) -> Decision {
    Decision {
        allowed,
        limit,
        remaining: if allowed {
            limit.saturating_sub(shared).saturating_add(left).min(limit)
        } else {
            0
        },
        reset,
    }
}

impl Slot {
    fn lease(&self) -> std::sync::MutexGuard<'_, Lease> {
        match self.lease.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Whether this slot's lease is of the window starting at `start` (an entry to keep).
    pub(crate) fn current(&self, start: i64) -> bool {
        self.lease().start == start
    }

    /// The decision the lease alone can take for the window starting at `start`: a unit spent,
    /// or a refusal once Redis has none left; `None` when Redis must be asked. `arriving`: a
    /// new charge (counted in the demand), not one that waited for another's request to Redis.
    pub(crate) fn take(
        &self,
        start: i64,
        limit: u32,
        reset: i64,
        arriving: bool,
    ) -> Option<Decision> {
        let mut l = self.lease();
        if l.start != start {
            *l = Lease {
                start,
                demand: l.demand,
                last_grant: l.last_grant,
                ..Lease::default()
            };
        }
        if arriving {
            l.demand = l.demand.saturating_add(1);
        }
        if l.left > 0 {
            l.left -= 1;
            return Some(decision(true, limit, l.shared, l.left, reset));
        }
        l.spent.then(|| decision(false, limit, l.shared, 0, reset))
    }

    /// Counts the caller among the requests waiting for a unit, while the guard lives.
    pub(crate) fn wait(&self) -> Waiting<'_> {
        self.waiting.fetch_add(1, Ordering::Relaxed);
        Waiting(&self.waiting)
    }

    /// Whether a request to Redis for this slot failed after `since` (the caller then decides
    /// in-process without asking again); otherwise the units to ask for, 1 to [`LEASE_MAX`]:
    /// the demand (the charges since the last request to Redis); when more came than the last
    /// grant held, or others wait beside the caller (requests queue: the lease runs out faster
    /// than Redis answers), twice the last grant if more, so a busy budget's lease doubles up to
    /// the most in a few round trips. A caller with one request at a time asks for 1. The
    /// demand then starts again from 0.
    pub(crate) fn want(&self, since: Instant) -> Option<u32> {
        let mut l = self.lease();
        if l.failed_at.is_some_and(|t| t >= since) {
            return None;
        }
        let waiting = self.waiting.load(Ordering::Relaxed);
        let mut want = l.demand.max(waiting);
        if l.demand > l.last_grant || waiting > 1 {
            want = want.max(l.last_grant.saturating_mul(2));
        }
        let want = want.clamp(1, LEASE_MAX);
        l.demand = 0;
        Some(want)
    }

    /// Redis's grant of `granted` units (the count `count` after it) for the window starting at
    /// `start`: one unit for the caller, the rest kept. A grant of 0 marks the window spent.
    pub(crate) fn granted(
        &self,
        start: i64,
        limit: u32,
        reset: i64,
        count: i64,
        granted: i64,
    ) -> Decision {
        let shared = u32::try_from(count.max(0)).unwrap_or(u32::MAX);
        let granted = u32::try_from(granted.max(0)).unwrap_or(u32::MAX);
        let mut l = self.lease();
        l.failed_at = None;
        if l.start != start {
            // The window turned while Redis answered: the grant decides this request only.
            return decision(granted > 0, limit, shared, 0, reset);
        }
        l.shared = l.shared.max(shared);
        l.last_grant = granted;
        if granted == 0 {
            l.spent = true;
            return decision(false, limit, l.shared, 0, reset);
        }
        l.left = l.left.saturating_add(granted - 1);
        decision(true, limit, l.shared, l.left, reset)
    }

    /// Redis could not be asked.
    pub(crate) fn failed(&self) {
        self.lease().failed_at = Some(Instant::now());
    }

    /// Gives one unit back to the lease of the window starting at `start`, if this instance
    /// leased any in it (`false`: the charge was decided in-process, Redis unreachable).
    pub(crate) fn refund(&self, start: i64) -> bool {
        let mut l = self.lease();
        if l.start != start || l.shared == 0 {
            return false;
        }
        l.left = l.left.saturating_add(1);
        l.spent = false;
        true
    }
}
