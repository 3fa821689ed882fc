//! Lanes and fairness: each endpoint's share of the worker. An endpoint has at most
//! `endpoint_concurrency` attempts in flight and holds as many more claimed deliveries as it
//! answers in half an attempt timeout; an endpoint that keeps timing out is backed off as a whole
//! by its circuit breaker. The claim asks the store for at most each endpoint's room, so one
//! endpoint's backlog never takes every slot. Pure bookkeeping over a monotonic `Instant`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use partner_domain::kernel::ids::EndpointId;
use tokio::sync::Semaphore;

use crate::WorkerConfig;

/// Consecutive timeouts after which an endpoint's circuit opens.
const BREAKER_THRESHOLD: u32 = 5;
const BREAKER_BASE: Duration = Duration::from_secs(10);
const BREAKER_MAX: Duration = Duration::from_secs(300);
/// Ready deliveries per in-flight slot, at most: how far ahead of a fast endpoint the claim runs.
const MAX_DEPTH: u32 = 16;

/// A circuit breaker per endpoint: after [`BREAKER_THRESHOLD`] consecutive timeouts the endpoint
/// gets no claims for a cool-down (doubling up to [`BREAKER_MAX`]), then one probe at a time until
/// an attempt is answered.
#[derive(Debug, Clone)]
struct Breaker {
    timeouts: u32,
    open_until: Option<Instant>,
    cooldown: Duration,
}

impl Default for Breaker {
    fn default() -> Self {
        Self {
            timeouts: 0,
            open_until: None,
            cooldown: BREAKER_BASE,
        }
    }
}

impl Breaker {
    fn is_closed(&self) -> bool {
        self.timeouts < BREAKER_THRESHOLD
    }

    /// How many more of this endpoint's deliveries may be claimed, given `held` already are.
    fn room(&self, per_endpoint: usize, held: usize, now: Instant) -> usize {
        if self.open_until.is_some_and(|t| t > now) {
            0
        } else if self.is_closed() {
            per_endpoint.saturating_sub(held)
        } else {
            1usize.saturating_sub(held) // half-open: one probe
        }
    }

    fn answered(&mut self) {
        *self = Self::default();
    }

    fn timed_out(&mut self, now: Instant) {
        self.timeouts = self.timeouts.saturating_add(1);
        if !self.is_closed() {
            self.open_until = Some(now + self.cooldown);
            self.cooldown = (self.cooldown * 2).min(BREAKER_MAX);
        }
    }
}

/// One endpoint's share of this worker.
#[derive(Debug)]
struct Lane {
    /// Attempts in flight.
    sending: Arc<Semaphore>,
    /// Attempts next in line, whose endpoint-row check may run while the slots are busy (as many
    /// as the slots: `Worker::attempt`).
    turns: Arc<Semaphore>,
    /// Deliveries claimed and not finished (sending or ready).
    held: usize,
    breaker: Breaker,
    /// Recent answer time (exponentially weighted), once the endpoint has answered.
    latency: Option<Duration>,
}

impl Lane {
    fn new(endpoint_concurrency: usize) -> Self {
        Self {
            sending: Arc::new(Semaphore::new(endpoint_concurrency)),
            turns: Arc::new(Semaphore::new(endpoint_concurrency)),
            held: 0,
            breaker: Breaker::default(),
            latency: None,
        }
    }

    /// How many deliveries this endpoint may hold: its in-flight share, plus as many ready ones
    /// as it answers in half an attempt timeout (so a ready delivery never waits long enough for
    /// its lease to run out), between one more round and [`MAX_DEPTH`] rounds. A fast endpoint is
    /// never left idle waiting for the database; a slow one holds little it cannot send soon.
    fn capacity(&self, endpoint_concurrency: usize, timeout: Duration) -> usize {
        let rounds = match self.latency {
            None => 2,
            Some(l) => {
                let fit = timeout.as_secs_f64() / 2.0 / l.as_secs_f64().max(0.000_1);
                // Saturating float-to-int cast; `fit` is positive.
                (1 + fit.min(f64::from(MAX_DEPTH)) as u32).clamp(2, MAX_DEPTH)
            }
        };
        endpoint_concurrency.saturating_mul(usize::try_from(rounds).unwrap_or(2))
    }

    /// How many more of this endpoint's deliveries to claim now. A busy endpoint is topped up only
    /// once half its capacity is free, so it is claimed for in batches, not one row per answer.
    fn room(&self, endpoint_concurrency: usize, timeout: Duration, now: Instant) -> usize {
        let cap = self.capacity(endpoint_concurrency, timeout);
        let room = self.breaker.room(cap, self.held, now);
        if self.breaker.is_closed() && room * 2 < cap {
            0
        } else {
            room
        }
    }

    fn observe(&mut self, took: Duration) {
        self.latency = Some(match self.latency {
            None => took,
            Some(l) => l.mul_f64(0.8) + took.mul_f64(0.2),
        });
    }
}

/// What a finished delivery tells its lane.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Heard {
    /// The endpoint answered (any status) after this long.
    Answer(Duration),
    /// The attempt timed out after this long: the breaker counts it.
    Timeout(Duration),
    /// Nothing about the endpoint (another failure, or the delivery was given up unsent).
    Nothing,
}

