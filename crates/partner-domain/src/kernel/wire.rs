//! Wire conventions shared by every rendered resource: RFC 3339 UTC timestamps with exactly
//! three fractional digits and `Z`, and `YYYY-MM-DD` dates.
//!
//! ```
//! use partner_domain::kernel::wire::{format_timestamp, parse_timestamp};
//!
//! let t = parse_timestamp("2026-11-26T10:00:00+01:00").ok_or("not RFC 3339")?;
//! assert_eq!(format_timestamp(t), "2026-11-26T09:00:00.000Z");
//! assert_eq!(parse_timestamp("26/11/2026"), None);
//! # Ok::<(), &str>(())
//! ```

use serde::Serializer;
use time::{OffsetDateTime, UtcOffset};

/// The years a wire timestamp can carry: RFC 3339 has exactly four year digits.
pub const YEARS: std::ops::RangeInclusive<i32> = 0..=9999;

/// The first and last instants a wire timestamp can name, in UTC.
const FIRST: OffsetDateTime = time::macros::datetime!(0000-01-01 00:00 UTC);
const LAST: OffsetDateTime = time::macros::datetime!(9999-12-31 23:59:59.999 UTC);

/// `t` in UTC, or `None` when the conversion would leave the years `time` can hold (an input of
/// `9999-12-31T23:59:59-23:59` is one). Unlike `to_offset`, never panics.
pub(crate) fn to_utc(t: OffsetDateTime) -> Option<OffsetDateTime> {
    t.checked_to_offset(UtcOffset::UTC)
}

/// `t` in UTC within [`YEARS`]: an instant outside them is clamped to the first or last
/// representable millisecond. Inputs outside are refused by [`parse_timestamp`], so only a value
/// written into the database by other means can be clamped; rendering it must still not panic.
fn clamp_to_wire(t: OffsetDateTime) -> OffsetDateTime {
    match to_utc(t) {
        Some(u) if u < FIRST => FIRST,
        Some(u) if u > LAST => LAST,
        Some(u) => u,
        // A negative offset moves the instant later in UTC: it overflowed past the last year.
        None if t.offset().is_negative() => LAST,
        None => FIRST,
    }
}

/// `2026-11-21T10:00:00.000Z`. Written directly rather than through a format description:
/// listings format two timestamps a row, and this is several times cheaper. Total: any
/// `OffsetDateTime` gives a valid RFC 3339 text (years outside 0000-9999 are clamped to them).
pub fn format_timestamp(t: OffsetDateTime) -> String {
    let b = timestamp_bytes(t);
    std::str::from_utf8(&b)
        .map(str::to_owned)
        .unwrap_or_default()
}

/// The 24 ASCII bytes of [`format_timestamp`], digit by digit: `write!` with `{:02}` went through
/// `core::fmt`'s padding machinery, about 4 % of the server's samples in a leads listing.
pub fn timestamp_bytes(t: OffsetDateTime) -> [u8; 24] {
    let t = clamp_to_wire(t);
    let mut b = *b"0000-00-00T00:00:00.000Z";
    let mut put = |at: std::ops::Range<usize>, mut v: u32| {
        for i in at.rev() {
            if let Some(d) = b.get_mut(i) {
                *d = b'0' + (v % 10) as u8;
            }
            v /= 10;
        }
    };
    put(0..4, u32::try_from(t.year()).unwrap_or(0));
    put(5..7, u32::from(u8::from(t.month())));
    put(8..10, u32::from(t.day()));
    put(11..13, u32::from(t.hour()));
    put(14..16, u32::from(t.minute()));
    put(17..19, u32::from(t.second()));
    put(20..23, u32::from(t.millisecond()));
    b
}

/// Parses an RFC 3339 timestamp (any offset), returning it in UTC truncated to milliseconds.
/// `None` for anything that is not RFC 3339, and for an instant whose UTC year is outside
/// [`YEARS`] (`9999-12-31T23:59:59-23:59` is in year 10000 in UTC; `0000-01-01T00:00:00+00:01`
/// in year -1): such a value could not be written back on the wire. Never panics.
pub fn parse_timestamp(s: &str) -> Option<OffsetDateTime> {
    let t = OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
    let utc = to_utc(t).filter(|u| YEARS.contains(&u.year()))?;
    Some(crate::kernel::clock::truncate_to_millis(utc))
}

