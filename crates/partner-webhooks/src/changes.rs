//! Claims gone stale: a claim reads the endpoint's URL, secrets, custom header and status with
//! its deliveries, and a delivery may wait in its lane for seconds before it is sent. When the
//! endpoint changes meanwhile (a rotation, a new URL, a disable, a delete: the store announces it
//! on commit), the deliveries claimed before the change are given back instead of sent with what
//! was read (issue 23, N1). Pure bookkeeping over `Instant`s.
//!
//! The announcements are the fast path only: every attempt the announcements do not already
//! report stale is also checked against the endpoint's row before it is sent (`checks`; issue 23,
//! N9b''), because an announcement can be late (a slow `LISTEN` connection) or lost. What they
//! say beyond that tells how far they could be trusted, which the worker logs when the row
//! disagrees: a claim made before the listener's latest (re)start, or while it is down, is
//! [`Freshness::Unsure`] (issue 23, N9), and so is one sent after the listener's latest probe echo
//! stopped proving what it heard ([`Changes::heard_until`]: each echo proves every change
//! committed before its probe was heard, and holds for a probe interval and a margin; issue 23,
//! N9b').

use std::collections::HashMap;
use std::time::{Duration, Instant};

use partner_domain::kernel::ids::EndpointId;

/// What the announcements say of a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Freshness {
    /// Heard without a break since the claim, and no change of its endpoint announced.
    Fresh,
    /// Its endpoint changed after the claim: give it back.
    Stale,
    /// The announcements were not heard all along since the claim.
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
    /// Until when the listener's latest probe echo proves that every change was heard; `None`
    /// while no listener proves anything (a worker without a listener, as before).
    proven_until: Option<Instant>,
    endpoints: HashMap<EndpointId, Instant>,
    /// A change older than this concerns no claim still held (a claim's lease is shorter).
    horizon: Duration,
}

impl Changes {
    pub(crate) fn new(horizon: Duration) -> Self {
        Self {
            any: None,
            heard_since: Some(Instant::now()),
            proven_until: None,
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

    /// What the listener heard is proven until `until` (a probe's echo); a later proof that
    /// came back sooner never shortens it.
    pub(crate) fn heard_until(&mut self, until: Instant) {
        self.proven_until = Some(self.proven_until.map_or(until, |t| t.max(until)));
    }

    /// What the announcements say, at `now`, of a delivery of `endpoint` claimed at
    /// `claimed_at`.
    pub(crate) fn freshness(
        &self,
        endpoint: EndpointId,
        claimed_at: Instant,
        now: Instant,
    ) -> Freshness {
        if self.stale(endpoint, claimed_at) {
            Freshness::Stale
        } else if self.heard_since.is_some_and(|t| t <= claimed_at)
            && self.proven_until.is_none_or(|t| now <= t)
        {
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
            c.freshness(id(1), t0 + s(1), t0 + s(1)),
            Freshness::Fresh,
            "no listener"
        );
        // The listener's connection is lost: nothing claimed is sure any more.
        c.heard_since(None);
        assert_eq!(c.freshness(id(1), t0 + s(1), t0 + s(1)), Freshness::Unsure);
        assert_eq!(
            c.freshness(id(1), t0 + s(3), t0 + s(3)),
            Freshness::Unsure,
            "claimed while deaf"
        );
        // Listening again at t0+5: a claim from before is still unsure, one after is fresh.
        c.heard_since(Some(t0 + s(5)));
        assert_eq!(c.freshness(id(1), t0 + s(3), t0 + s(3)), Freshness::Unsure);
        assert_eq!(c.freshness(id(1), t0 + s(6), t0 + s(8)), Freshness::Fresh);
        c.changed(Some(id(1)), t0 + s(7));
        assert_eq!(
            c.freshness(id(1), t0 + s(6), t0 + s(8)),
            Freshness::Stale,
            "an announced change"
        );
        assert_eq!(c.freshness(id(2), t0 + s(6), t0 + s(8)), Freshness::Fresh);
    }

    /// N9b': once a listener proves what it heard (probe echoes), a claim is fresh only while
    /// the latest proof holds: a connection that died silently since is not trusted for longer.
    #[test]
    fn a_claim_is_fresh_only_while_the_listeners_latest_echo_holds() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut c = Changes::new(Duration::from_secs(30));
        c.heard_since(Some(t0));
        c.heard_until(t0 + ms(750));
        let claimed = t0 + ms(100);
        assert_eq!(c.freshness(id(1), claimed, t0 + ms(700)), Freshness::Fresh);
        assert_eq!(
            c.freshness(id(1), claimed, t0 + ms(800)),
            Freshness::Unsure,
            "no echo proves the last 50 ms"
        );
        c.heard_until(t0 + ms(1250));
        assert_eq!(c.freshness(id(1), claimed, t0 + ms(800)), Freshness::Fresh);
        c.heard_until(t0 + ms(900));
        assert_eq!(
            c.freshness(id(1), claimed, t0 + ms(1200)),
            Freshness::Fresh,
            "an older proof never shortens a newer one"
        );
        c.changed(Some(id(1)), t0 + ms(1000));
        assert_eq!(c.freshness(id(1), claimed, t0 + ms(1200)), Freshness::Stale);
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
