//! Claims gone stale: a claim reads the endpoint's URL, secrets, custom header and status with
//! its deliveries, and a delivery may wait in its lane for seconds before it is sent. When the
//! endpoint changes meanwhile (a rotation, a new URL, a disable, a delete: the store announces it
//! on commit), the deliveries claimed before the change are given back instead of sent with what
//! was read (issue 23, N1). Pure bookkeeping over `Instant`s.
//!
//! The announcements prove a claim fresh only while they are heard: from the moment the listening
//! connection is lost until it listens again, a change may commit unannounced. A claim made
//! before the listener's latest (re)start, or while it is down, is [`Freshness::Unsure`]: the
//! worker asks the store whether the endpoint's row is still the version the claim read before
//! sending (issue 23, N9).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use partner_domain::kernel::ids::EndpointId;

/// What the announcements say of a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Freshness {
    /// Heard without a break since the claim, and no change of its endpoint: send it.
    Fresh,
    /// Its endpoint changed after the claim: give it back.
    Stale,
    /// The announcements were not heard all along since the claim: check the endpoint first.
    Unsure,
}

/// When each endpoint last changed, and when any may have (the announcements were missed).
#[derive(Debug)]
pub(crate) struct Changes {
    any: Option<Instant>,
    /// Since when announcements have been heard without a break; `None` while the listener is
    /// down. Until a listener says otherwise, from the start (a worker without a listener
    /// trusts its claims, as before: nothing announces anything to it).
    heard_since: Option<Instant>,
    endpoints: HashMap<EndpointId, Instant>,
    /// A change older than this concerns no claim still held (a claim's lease is shorter).
    horizon: Duration,
}

impl Changes {
    pub(crate) fn new(horizon: Duration) -> Self {
        Self {
            any: None,
            heard_since: Some(Instant::now()),
            endpoints: HashMap::new(),
            horizon,
        }
    }

    /// `endpoint` changed at `at` (`None`: any endpoint may have).
    pub(crate) fn changed(&mut self, endpoint: Option<EndpointId>, at: Instant) {
        let horizon = self.horizon;
        self.endpoints
            .retain(|_, t| at.saturating_duration_since(*t) <= horizon);
        match endpoint {
            Some(id) => {
                self.endpoints.insert(id, at);
            }
            None => self.any = Some(at),
        }
    }

    /// The listener is listening (again) from `at` (`Some`), or lost its connection (`None`).
    pub(crate) fn heard_since(&mut self, at: Option<Instant>) {
        self.heard_since = at;
    }

    /// What the announcements say of a delivery of `endpoint` claimed at `claimed_at`.
    pub(crate) fn freshness(&self, endpoint: EndpointId, claimed_at: Instant) -> Freshness {
        if self.stale(endpoint, claimed_at) {
            Freshness::Stale
        } else if self.heard_since.is_some_and(|t| t <= claimed_at) {
            Freshness::Fresh
        } else {
            Freshness::Unsure
        }
    }

    /// Whether a delivery of `endpoint` claimed at `claimed_at` was claimed before a change.
    fn stale(&self, endpoint: EndpointId, claimed_at: Instant) -> bool {
        self.any.is_some_and(|t| t >= claimed_at)
            || self
                .endpoints
                .get(&endpoint)
                .is_some_and(|t| *t >= claimed_at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u128) -> EndpointId {
        EndpointId::from_uuid(uuid::Uuid::from_u128(n))
    }

    #[test]
    fn a_claim_before_its_endpoints_change_is_stale_and_one_after_it_is_not() {
        let t0 = Instant::now();
        let mut c = Changes::new(Duration::from_secs(30));
        assert!(!c.stale(id(1), t0));
        c.changed(Some(id(1)), t0 + Duration::from_secs(1));
        assert!(c.stale(id(1), t0), "claimed before the change");
        assert!(!c.stale(id(2), t0), "another endpoint");
        assert!(
            !c.stale(id(1), t0 + Duration::from_secs(2)),
            "claimed after"
        );
    }

    #[test]
    fn a_missed_announcement_makes_every_earlier_claim_stale() {
        let t0 = Instant::now();
        let mut c = Changes::new(Duration::from_secs(30));
        c.changed(None, t0 + Duration::from_secs(1));
        assert!(c.stale(id(7), t0));
        assert!(!c.stale(id(7), t0 + Duration::from_secs(2)));
    }

    #[test]
    fn a_claim_is_fresh_only_if_announcements_were_heard_all_along_since() {
        let t0 = Instant::now();
        let mut c = Changes::new(Duration::from_secs(30));
        let s = Duration::from_secs;
        assert_eq!(
            c.freshness(id(1), t0 + s(1)),
            Freshness::Fresh,
            "no listener"
        );
        // The listener's connection is lost: nothing claimed is sure any more.
        c.heard_since(None);
        assert_eq!(c.freshness(id(1), t0 + s(1)), Freshness::Unsure);
        assert_eq!(
            c.freshness(id(1), t0 + s(3)),
            Freshness::Unsure,
            "claimed while deaf"
        );
        // Listening again at t0+5: a claim from before is still unsure, one after is fresh.
        c.heard_since(Some(t0 + s(5)));
        assert_eq!(c.freshness(id(1), t0 + s(3)), Freshness::Unsure);
        assert_eq!(c.freshness(id(1), t0 + s(6)), Freshness::Fresh);
        c.changed(Some(id(1)), t0 + s(7));
        assert_eq!(
            c.freshness(id(1), t0 + s(6)),
            Freshness::Stale,
            "an announced change"
        );
        assert_eq!(c.freshness(id(2), t0 + s(6)), Freshness::Fresh);
    }

    #[test]
    fn changes_older_than_the_horizon_are_forgotten() {
        let t0 = Instant::now();
        let mut c = Changes::new(Duration::from_secs(30));
        c.changed(Some(id(1)), t0);
        c.changed(Some(id(2)), t0 + Duration::from_secs(31));
        assert_eq!(c.endpoints.len(), 1);
    }
}
