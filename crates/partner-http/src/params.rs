//! Query parameters that no entity owns, parsed by the domain's `kernel::params` (which words
//! their refusals); these only carry the refusal to the answer.

use partner_domain::kernel::params;

use crate::error::ApiError;

/// The coupons listing's `offset`: absent is 0; else 1-12 ASCII digits (leading zeros allowed).
/// Empty, signed, fractional or longer values are 400.
pub(crate) fn offset(raw: Option<&str>) -> Result<u64, ApiError> {
    Ok(params::parse_offset(raw)?)
}

/// A membership duration in months (`duration` on Care Service links, `m` on the embedded
/// view): absent is `None`; else exactly `1`, `3`, `6` or `12`.
pub(crate) fn months(raw: Option<&str>, field: &'static str) -> Result<Option<u8>, ApiError> {
    Ok(params::parse_months_param(raw, field)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use partner_domain::kernel::params::OFFSET_DIGITS;
    use proptest::prelude::*;

    #[test]
    fn offsets() {
        assert_eq!(offset(None).ok(), Some(0));
        assert_eq!(offset(Some("0")).ok(), Some(0));
        assert_eq!(offset(Some("007")).ok(), Some(7));
        assert_eq!(offset(Some("999999999999")).ok(), Some(999_999_999_999));
        for bad in ["", "-1", "+1", "1.0", " 1", "1e3", "9999999999999", "٣"] {
            assert!(offset(Some(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn durations() {
        for (s, n) in [("1", 1), ("3", 3), ("6", 6), ("12", 12)] {
            assert_eq!(months(Some(s), "m").ok(), Some(Some(n)));
        }
        assert_eq!(months(None, "m").ok(), Some(None));
        for bad in ["", "0", "2", "01", "12 ", "+1", "24", "1.0"] {
            assert!(months(Some(bad), "m").is_err(), "{bad:?}");
        }
    }

    /// Text that is often numeric-looking.
    fn param() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<String>(),
            "[0-9]{0,14}",
            "[-+ 0-9.e]{0,6}",
            (0u64..=2_000_000_000_000).prop_map(|n| n.to_string()),
        ]
    }

    proptest! {
        #[test]
        fn offset_accepts_exactly_plain_integers_of_at_most_12_digits(s in param()) {
            let documented = !s.is_empty()
                && s.len() <= OFFSET_DIGITS
                && s.bytes().all(|b| b.is_ascii_digit());
            match offset(Some(&s)) {
                Ok(n) => {
                    prop_assert!(documented, "{s:?}");
                    prop_assert_eq!(s.parse::<u64>().ok(), Some(n));
                }
                Err(e) => {
                    prop_assert!(!documented, "{s:?}");
                    prop_assert_eq!(e.code(), "invalid_request");
                }
            }
        }

        #[test]
        fn months_accepts_exactly_1_3_6_12(s in param()) {
            let got = months(Some(&s), "duration");
            let documented = ["1", "3", "6", "12"].contains(&s.as_str());
            prop_assert_eq!(got.is_ok(), documented, "{:?}", s);
            if let Ok(m) = got {
                prop_assert_eq!(m.map(|m| m.to_string()), Some(s));
            }
        }
    }
}
