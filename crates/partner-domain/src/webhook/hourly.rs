//! The last 24 hours of deliveries by hour (the portal's chart, extensions §10): a small read
//! beside the delivery log, whose counts it equals.
//!
//! ```
//! use partner_domain::time::OffsetDateTime;
//! use partner_domain::webhook::DeliveryStatus;
//! use partner_domain::webhook::hourly::{StatusCount, by_hour, window_start};
//!
//! let now = OffsetDateTime::from_unix_timestamp(1_795_000_000)?;
//! let start = window_start(now);
//! let hours = by_hour(start, &[StatusCount { hour: 23, status: DeliveryStatus::Failed, count: 2 }]);
//! assert_eq!(hours.len(), 24);
//! assert_eq!(hours.last().map(|h| h.failed), Some(2));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use serde::Serialize;
use time::{Duration, OffsetDateTime};

use crate::kernel::wire;
use crate::webhook::delivery::DeliveryStatus;

/// How many hours the window holds, the current one last.
pub const HOURS: usize = 24;

/// Deliveries created in hour `hour` of the window (0: the oldest) with `status`, as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusCount {
    /// The hour of the window (0: the oldest).
    pub hour: u8,
    /// The deliveries' status now.
    pub status: DeliveryStatus,
    /// How many.
    pub count: u32,
}

/// One hour of the window: deliveries created in it, by their status now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HourCount {
    /// The start of the hour (UTC).
    #[serde(serialize_with = "wire::ts")]
    pub hour: OffsetDateTime,
    /// Delivered deliveries.
    pub delivered: u32,
    /// Failed deliveries.
    pub failed: u32,
    /// Pending deliveries.
    pub pending: u32,
}

/// The start of the window whose last hour holds `now`: 23 whole hours before `now`'s hour.
pub fn window_start(now: OffsetDateTime) -> OffsetDateTime {
    let hour = now
        .replace_minute(0)
        .and_then(|t| t.replace_second(0))
        .and_then(|t| t.replace_nanosecond(0))
        .unwrap_or(now);
    hour - Duration::hours(i64::try_from(HOURS).unwrap_or(24) - 1)
}

/// The window's 24 hours from `start`, oldest first, every hour present (zeros where nothing
/// was created); counts outside the window are ignored.
pub fn by_hour(start: OffsetDateTime, counts: &[StatusCount]) -> Vec<HourCount> {
    let mut hours: Vec<HourCount> = (0..HOURS)
        .map(|i| HourCount {
            hour: start + Duration::hours(i64::try_from(i).unwrap_or_default()),
            delivered: 0,
            failed: 0,
            pending: 0,
        })
        .collect();
    for c in counts {
        if let Some(h) = hours.get_mut(usize::from(c.hour)) {
            let slot = match c.status {
                DeliveryStatus::Delivered => &mut h.delivered,
                DeliveryStatus::Failed => &mut h.failed,
                DeliveryStatus::Pending => &mut h.pending,
            };
            *slot = slot.saturating_add(c.count);
        }
    }
    hours
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn the_window_ends_with_the_current_hour() {
        let start = window_start(datetime!(2026-11-26 10:37:12.5 UTC));
        assert_eq!(start, datetime!(2026-11-25 11:00 UTC));
        assert_eq!(window_start(datetime!(2026-11-26 10:00 UTC)), start);
    }

    #[test]
    fn every_hour_is_present_and_counts_land_in_their_hour() {
        let start = datetime!(2026-11-25 11:00 UTC);
        let hours = by_hour(
            start,
            &[
                StatusCount {
                    hour: 0,
                    status: DeliveryStatus::Failed,
                    count: 2,
                },
                StatusCount {
                    hour: 23,
                    status: DeliveryStatus::Delivered,
                    count: 5,
                },
                StatusCount {
                    hour: 23,
                    status: DeliveryStatus::Pending,
                    count: 1,
                },
                StatusCount {
                    hour: 24,
                    status: DeliveryStatus::Pending,
                    count: 9,
                },
            ],
        );
        assert_eq!(hours.len(), 24);
        assert_eq!(hours[0].hour, start);
        assert_eq!((hours[0].failed, hours[0].delivered), (2, 0));
        assert_eq!(hours[23].hour, datetime!(2026-11-26 10:00 UTC));
        assert_eq!((hours[23].delivered, hours[23].pending), (5, 1));
        let total: u32 = hours
            .iter()
            .map(|h| h.delivered + h.failed + h.pending)
            .sum();
        assert_eq!(total, 8, "the count outside the window is ignored");
    }
}