/// What finishing a delivery changed for the worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Finished {
    /// There is room to claim into that there was not before: wake the claimer.
    pub(crate) wake: bool,
    /// Nothing is held any more (shutdown waits for this).
    pub(crate) idle: bool,
}

/// Every endpoint's lane, and what the worker holds in all.
#[derive(Debug, Default)]
pub(crate) struct Lanes {
    by_endpoint: HashMap<EndpointId, Lane>,
    held: usize,
}

impl Lanes {
    /// Deliveries claimed and not finished, in all.
    pub(crate) fn held(&self) -> usize {
        self.held
    }

    /// How many deliveries an endpoint this worker holds nothing of may be claimed for.
    pub(crate) fn fresh_endpoint_room(c: &WorkerConfig) -> usize {
        Lane::new(c.endpoint_concurrency).capacity(c.endpoint_concurrency, c.timeout)
    }

    /// The room of every endpoint this worker holds something of, for the claim.
    pub(crate) fn room(&self, c: &WorkerConfig, now: Instant) -> Vec<(EndpointId, u32)> {
        self.by_endpoint
            .iter()
            .map(|(id, l)| {
                let r = l.room(c.endpoint_concurrency, c.timeout, now);
                (*id, u32::try_from(r).unwrap_or(u32::MAX))
            })
            .collect()
    }

    /// Whether this worker holds deliveries and every endpoint it holds them of has no room: a
    /// claim now can only find another endpoint's work, and this worker is woken (and claims)
    /// as soon as one of them has room again.
    pub(crate) fn all_full(&self, c: &WorkerConfig, now: Instant) -> bool {
        !self.by_endpoint.is_empty()
            && self
                .by_endpoint
                .values()
                .all(|l| l.room(c.endpoint_concurrency, c.timeout, now) == 0)
    }

    /// Counts claimed deliveries of these endpoints as held.
    pub(crate) fn hold(
        &mut self,
        c: &WorkerConfig,
        endpoints: impl IntoIterator<Item = EndpointId>,
    ) {
        for endpoint in endpoints {
            self.held += 1;
            self.by_endpoint
                .entry(endpoint)
                .or_insert_with(|| Lane::new(c.endpoint_concurrency))
                .held += 1;
        }
    }

    /// The endpoint's turns to be checked and its in-flight slots, while it holds something.
    pub(crate) fn slots(&self, endpoint: EndpointId) -> Option<(Arc<Semaphore>, Arc<Semaphore>)> {
        self.by_endpoint
            .get(&endpoint)
            .map(|l| (l.turns.clone(), l.sending.clone()))
    }

