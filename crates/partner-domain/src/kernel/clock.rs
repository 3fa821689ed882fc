//! Injected time, so that expiry, retries and `lastUsedAt` throttling are testable.

use time::OffsetDateTime;

/// The source of "now". Implementations return UTC instants truncated to whole milliseconds,
/// the precision of every timestamp on the wire, so stored and rendered values round-trip.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current instant (UTC, whole milliseconds).
    fn now(&self) -> OffsetDateTime;
}

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        truncate_to_millis(OffsetDateTime::now_utc())
    }
}

/// Drops sub-millisecond precision (PostgreSQL keeps microseconds, the wire shows milliseconds)
/// and converts to UTC. Never panics: when the UTC conversion would leave the years `time` can
/// hold, `t` keeps its offset (callers that take input convert with
/// [`crate::kernel::wire::parse_timestamp`], which refuses such values first).
pub fn truncate_to_millis(t: OffsetDateTime) -> OffsetDateTime {
    let ms = t.millisecond();
    let t = t.replace_millisecond(ms).unwrap_or(t);
    t.checked_to_offset(time::UtcOffset::UTC).unwrap_or(t)
}

/// A clock stopped at a given instant, for tests and reproducible runs; it moves only when told
/// to, and never past the years `time` can hold.
///
/// ```
/// use partner_domain::Clock;
/// use partner_domain::kernel::clock::FixedClock;
/// use time::macros::datetime;
///
/// let clock = FixedClock::new(datetime!(2026-01-01 0:00:00.123_456 UTC));
/// assert_eq!(clock.now(), datetime!(2026-01-01 0:00:00.123 UTC), "whole milliseconds");
/// clock.advance(time::Duration::minutes(1));
/// assert_eq!(clock.now(), datetime!(2026-01-01 0:01:00.123 UTC));
/// // Past the end of time the clock stays where it is (no overflow, no panic).
/// clock.advance(time::Duration::MAX);
/// assert_eq!(clock.now(), datetime!(2026-01-01 0:01:00.123 UTC));
/// ```
#[derive(Debug)]
pub struct FixedClock(std::sync::Mutex<OffsetDateTime>);

impl FixedClock {
    /// A clock stopped at `at` (truncated to milliseconds, in UTC).
    pub fn new(at: OffsetDateTime) -> Self {
        Self(std::sync::Mutex::new(truncate_to_millis(at)))
    }

    /// Moves the clock forward (or back, with a negative duration). Checked: a move past the
    /// years `time` can hold leaves the clock where it is.
    pub fn advance(&self, by: time::Duration) {
        if let Ok(mut t) = self.0.lock() {
            // Past the end of time the clock stays where it is rather than panicking.
            if let Some(later) = t.checked_add(by) {
                *t = later;
            }
        }
    }
}

impl Clock for FixedClock {
    fn now(&self) -> OffsetDateTime {
        self.0
            .lock()
            .map(|t| *t)
            .unwrap_or(OffsetDateTime::UNIX_EPOCH)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn advancing_past_the_end_of_time_leaves_the_clock_where_it_is() {
        let c = FixedClock::new(datetime!(2026-01-01 0:00 UTC));
        c.advance(time::Duration::MAX);
        assert_eq!(c.now(), datetime!(2026-01-01 0:00 UTC));
    }

    #[test]
    fn truncation_keeps_millis_and_utc() {
        let t = datetime!(2026-11-21 10:00:00.123_456_789 +02:00);
        let got = truncate_to_millis(t);
        assert_eq!(got, datetime!(2026-11-21 08:00:00.123 UTC));
        assert_eq!(got.offset(), time::UtcOffset::UTC);
    }

    #[test]
    fn fixed_clock_advances() {
        let c = FixedClock::new(datetime!(2026-01-01 0:00 UTC));
        c.advance(time::Duration::seconds(61));
        assert_eq!(c.now(), datetime!(2026-01-01 0:01:01 UTC));
    }
}