/// A `since` that is not a timestamp: `since must be an ISO 8601 timestamp`.
fn bad_since() -> crate::kernel::values::ValueError {
    crate::kernel::values::ValueError::Expected {
        field: "since",
        expected: "an ISO 8601 timestamp",
    }
}

/// The events feed's `since`: [`parse_timestamp`] (so within the years it accepts, to the
/// millisecond).
pub fn parse_since(s: &str) -> Result<OffsetDateTime, crate::kernel::values::ValueError> {
    parse_timestamp(s).ok_or_else(bad_since)
}

/// A recovery's `since`: any RFC 3339 timestamp, as given (no year range, no truncation; the
/// recovery window is checked by the service).
pub fn parse_since_exact(s: &str) -> Result<OffsetDateTime, crate::kernel::values::ValueError> {
    OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
        .map_err(|_| bad_since())
}

/// [`parse_timestamp`] of a request field: `{field} must be an RFC 3339 timestamp` otherwise.
pub fn parse_timestamp_field(
    s: &str,
    field: &'static str,
) -> Result<OffsetDateTime, crate::kernel::values::ValueError> {
    parse_timestamp(s).ok_or(crate::kernel::values::ValueError::Expected {
        field,
        expected: "an RFC 3339 timestamp",
    })
}

/// Serde helpers: `#[serde(serialize_with = "wire::ts")]`.
pub fn ts<S: Serializer>(t: &OffsetDateTime, s: S) -> Result<S::Ok, S::Error> {
    // From the stack: no allocation per timestamp.
    let b = timestamp_bytes(*t);
    s.serialize_str(std::str::from_utf8(&b).unwrap_or_default())
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
    use proptest::prelude::*;
    use time::macros::datetime;
    use time::{Date, Month, PrimitiveDateTime, Time};

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

    #[test]
    fn offsets_that_leave_the_four_digit_years_are_refused_not_panics() {
        for s in [
            "9999-12-31T23:59:59-23:59",
            "9999-12-31T23:59:59-00:01",
            "9999-12-31T23:00:00-01:00",
            "0000-01-01T00:00:00+23:59",
            "0000-01-01T00:00:00+00:01",
            "0000-01-01T00:00:00.999+00:01",
        ] {
            assert_eq!(parse_timestamp(s), None, "{s}");
        }
        for (s, want) in [
            ("9999-12-31T23:59:59.999999Z", "9999-12-31T23:59:59.999Z"),
            ("9999-12-31T23:59:59+00:00", "9999-12-31T23:59:59.000Z"),
            ("9999-12-31T00:00:00-23:59", "9999-12-31T23:59:00.000Z"),
            ("0000-01-01T00:00:00Z", "0000-01-01T00:00:00.000Z"),
            ("0000-01-01T23:59:00+23:59", "0000-01-01T00:00:00.000Z"),
            ("0000-01-01T00:00:00-23:59", "0000-01-01T23:59:00.000Z"),
        ] {
            let t = parse_timestamp(s).unwrap_or_else(|| panic!("{s} parses"));
            assert_eq!(format_timestamp(t), want, "{s}");
        }
    }

    #[test]
    fn format_clamps_instants_outside_the_wire_years() {
        let late = PrimitiveDateTime::new(
            Date::from_calendar_date(9999, Month::December, 31).expect("date"),
            Time::MIDNIGHT,
        )
        .assume_offset(time::macros::offset!(-23:59));
        assert_eq!(format_timestamp(late), "9999-12-31T23:59:00.000Z");
        let later = late.replace_hour(23).expect("hour");
        assert_eq!(format_timestamp(later), "9999-12-31T23:59:59.999Z");
        let early = PrimitiveDateTime::new(
            Date::from_calendar_date(0, Month::January, 1).expect("date"),
            Time::MIDNIGHT,
        )
        .assume_offset(time::macros::offset!(+00:01));
        assert_eq!(format_timestamp(early), "0000-01-01T00:00:00.000Z");
        assert_eq!(
            format_timestamp(PrimitiveDateTime::MIN.assume_utc()),
            "0000-01-01T00:00:00.000Z"
        );
        assert_eq!(
            format_timestamp(
                PrimitiveDateTime::MAX.assume_offset(time::macros::offset!(-23:59:59))
            ),
            "9999-12-31T23:59:59.999Z"
        );
        assert_eq!(
            format_timestamp(
                PrimitiveDateTime::MIN.assume_offset(time::macros::offset!(+23:59:59))
            ),
            "0000-01-01T00:00:00.000Z"
        );
    }

    /// The RFC 3339 text of the given parts, with a `Z` or `±hh:mm` offset.
    fn rfc3339(
        (y, mo, d, h, mi, sec): (i32, u8, u8, u8, u8, u8),
        frac: &str,
        offset: Option<i32>,
    ) -> String {
        let off = match offset {
            None => "Z".to_owned(),
            Some(m) => format!(
                "{}{:02}:{:02}",
                if m < 0 { '-' } else { '+' },
                m.abs() / 60,
                m.abs() % 60
            ),
        };
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{sec:02}{frac}{off}")
    }

    /// The instant the parts name, as Unix seconds, when the calendar date and time are valid
    /// (seconds 0-59): an oracle independent of the code under test.
    fn unix_seconds((y, mo, d, h, mi, sec): (i32, u8, u8, u8, u8, u8), offset: i32) -> Option<i64> {
        let date = Date::from_calendar_date(y, Month::try_from(mo).ok()?, d).ok()?;
        let local = date
            .with_hms(h, mi, sec)
            .ok()?
            .assume_utc()
            .unix_timestamp();
        Some(local - i64::from(offset) * 60)
    }

    fn parts() -> impl Strategy<Value = (i32, u8, u8, u8, u8, u8)> {
        (
            prop_oneof![0..=9999i32, Just(0), Just(9999), 0..=2i32, 9997..=9999i32],
            1..=12u8,
            1..=31u8,
            0..=23u8,
            0..=59u8,
            0..=60u8,
        )
    }

    fn offset_minutes() -> impl Strategy<Value = Option<i32>> {
        prop_oneof![
            Just(None),
            (-(23 * 60 + 59)..=(23 * 60 + 59)).prop_map(Some),
            prop_oneof![Just(-(23 * 60 + 59)), Just(23 * 60 + 59), Just(-1), Just(1)]
                .prop_map(Some),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// Years 0000-9999 with offsets up to ±23:59: parsing and formatting never panic; a
        /// parsed value is accepted exactly when it is a real instant within the wire's years,
        /// and formats to a text that parses back to itself.
        #[test]
        fn parse_and_format_are_total_over_years_and_offsets(
            p in parts(),
            frac in prop_oneof![Just(String::new()), "\\.[0-9]{1,9}"],
            offset in offset_minutes(),
        ) {
            let text = rfc3339(p, &frac, offset);
            let parsed = parse_timestamp(&text);
            if p.5 < 60 {
                let first = FIRST.unix_timestamp();
                let last = LAST.unix_timestamp();
                let expected = unix_seconds(p, offset.unwrap_or(0))
                    .is_some_and(|u| (first..=last).contains(&u));
                prop_assert_eq!(parsed.is_some(), expected, "{}", text);
            }
            if let Some(t) = parsed {
                prop_assert_eq!(t.offset(), UtcOffset::UTC);
                let out = format_timestamp(t);
                prop_assert_eq!(out.len(), 24, "{}", out);
                prop_assert_eq!(parse_timestamp(&out), Some(t), "{} -> {}", text, out);
                if p.5 < 60 {
                    prop_assert_eq!(Some(t.unix_timestamp()), unix_seconds(p, offset.unwrap_or(0)));
                }
            }
        }

        /// Any text at all: no panic.
        #[test]
        fn parse_never_panics_on_arbitrary_text(s in any::<String>()) {
            let _ = parse_timestamp(&s);
        }

        /// Any representable instant with any offset formats to a wire timestamp that parses.
        #[test]
        fn format_is_total(
            days in (Date::MIN.to_julian_day()..=Date::MAX.to_julian_day()),
            secs in 0..86_400u32,
            nanos in 0..1_000_000_000u32,
            off in -(23 * 3600 + 59 * 60 + 59)..=(23 * 3600 + 59 * 60 + 59),
        ) {
            let date = Date::from_julian_day(days).expect("in range");
            let time = Time::from_hms_nano(
                (secs / 3600) as u8,
                (secs / 60 % 60) as u8,
                (secs % 60) as u8,
                nanos,
            )
            .expect("time");
            let offset = UtcOffset::from_whole_seconds(off).expect("offset");
            let t = PrimitiveDateTime::new(date, time).assume_offset(offset);
            let out = format_timestamp(t);
            prop_assert_eq!(out.len(), 24, "{}", out);
            prop_assert!(parse_timestamp(&out).is_some(), "{}", out);
        }
    }
}