    /// A held delivery is done (sent, or given up by this worker): frees its place and updates
    /// the endpoint's breaker. The claimer is woken only when this opened room to claim into
    /// (waking it on every answer would cost a claim per delivery).
    pub(crate) fn finish(
        &mut self,
        c: &WorkerConfig,
        endpoint: EndpointId,
        heard: Heard,
        now: Instant,
    ) -> Finished {
        let mut wake = self.held == c.concurrency.saturating_mul(2);
        self.held = self.held.saturating_sub(1);
        if let Some(lane) = self.by_endpoint.get_mut(&endpoint) {
            let before = lane.room(c.endpoint_concurrency, c.timeout, now);
            lane.held = lane.held.saturating_sub(1);
            match heard {
                Heard::Answer(took) => {
                    lane.breaker.answered();
                    lane.observe(took);
                }
                Heard::Timeout(took) => {
                    lane.breaker.timed_out(now);
                    lane.observe(took);
                }
                Heard::Nothing => {}
            }
            wake |= before == 0 && lane.room(c.endpoint_concurrency, c.timeout, now) > 0;
            if lane.held == 0 && lane.breaker.is_closed() {
                self.by_endpoint.remove(&endpoint);
            }
        }
        Finished {
            wake,
            idle: self.held == 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;

    fn config() -> WorkerConfig {
        WorkerConfig {
            retry_schedule: vec![Duration::from_secs(1)],
            timeout: Duration::from_secs(10),
            allow_private: true,
            extra_roots_pem: None,
            poll_interval: Duration::from_secs(1),
            concurrency: 8,
            endpoint_concurrency: 4,
            retention: Duration::from_secs(3600),
            event_retention: Duration::from_secs(3600),
            maintenance_interval: Duration::from_secs(60),
            disable_after: None,
        }
    }

    fn endpoint(n: u128) -> EndpointId {
        EndpointId::from_uuid(Uuid::from_u128(n))
    }

    #[test]
    fn the_breaker_opens_after_repeated_timeouts_and_half_opens_after_its_cooldown() {
        let t0 = Instant::now();
        let mut b = Breaker::default();
        assert_eq!(b.room(8, 3, t0), 5);
        for _ in 0..BREAKER_THRESHOLD - 1 {
            b.timed_out(t0);
        }
        assert_eq!(b.room(8, 0, t0), 8, "still closed");
        b.timed_out(t0);
        assert_eq!(b.room(8, 0, t0), 0, "open");
        let later = t0 + BREAKER_BASE + Duration::from_millis(1);
        assert_eq!(b.room(8, 0, later), 1, "half-open: one probe");
        assert_eq!(b.room(8, 1, later), 0);
        b.timed_out(later);
        assert_eq!(
            b.room(8, 0, later + BREAKER_BASE + Duration::from_millis(1)),
            0,
            "the cool-down doubled"
        );
        b.answered();
        assert_eq!(b.room(8, 0, later), 8, "an answer closes it");
    }

    #[test]
    fn a_fast_endpoint_may_hold_more_rounds_than_a_slow_one() {
        let c = config();
        let mut fast = Lane::new(c.endpoint_concurrency);
        assert_eq!(fast.capacity(4, c.timeout), 8, "unknown: two rounds");
        fast.observe(Duration::from_millis(1));
        assert_eq!(fast.capacity(4, c.timeout), 4 * MAX_DEPTH as usize);
        let mut slow = Lane::new(c.endpoint_concurrency);
        slow.observe(Duration::from_secs(4));
        assert_eq!(
            slow.capacity(4, c.timeout),
            8,
            "never fewer than two rounds"
        );
    }

    #[test]
    fn a_busy_endpoint_is_topped_up_only_once_half_its_capacity_is_free() {
        let c = config();
        let now = Instant::now();
        let mut lanes = Lanes::default();
        let e = endpoint(1);
        lanes.hold(&c, std::iter::repeat_n(e, 8));
        assert_eq!(lanes.room(&c, now), vec![(e, 0)]);
        let f = lanes.finish(&c, e, Heard::Answer(Duration::from_secs(4)), now);
        assert!(!f.wake && !f.idle, "one free place of eight: no claim yet");
        for _ in 0..3 {
            lanes.finish(&c, e, Heard::Answer(Duration::from_secs(4)), now);
        }
        assert_eq!(lanes.room(&c, now), vec![(e, 4)], "half free: claim four");
    }

    #[test]
    fn finishing_wakes_the_claimer_when_room_opens_and_reports_idle_at_the_end() {
        let c = config();
        let now = Instant::now();
        let mut lanes = Lanes::default();
        let (a, b) = (endpoint(1), endpoint(2));
        lanes.hold(
            &c,
            std::iter::repeat_n(a, 8).chain(std::iter::repeat_n(b, 8)),
        );
        assert_eq!(lanes.held(), 16);
        assert!(lanes.slots(a).is_some());
        let f = lanes.finish(&c, a, Heard::Nothing, now);
        assert!(
            f.wake,
            "the worker was full (2 × concurrency held): room opened"
        );
        for _ in 0..7 {
            lanes.finish(&c, a, Heard::Nothing, now);
        }
        assert!(lanes.slots(a).is_none(), "an idle, healthy lane is dropped");
        let mut last = None;
        for _ in 0..8 {
            last = Some(lanes.finish(&c, b, Heard::Nothing, now));
        }
        assert_eq!(last.map(|f| f.idle), Some(true));
        assert_eq!(lanes.held(), 0);
    }

    #[test]
    fn all_full_only_while_every_endpoint_held_has_no_room() {
        let c = config();
        let now = Instant::now();
        let mut lanes = Lanes::default();
        assert!(
            !lanes.all_full(&c, now),
            "nothing held: nothing to wait for"
        );
        let (a, b) = (endpoint(1), endpoint(2));
        lanes.hold(&c, std::iter::repeat_n(a, 8));
        assert!(lanes.all_full(&c, now), "a holds its capacity");
        lanes.hold(&c, std::iter::once(b));
        assert!(!lanes.all_full(&c, now), "b has room");
        lanes.finish(&c, b, Heard::Nothing, now);
        assert!(lanes.all_full(&c, now), "b is done: only a is held");
        for _ in 0..4 {
            lanes.finish(&c, a, Heard::Answer(Duration::from_secs(4)), now);
        }
        assert!(!lanes.all_full(&c, now), "half of a's capacity free: room");
    }

    #[test]
    fn an_endpoint_that_keeps_timing_out_is_given_no_room_until_its_cooldown_ends() {
        let c = config();
        let now = Instant::now();
        let mut lanes = Lanes::default();
        let e = endpoint(1);
        lanes.hold(&c, std::iter::repeat_n(e, 6));
        for _ in 0..BREAKER_THRESHOLD {
            lanes.finish(&c, e, Heard::Timeout(c.timeout), now);
        }
        assert_eq!(lanes.room(&c, now), vec![(e, 0)], "open");
        let later = now + BREAKER_BASE + Duration::from_millis(1);
        assert_eq!(
            lanes.room(&c, later),
            vec![(e, 0)],
            "one still held: no probe"
        );
        lanes.finish(&c, e, Heard::Nothing, later);
        assert_eq!(
            lanes.slots(e).map(|_| ()),
            Some(()),
            "an open breaker keeps its lane"
        );
        assert_eq!(lanes.room(&c, later), vec![(e, 1)], "half-open: one probe");
    }
}
