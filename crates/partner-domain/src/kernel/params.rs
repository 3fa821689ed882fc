//! Values of query parameters and body fields that no entity owns (a page offset, a duration in
//! months, a yes/no switch, an export format, a non-negative amount): total over any text, each
//! refusal a [`ValueError`] whose text is written here once.
//!
//! ```
//! use partner_domain::kernel::params::{parse_offset, parse_switch};
//!
//! assert_eq!(parse_offset(None), Ok(0));
//! assert_eq!(parse_offset(Some("007")), Ok(7));
//! assert!(parse_offset(Some("-1")).is_err());
//! assert_eq!(parse_switch(Some("true"), "redeem"), Ok(true));
//! assert!(parse_switch(Some("yes"), "redeem").is_err());
//! ```

use crate::kernel::values::ValueError;

/// Most digits an `offset` may have (a plain integer >= 0; 12 digits is far beyond any table).
pub const OFFSET_DIGITS: usize = 12;

/// What a count or an amount that may be zero but not negative accepts.
const NON_NEGATIVE: &str = "an integer >= 0";

/// A listing's `offset`: absent is 0; else 1-12 ASCII digits (leading zeros allowed). Empty,
/// signed, fractional or longer values are refused: `offset must be an integer >= 0`.
pub fn parse_offset(raw: Option<&str>) -> Result<u64, ValueError> {
    let Some(s) = raw else { return Ok(0) };
    let bad = || ValueError::expected("offset", NON_NEGATIVE);
    if s.is_empty() || s.len() > OFFSET_DIGITS || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    s.parse().map_err(|_| bad())
}

/// An amount in cents that may be zero: `{field} must be an integer >= 0` otherwise.
pub fn non_negative(n: i64, field: &'static str) -> Result<i64, ValueError> {
    if n < 0 {
        return Err(ValueError::expected(field, NON_NEGATIVE));
    }
    Ok(n)
}

/// A membership duration in months given as text (`duration` on Care Service links, `m` on the
/// embedded view): absent is `None`; else exactly `1`, `3`, `6` or `12`, or
/// `{field} must be 1, 3, 6 or 12`.
pub fn parse_months_param(
    raw: Option<&str>,
    field: &'static str,
) -> Result<Option<u8>, ValueError> {
    match raw {
        None => Ok(None),
        Some("1") => Ok(Some(1)),
        Some("3") => Ok(Some(3)),
        Some("6") => Ok(Some(6)),
        Some("12") => Ok(Some(12)),
        Some(_) => Err(ValueError::expected(field, "1, 3, 6 or 12")),
    }
}

/// A switch that is off unless asked for: absent or `false` is off, `true` on, anything else
/// `{field} must be true`.
pub fn parse_switch(raw: Option<&str>, field: &'static str) -> Result<bool, ValueError> {
    match raw {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(_) => Err(ValueError::expected(field, "true")),
    }
}

/// How a listing is answered: JSON (the default) or a CSV export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListFormat {
    /// A JSON page (`format=json`, the default).
    Json,
    /// A CSV export (`format=csv`).
    Csv,
}

impl ListFormat {
    /// `format`: absent or `json`, or `csv`; else `format must be json or csv`.
    pub fn parse_param(raw: Option<&str>) -> Result<Self, ValueError> {
        match raw {
            None | Some("json") => Ok(Self::Json),
            Some("csv") => Ok(Self::Csv),
            Some(_) => Err(ValueError::expected("format", "json or csv")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts() {
        let text = |e: ValueError| e.to_string();
        assert_eq!(
            parse_offset(Some("-1")).map_err(text),
            Err("offset must be an integer >= 0".to_owned())
        );
        assert_eq!(
            non_negative(-1, "unitPriceCents").map_err(text),
            Err("unitPriceCents must be an integer >= 0".to_owned())
        );
        assert_eq!(non_negative(0, "unitPriceCents").ok(), Some(0));
        assert_eq!(
            parse_months_param(Some("2"), "m").map_err(text),
            Err("m must be 1, 3, 6 or 12".to_owned())
        );
        assert_eq!(
            parse_switch(Some("yes"), "redeem").map_err(text),
            Err("redeem must be true".to_owned())
        );
        assert_eq!(parse_switch(Some("true"), "redeem").ok(), Some(true));
        assert_eq!(parse_switch(None, "redeem").ok(), Some(false));
        assert_eq!(
            ListFormat::parse_param(Some("xml")).map_err(text),
            Err("format must be json or csv".to_owned())
        );
        assert_eq!(ListFormat::parse_param(None).ok(), Some(ListFormat::Json));
    }
}
