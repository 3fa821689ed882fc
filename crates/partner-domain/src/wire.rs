//! Wire conventions shared by every rendered resource: RFC 3339 UTC timestamps with exactly
//! three fractional digits and `Z`, and `YYYY-MM-DD` dates.

use std::fmt::Write;

use serde::Serializer;
use time::{OffsetDateTime, UtcOffset};

/// `2026-11-21T10:00:00.000Z`. Written directly rather than through a format description:
/// listings format two timestamps a row, and this is several times cheaper.
pub fn format_timestamp(t: OffsetDateTime) -> String {
    let t = t.to_offset(UtcOffset::UTC);
    let mut s = String::with_capacity(24);
    let _ = write!(
        s,
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.millisecond()
    );
    s
}

/// Parses an RFC 3339 timestamp (any offset), returning it in UTC truncated to milliseconds.
pub fn parse_timestamp(s: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
        .ok()
        .map(crate::clock::truncate_to_millis)
}

/// Serde helpers: `#[serde(serialize_with = "wire::ts")]`.
pub fn ts<S: Serializer>(t: &OffsetDateTime, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_timestamp(*t))
}

/// Serde helper for optional timestamps (null when absent).
pub fn ts_opt<S: Serializer>(t: &Option<OffsetDateTime>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => s.serialize_str(&format_timestamp(*t)),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn timestamps_have_millis_and_z() {
        assert_eq!(
            format_timestamp(datetime!(2026-11-21 10:00 UTC)),
            "2026-11-21T10:00:00.000Z"
        );
        assert_eq!(
            format_timestamp(datetime!(2026-11-21 12:00:00.5 +02:00)),
            "2026-11-21T10:00:00.500Z"
        );
    }

    #[test]
    fn parse_accepts_offsets_and_truncates() {
        assert_eq!(
            parse_timestamp("2026-11-21T12:00:00.123456+02:00"),
            Some(datetime!(2026-11-21 10:00:00.123 UTC))
        );
        assert_eq!(parse_timestamp("2026-11-21"), None);
        assert_eq!(parse_timestamp("yesterday"), None);
    }
}
