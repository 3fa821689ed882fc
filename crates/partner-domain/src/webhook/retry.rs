//! The retry schedule: when a failed delivery is attempted again, a receiver's `Retry-After`, and
//! when it gives up.

use std::time::Duration;

use time::OffsetDateTime;

/// When attempt number `attempts + 1` happens, after `attempts` failed ones (`None`: give up).
/// The schedule lists the delays after the first, second… attempt; each gets ±10 % jitter from
/// `jitter` (a value in 0..=1), so retries of many deliveries do not arrive in lockstep.
pub fn next_retry(schedule: &[Duration], attempts: u32, jitter: f64) -> Option<Duration> {
    let base = *schedule.get(usize::try_from(attempts).ok()?.checked_sub(1)?)?;
    let factor = 0.9 + 0.2 * jitter.clamp(0.0, 1.0);
    Some(base.mul_f64(factor))
}

/// Where a delivery goes after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextStep {
    /// A receiver answered 2xx: the delivery ends `delivered`.
    Delivered,
    /// Another attempt is due then.
    RetryAt(OffsetDateTime),
    /// The retry budget is spent (or retrying cannot help): the delivery ends `failed`.
    GiveUp,
}

/// The longest wait a receiver's `Retry-After` can impose.
pub const RETRY_AFTER_CAP: time::Duration = time::Duration::hours(24);

/// The wait a `Retry-After` value asks for (delay in seconds, or an HTTP date), at most
/// [`RETRY_AFTER_CAP`]; `None` when the value is malformed.
pub fn parse_retry_after(value: &str, now: OffsetDateTime) -> Option<time::Duration> {
    let value = value.trim();
    let wait = if let Ok(secs) = value.parse::<u64>() {
        time::Duration::seconds(i64::try_from(secs).unwrap_or(i64::MAX))
    } else {
        let format = time::format_description::parse_borrowed::<1>(
            "[weekday repr:short], [day] [month repr:short] [year] [hour]:[minute]:[second] GMT",
        )
        .ok()?;
        let at = time::PrimitiveDateTime::parse(value, &format)
            .ok()?
            .assume_utc();
        (at - now).max(time::Duration::ZERO)
    };
    Some(wait.min(RETRY_AFTER_CAP))
}

/// The step after a failed attempt that asked to wait `retry_after`: no earlier than that, unless
/// the schedule already waits longer or gives up.
pub fn honour_retry_after(
    next: NextStep,
    at: OffsetDateTime,
    retry_after: Option<time::Duration>,
) -> NextStep {
    match (next, retry_after) {
        (NextStep::RetryAt(t), Some(wait)) => NextStep::RetryAt(t.max(at + wait)),
        (next, _) => next,
    }
}

/// Attempts a delivery may make: the first, and one per delay of the schedule.
pub fn attempt_budget(schedule: &[Duration]) -> u32 {
    u32::try_from(schedule.len()).unwrap_or(u32::MAX - 1) + 1
}

/// The step after attempt number `attempt` failed (`jitter` in 0..=1, see [`next_retry`]).
pub fn after_failure(
    schedule: &[Duration],
    attempt: u32,
    jitter: f64,
    now: OffsetDateTime,
) -> NextStep {
    // A delay past the end of time (a misconfigured schedule) gives up rather than panics.
    next_retry(schedule, attempt, jitter)
        .and_then(|d| time::Duration::try_from(d).ok())
        .and_then(|d| now.checked_add(d))
        .map_or(NextStep::GiveUp, NextStep::RetryAt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_schedule_with_jitter() {
        let s = [Duration::from_secs(10), Duration::from_secs(60)];
        assert_eq!(next_retry(&s, 1, 0.5), Some(Duration::from_secs(10)));
        assert_eq!(next_retry(&s, 1, 0.0), Some(Duration::from_secs(9)));
        assert_eq!(next_retry(&s, 2, 1.0), Some(Duration::from_secs(66)));
        assert_eq!(next_retry(&s, 3, 0.5), None, "schedule exhausted");
        assert_eq!(next_retry(&s, 0, 0.5), None);
    }

    #[test]
    fn retry_after_in_seconds_or_as_an_http_date_capped_at_a_day() {
        let now = OffsetDateTime::from_unix_timestamp(784_111_777).expect("t"); // Sun, 06 Nov 1994 08:49:37 GMT
        assert_eq!(
            parse_retry_after("120", now),
            Some(time::Duration::seconds(120))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:50:37 GMT", now),
            Some(time::Duration::seconds(60))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now),
            Some(time::Duration::ZERO),
            "a date in the past: no wait"
        );
        assert_eq!(parse_retry_after("999999", now), Some(RETRY_AFTER_CAP));
        assert_eq!(parse_retry_after("soon", now), None);
        let schedule = NextStep::RetryAt(now + time::Duration::seconds(10));
        assert_eq!(
            honour_retry_after(schedule, now, Some(time::Duration::seconds(60))),
            NextStep::RetryAt(now + time::Duration::seconds(60))
        );
        assert_eq!(
            honour_retry_after(schedule, now, Some(time::Duration::seconds(5))),
            schedule,
            "the schedule's later time stands"
        );
        assert_eq!(
            honour_retry_after(NextStep::GiveUp, now, Some(time::Duration::seconds(5))),
            NextStep::GiveUp
        );
    }
}
