//! Claims gone stale: a claim reads the endpoint's URL, secrets, custom header and status with
//! its deliveries, and a delivery may wait in its lane for seconds before it is sent. When the
//! endpoint changes meanwhile (a rotation, a new URL, a disable, a delete: the store announces it
//! on commit), the deliveries claimed before the change are given back instead of sent with what
//! was read (issue 23, N1). Pure bookkeeping over `Instant`s.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use partner_domain::kernel::ids::EndpointId;

/// When each endpoint last changed, and when any may have (the announcements were missed).
#[derive(Debug)]
pub(crate) struct Changes {
    any: Option<Instant>,
    endpoints: HashMap<EndpointId, Instant>,
    /// A change older than this concerns no claim still held (a claim's lease is shorter).
    horizon: Duration,
}

impl Changes {
    pub(crate) fn new(horizon: Duration) -> Self {
        Self {
            any: None,
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

    /// Whether a delivery of `endpoint` claimed at `claimed_at` was claimed before a change.
    pub(crate) fn stale(&self, endpoint: EndpointId, claimed_at: Instant) -> bool {
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
    fn changes_older_than_the_horizon_are_forgotten() {
        let t0 = Instant::now();
        let mut c = Changes::new(Duration::from_secs(30));
        c.changed(Some(id(1)), t0);
        c.changed(Some(id(2)), t0 + Duration::from_secs(31));
        assert_eq!(c.endpoints.len(), 1);
    }
}
