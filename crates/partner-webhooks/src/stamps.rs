//! The timings of a delivery's path, logged at `debug` with each attempt: where the time
//! between an event's commit and its arrival goes (`bench/webhooks-ab.sh` keeps them with
//! `BENCH_AB_KEEP`, `bench/webhooks-waits.sh` summarises them).

use partner_domain::kernel::ids::DeliveryId;

/// Wall-clock microseconds since the epoch, for the `debug` timings of a delivery's path (which
/// are compared with the event's `created_at` and the receiver's log, so not the injected clock).
pub(crate) fn unix_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// When each stage of a claim round began or ended (`unix_us`), logged at `debug` with each
/// attempt.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Stamps {
    /// The worker woke (a notification, a finished attempt, or the poll).
    pub(crate) woke: i64,
    /// The claim was sent to the store.
    pub(crate) claim: i64,
    /// The claim's rows came back.
    pub(crate) claimed: i64,
    /// The payloads were built (the subjects read).
    pub(crate) built: i64,
}

impl Stamps {
    /// Logs the round's stamps for `delivery`, with when its slot was free (`slot`), when its
    /// request was sent (`send`), and now, when it was answered.
    pub(crate) fn log(&self, delivery: DeliveryId, slot: i64, send: i64) {
        tracing::debug!(
            delivery = %delivery,
            woke = self.woke,
            claim = self.claim,
            claimed = self.claimed,
            built = self.built,
            slot,
            send,
            answered = unix_us(),
            "webhook attempt timings (unix µs)"
        );
    }
}
