//! When retries this worker scheduled fall due ([`Alarms`]): the claim loop wakes then instead of
//! at its next fallback poll, so a retry keeps to its schedule (within the jitter), not to the
//! poll's period.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// Retries further off than this are left to the fallback poll: its period is small beside
/// their jitter (±10 % of 6 min and more), and the set stays small.
const ALARM_HORIZON: Duration = Duration::from_secs(120);
/// Alarms are kept to this grain in milliseconds (rounded up), so the set holds at most
/// `ALARM_HORIZON / ALARM_GRAIN_MS` (6,000) of them however many retries fall due, and the loop
/// wakes for them at most 50 times a second.
const ALARM_GRAIN_MS: u64 = 20;
/// Past the due time, so the claim's clock (the wall clock) has passed it too.
const ALARM_MARGIN: Duration = Duration::from_millis(2);

/// The instants at which retries this worker recorded fall due, within [`ALARM_HORIZON`].
///
/// A failed attempt's retry was found only by the fallback poll (500 ms): each retry came up to
/// half a second after its due time, so a 10 s retry could arrive after 11.5 s, outside the
/// schedule's ±10 % (bbhooks, 2026-11-28). Retries of other instances, and those a restart
/// forgot, are still found by the poll.
#[derive(Debug)]
pub(crate) struct Alarms {
    born: Instant,
    /// Grains since `born`.
    at: BTreeSet<u64>,
}

impl Default for Alarms {
    fn default() -> Self {
        Self {
            born: Instant::now(),
            at: BTreeSet::new(),
        }
    }
}

impl Alarms {
    /// A retry falls due `delay` from `now`; whether that is now the first alarm (the loop,
    /// asleep until a later one or its poll, is to look again).
    pub(crate) fn set(&mut self, now: Instant, delay: Duration) -> bool {
        if delay > ALARM_HORIZON {
            return false;
        }
        let since = (now + delay + ALARM_MARGIN).saturating_duration_since(self.born);
        let ms = u64::try_from(since.as_millis()).unwrap_or(u64::MAX);
        let grain = ms.div_ceil(ALARM_GRAIN_MS);
        let first = self.at.first().is_none_or(|f| grain < *f);
        self.at.insert(grain);
        first
    }

    /// When the loop should wake at the latest: the first alarm, or `poll` when that is sooner.
    pub(crate) fn next(&self, poll: Instant) -> Instant {
        self.at.first().map_or(poll, |g| {
            self.born
                .checked_add(Duration::from_millis(g.saturating_mul(ALARM_GRAIN_MS)))
                .map_or(poll, |at| at.min(poll))
        })
    }

    /// Drops the alarms due by `now` (the claim about to be made serves them).
    pub(crate) fn passed(&mut self, now: Instant) {
        let ms =
            u64::try_from(now.saturating_duration_since(self.born).as_millis()).unwrap_or(u64::MAX);
        // Popped in place: the loop calls this at every wake, mostly with nothing due, and a
        // `split_off` would build a new set each time.
        let due = ms / ALARM_GRAIN_MS;
        while self.at.first().is_some_and(|g| *g <= due) {
            self.at.pop_first();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alarms_wake_at_the_first_due_retry_within_the_horizon_and_pass() {
        let mut a = Alarms::default();
        let t0 = a.born;
        let poll = t0 + Duration::from_millis(500);
        assert_eq!(a.next(poll), poll, "no alarm: the poll");
        assert!(a.set(t0, Duration::from_millis(300)), "the first alarm");
        assert!(
            a.set(t0, Duration::from_millis(100)),
            "sooner: the first now"
        );
        assert!(!a.set(t0, Duration::from_millis(105)), "the same grain");
        assert!(
            !a.set(t0, ALARM_HORIZON + Duration::from_secs(1)),
            "left to the poll"
        );
        assert_eq!(a.at.len(), 2);
        let first = a.next(poll);
        assert!(
            first >= t0 + Duration::from_millis(102) && first <= t0 + Duration::from_millis(122),
            "{:?}",
            first - t0
        );
        a.passed(first);
        let second = a.next(poll);
        assert!(second > first && second <= t0 + Duration::from_millis(322));
        a.passed(t0 + Duration::from_millis(400));
        assert_eq!(a.next(poll), poll);
        a.set(t0, Duration::from_secs(2));
        assert_eq!(a.next(poll), poll, "the poll comes first");
    }
}
