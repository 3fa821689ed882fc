//! Spreadsheet formula neutralisation for CSV exports (extensions.md §7).
//!
//! Spreadsheet programs evaluate a cell whose text starts with `=`, `+`, `-` or `@` as a formula
//! (and some also after a leading tab or carriage return), so a CSV export that carries text
//! supplied by somebody else (a patient's email at redemption, an operator's notes) could run a
//! formula on the machine of whoever opens it. Such a value is written with a leading `'`, which
//! spreadsheets treat as "this is text" and do not display. JSON answers are never altered.
//!
//! ```
//! use partner_domain::kernel::csv_cell::{is_formula_like, neutralize_csv_cell};
//!
//! assert!(is_formula_like("=HYPERLINK(\"http://x\")"));
//! assert_eq!(neutralize_csv_cell("=1+1"), "'=1+1");
//! assert_eq!(neutralize_csv_cell("ann@acme.test"), "ann@acme.test");
//! ```

use std::borrow::Cow;

/// The first characters that make a spreadsheet treat a cell as a formula.
pub const FORMULA_TRIGGERS: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// The prefix written before a value that starts with a [`FORMULA_TRIGGERS`] character.
pub const NEUTRALIZING_PREFIX: char = '\'';

/// Whether a spreadsheet could read `value` as a formula.
pub fn is_formula_like(value: &str) -> bool {
    value.starts_with(FORMULA_TRIGGERS)
}

/// `value` as it is written into a CSV cell: unchanged when it is safe, else prefixed with `'`.
/// (Quoting is the CSV writer's job; this only decides the cell's text.)
pub fn neutralize_csv_cell(value: &str) -> Cow<'_, str> {
    if is_formula_like(value) {
        let mut out = String::with_capacity(value.len() + 1);
        out.push(NEUTRALIZING_PREFIX);
        out.push_str(value);
        Cow::Owned(out)
    } else {
        Cow::Borrowed(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn dangerous_starts_are_prefixed() {
        for (raw, want) in [
            ("=1+1", "'=1+1"),
            ("+33 1 23", "'+33 1 23"),
            ("-2", "'-2"),
            ("@SUM(A1)", "'@SUM(A1)"),
            ("\t=1", "'\t=1"),
            ("\r=1", "'\r=1"),
            (
                "=HYPERLINK(\"http://x\")@x.co",
                "'=HYPERLINK(\"http://x\")@x.co",
            ),
        ] {
            assert_eq!(neutralize_csv_cell(raw), want, "{raw:?}");
        }
    }

    #[test]
    fn safe_values_are_borrowed_unchanged() {
        for raw in [
            "",
            "pat@x.co",
            "a=b",
            "1-2",
            " =1",
            "'=1",
            "ABCDEFGH1234",
            "2026-11-21T10:00:00.000Z",
        ] {
            assert!(
                matches!(neutralize_csv_cell(raw), Cow::Borrowed(s) if s == raw),
                "{raw:?}"
            );
        }
    }

    proptest! {
        #[test]
        fn output_never_starts_with_a_trigger(s in any::<String>()) {
            let out = neutralize_csv_cell(&s);
            prop_assert!(!is_formula_like(&out));
        }

        #[test]
        fn safe_input_is_unchanged_and_dangerous_input_only_gains_the_prefix(
            s in prop_oneof![
                any::<String>(),
                ("[=+\\-@\t\r]", any::<String>()).prop_map(|(a, b)| a + &b),
            ]
        ) {
            let out = neutralize_csv_cell(&s);
            if is_formula_like(&s) {
                prop_assert_eq!(out.strip_prefix(NEUTRALIZING_PREFIX), Some(s.as_str()));
            } else {
                prop_assert_eq!(out.as_ref(), s.as_str());
            }
        }
    }
}
