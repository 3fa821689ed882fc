//! Listings: a page of a keyset listing, a chunk of a listing streamed in chunks, and the page
//! size every listing parses the same way.
//!
//! ```
//! use partner_domain::kernel::page::parse_limit;
//!
//! assert_eq!(parse_limit(None, 50, 200), Ok(50));
//! assert_eq!(parse_limit(Some("200"), 50, 200), Ok(200));
//! assert!(parse_limit(Some("201"), 50, 200).is_err());
//! assert!(parse_limit(Some("0"), 50, 200).is_err());
//! ```

use crate::kernel::values::ValueError;

/// A page size: a plain decimal integer within `1..=max`, `default` when absent.
pub fn parse_limit(raw: Option<&str>, default: u16, max: u16) -> Result<u16, ValueError> {
    let Some(s) = raw else { return Ok(default) };
    let reason = "must be an integer within the allowed range";
    if s.is_empty() || s.len() > 5 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ValueError::invalid("limit", reason));
    }
    s.parse::<u16>()
        .ok()
        .filter(|n| (1..=max).contains(n))
        .ok_or(ValueError::invalid("limit", reason))
}

/// One page of a keyset listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    /// The rows of the page.
    pub items: Vec<T>,
    /// The cursor of the next page; `None`: this was the last.
    pub next_cursor: Option<String>,
    /// The page size asked for.
    pub limit: u16,
}

/// One chunk of a listing read in chunks, and where the next one starts (`None`: this was the
/// last).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk<T, K> {
    /// The rows of the chunk.
    pub rows: Vec<T>,
    /// Where the next chunk starts.
    pub next: Option<K>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_matrix() {
        assert_eq!(parse_limit(None, 50, 200), Ok(50));
        assert_eq!(parse_limit(Some("1"), 50, 200), Ok(1));
        assert_eq!(parse_limit(Some("200"), 50, 200), Ok(200));
        for bad in [
            "0",
            "201",
            "abc",
            "1.5",
            "",
            "-1",
            "+5",
            " 5",
            "99999999999",
            "1e2",
        ] {
            assert!(parse_limit(Some(bad), 50, 200).is_err(), "{bad}");
        }
    }

    mod limit_properties {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            /// `limit`: never panics; accepted exactly when it is 1-5 ASCII digits whose value
            /// is 1..=max (`0`, `201`, `abc`, `1.5`, empty, signs and spaces are refused).
            #[test]
            fn parse_limit_accepts_exactly_the_documented_range(
                s in prop_oneof![
                    any::<String>(),
                    "[0-9]{0,7}",
                    "[-+ 0-9.]{0,5}",
                    (0u32..=70_000).prop_map(|n| n.to_string()),
                ],
                max in prop_oneof![Just(200u16), Just(500u16), 1..=u16::MAX],
                default in any::<u16>(),
            ) {
                let value = (!s.is_empty() && s.len() <= 5 && s.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| s.parse::<u32>().ok())
                    .flatten()
                    .filter(|n| (1..=u32::from(max)).contains(n));
                prop_assert_eq!(
                    parse_limit(Some(&s), default, max).ok().map(u32::from),
                    value,
                    "{:?} max {}", s, max
                );
                prop_assert_eq!(parse_limit(None, default, max).ok(), Some(default));
            }
        }
    }
}
