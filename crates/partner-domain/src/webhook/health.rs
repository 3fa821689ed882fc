//! Endpoint health: when the service disables an endpoint by itself. The store reads an
//! endpoint's health and the attempts of a batch, asks [`EndpointHealth::after`], and writes what
//! it answers; the rule is decided here, never in SQL.

use std::time::Duration;

use time::OffsetDateTime;

use crate::webhook::delivery::AttemptOutcome;
use crate::webhook::endpoint::DisabledReason;
use crate::webhook::retry::NextStep;

/// An endpoint's health as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndpointHealth {
    /// Since when every attempt at the endpoint has failed (`None`: its last attempt succeeded,
    /// or it has not failed since it was re-enabled).
    pub failing_since: Option<OffsetDateTime>,
    /// Whether it is disabled (by the service or by its partner).
    pub disabled: bool,
}

/// One attempt that made a request, as the rule reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempted {
    /// Answered 2xx.
    pub delivered: bool,
    /// The receiver's status, `None` when it did not answer.
    pub status_code: Option<u16>,
    /// When the attempt ended.
    pub at: OffsetDateTime,
}

impl Attempted {
    /// The attempt an outcome records; `None` when no request was made (the record was gone),
    /// which says nothing of the endpoint.
    pub fn of(outcome: &AttemptOutcome) -> Option<Self> {
        outcome.duration_ms.map(|_| Self {
            delivered: outcome.next == NextStep::Delivered,
            status_code: outcome.status_code,
            at: outcome.at,
        })
    }
}

/// What to write of an endpoint's health after a batch of attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthChange {
    /// Since when every attempt failed (`None`: the last one succeeded).
    pub failing_since: Option<OffsetDateTime>,
    /// Disable it, as of that instant (the batch's last attempt), for that reason.
    pub disable: Option<(OffsetDateTime, DisabledReason)>,
    /// Whether the endpoint is disabled once this is written (newly or already): its pending
    /// deliveries then end `failed` ([`crate::webhook::ENDPOINT_DISABLED`]).
    pub disabled: bool,
}

