//! The budget of a partner's webhook actions: `test`, `resend` and `recover` together admit at
//! most [`ACTION_CALLS`] calls per [`ACTION_WINDOW`] per partner (extensions.md §12). Operator
//! calls do not count. The rule is here; the times of the admitted calls are stored by the
//! adapter (so every instance shares them) and read under a lock in the caller's transaction.

use time::{Duration, OffsetDateTime};

/// Calls admitted per window.
pub const ACTION_CALLS: usize = 20;
/// The sliding window of [`ACTION_CALLS`].
pub const ACTION_WINDOW: Duration = Duration::minutes(1);

/// The action budget: at most `calls` admitted within any `window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActionBudget {
    /// Calls admitted per window.
    pub calls: usize,
    /// The sliding window.
    pub window: Duration,
}

impl Default for ActionBudget {
    fn default() -> Self {
        Self {
            calls: ACTION_CALLS,
            window: ACTION_WINDOW,
        }
    }
}

impl ActionBudget {
    /// Whether a call at `now` is admitted, given the times of the calls admitted before (as
    /// stored, any order). Admitted: the times to store from now on (those still within the
    /// window, and `now`). Refused: the whole seconds to wait until one more is admitted (at
    /// least 1).
    pub fn admit(
        &self,
        admitted: &[OffsetDateTime],
        now: OffsetDateTime,
    ) -> Result<Vec<OffsetDateTime>, u64> {
        let start = now - self.window;
        let mut recent: Vec<OffsetDateTime> =
            admitted.iter().copied().filter(|t| *t > start).collect();
        recent.sort_unstable();
        if recent.len() < self.calls {
            recent.push(now);
            return Ok(recent);
        }
        // The call that leaves the window first makes room; the oldest `len - calls + 1` must go.
        let Some(frees) = recent.get(recent.len() - self.calls) else {
            // A budget of no calls: nothing is ever admitted.
            return Err(u64::try_from(self.window.whole_seconds())
                .unwrap_or(1)
                .max(1));
        };
        let wait = *frees + self.window - now;
        let secs = wait.whole_seconds() + i64::from(wait.subsec_nanoseconds() > 0);
        Err(u64::try_from(secs).unwrap_or(1).max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    const NOW: OffsetDateTime = datetime!(2026-11-23 12:00 UTC);

    #[test]
    fn twenty_calls_a_minute_are_admitted_and_the_twenty_first_waits_for_the_oldest() {
        let b = ActionBudget::default();
        let mut stored = Vec::new();
        for i in 0..20 {
            stored = b
                .admit(&stored, NOW + Duration::seconds(i))
                .expect("admitted");
        }
        assert_eq!(stored.len(), 20);
        // The oldest (at NOW) leaves the window at NOW + 60 s.
        assert_eq!(b.admit(&stored, NOW + Duration::seconds(20)), Err(40));
        assert_eq!(
            b.admit(&stored, NOW + Duration::milliseconds(59_500)),
            Err(1)
        );
        let later = b
            .admit(&stored, NOW + Duration::seconds(61))
            .expect("room again");
        // The calls at NOW and NOW + 1 s have left the window (which starts at NOW + 1 s,
        // exclusive) and are forgotten: 18 remain, and the new one.
        assert_eq!(later.len(), 19, "the calls out of the window are forgotten");
        assert_eq!(later.last(), Some(&(NOW + Duration::seconds(61))));
    }

    #[test]
    fn calls_out_of_the_window_do_not_count() {
        let b = ActionBudget::default();
        let old = vec![NOW - Duration::minutes(2); 50];
        assert_eq!(b.admit(&old, NOW), Ok(vec![NOW]));
    }
}