impl EndpointHealth {
    /// The endpoint's health after `attempts`, a batch's attempts at it (in any order):
    /// - a delivered attempt ends its run of failures;
    /// - an attempt answered `410 Gone` disables it (`gone`);
    /// - a run of failures that began `disable_after` or more before the batch's last attempt
    ///   disables it (`failing`; `None` or zero: never);
    /// - a disabled endpoint is not disabled again (its run of failures is still tracked).
    ///
    /// `None` when nothing changes, so a healthy endpoint's row is not written per batch.
    pub fn after(
        self,
        attempts: &[Attempted],
        disable_after: Option<Duration>,
    ) -> Option<HealthChange> {
        let last_at = attempts.iter().map(|a| a.at).max()?;
        let any_delivered = attempts.iter().any(|a| a.delivered);
        let gone = attempts.iter().any(|a| a.status_code == Some(410));
        let first_failure = attempts.iter().filter(|a| !a.delivered).map(|a| a.at).min();
        let failing_since = if any_delivered {
            None
        } else {
            self.failing_since.or(first_failure)
        };
        let failing_too_long = || {
            let window = disable_after
                .filter(|d| !d.is_zero())
                .and_then(|d| time::Duration::try_from(d).ok())?;
            let since = failing_since?;
            Some(since <= last_at.checked_sub(window)?)
        };
        let disable = if self.disabled {
            None
        } else if gone {
            Some((last_at, DisabledReason::Gone))
        } else if !any_delivered && failing_too_long() == Some(true) {
            Some((last_at, DisabledReason::Failing))
        } else {
            None
        };
        (disable.is_some() || failing_since != self.failing_since).then_some(HealthChange {
            failing_since,
            disable,
            disabled: self.disabled || disable.is_some(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    const T: OffsetDateTime = datetime!(2026-11-21 10:00 UTC);
    const HOUR: Duration = Duration::from_secs(3600);

    fn at(minutes: i64, delivered: bool, code: Option<u16>) -> Attempted {
        Attempted {
            delivered,
            status_code: code,
            at: T + time::Duration::minutes(minutes),
        }
    }

    fn healthy() -> EndpointHealth {
        EndpointHealth {
            failing_since: None,
            disabled: false,
        }
    }

    #[test]
    fn a_healthy_endpoint_that_keeps_delivering_is_not_written() {
        let batch = [at(0, true, Some(200)), at(1, true, Some(204))];
        assert_eq!(healthy().after(&batch, Some(HOUR)), None);
        assert_eq!(healthy().after(&[], Some(HOUR)), None, "no attempts");
    }

    #[test]
    fn the_first_failure_starts_a_run_and_a_delivery_ends_it() {
        let failing = healthy()
            .after(&[at(5, false, Some(500)), at(2, false, None)], Some(HOUR))
            .expect("a change");
        assert_eq!(
            failing,
            HealthChange {
                failing_since: Some(at(2, false, None).at),
                disable: None,
                disabled: false
            }
        );
        let run = EndpointHealth {
            failing_since: failing.failing_since,
            disabled: false,
        };
        assert_eq!(
            run.after(&[at(10, false, Some(503))], Some(HOUR)),
            None,
            "the run goes on from its start"
        );
        let recovered = run
            .after(
                &[at(11, false, Some(500)), at(12, true, Some(200))],
                Some(HOUR),
            )
            .expect("a change");
        assert_eq!(recovered.failing_since, None);
        assert_eq!(recovered.disable, None);
    }

    #[test]
    fn a_run_of_failures_lasting_disable_after_disables() {
        let run = EndpointHealth {
            failing_since: Some(T),
            disabled: false,
        };
        assert_eq!(run.after(&[at(59, false, Some(500))], Some(HOUR)), None);
        let change = run
            .after(&[at(60, false, Some(500))], Some(HOUR))
            .expect("a change");
        assert_eq!(
            change.disable,
            Some((at(60, false, None).at, DisabledReason::Failing))
        );
        assert_eq!(change.failing_since, Some(T));
        assert!(change.disabled);
        for never in [None, Some(Duration::ZERO)] {
            assert_eq!(run.after(&[at(600, false, None)], never), None, "{never:?}");
        }
        // A first failure long ago in the same batch counts too.
        let batch = [at(0, false, None), at(90, false, None)];
        assert_eq!(
            healthy().after(&batch, Some(HOUR)).and_then(|c| c.disable),
            Some((at(90, false, None).at, DisabledReason::Failing))
        );
    }

    #[test]
    fn a_410_disables_at_once_even_beside_a_delivery() {
        let change = healthy()
            .after(&[at(0, true, Some(200)), at(1, false, Some(410))], None)
            .expect("a change");
        assert_eq!(
            change.disable,
            Some((at(1, false, None).at, DisabledReason::Gone))
        );
        assert_eq!(change.failing_since, None);
        assert!(change.disabled);
    }

    #[test]
    fn a_disabled_endpoint_is_not_disabled_again_but_its_run_is_tracked() {
        let off = EndpointHealth {
            failing_since: None,
            disabled: true,
        };
        let change = off
            .after(&[at(0, false, Some(410))], Some(HOUR))
            .expect("the run starts");
        assert_eq!(change.disable, None);
        assert_eq!(change.failing_since, Some(T));
        assert!(change.disabled, "its pending deliveries still end failed");
        let run = EndpointHealth {
            failing_since: Some(T),
            disabled: true,
        };
        assert_eq!(run.after(&[at(120, false, Some(410))], Some(HOUR)), None);
    }

    #[test]
    fn only_attempts_that_made_a_request_count() {
        let mut outcome = AttemptOutcome {
            id: crate::kernel::ids::DeliveryId::from_uuid(uuid::Uuid::nil()),
            lease: uuid::Uuid::nil(),
            row: crate::webhook::RowHint::NONE,
            at: T,
            status_code: Some(200),
            error: None,
            duration_ms: Some(12),
            next: NextStep::Delivered,
        };
        assert_eq!(Attempted::of(&outcome), Some(at(0, true, Some(200))));
        outcome.duration_ms = None;
        assert_eq!(Attempted::of(&outcome), None);
    }
}
