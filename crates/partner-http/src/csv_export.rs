//! CSV documents as the contract writes them: every value (and the header) quoted, embedded
//! quotes doubled, lines ending in `\n`, no byte-order mark, and every cell passed through
//! [`neutralize_csv_cell`] so that no spreadsheet evaluates it as a formula.

use std::borrow::Borrow;

use partner_domain::kernel::csv_cell::neutralize_csv_cell;

/// A CSV document of `header` and `rows`. Every cell, header included, is neutralised (the
/// header names are constants that never need it).
pub(crate) fn write<const N: usize, R>(
    header: [&str; N],
    rows: impl IntoIterator<Item = R>,
    size_hint: usize,
) -> Result<Vec<u8>, csv::Error>
where
    R: Borrow<[String; N]>,
{
    let mut w = csv::WriterBuilder::new()
        .quote_style(csv::QuoteStyle::Always)
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::with_capacity(size_hint));
    w.write_record(header.iter().map(|h| neutralize_csv_cell(h).into_owned()))?;
    for row in rows {
        for cell in row.borrow() {
            w.write_field(neutralize_csv_cell(cell).as_bytes())?;
        }
        w.write_record(None::<&[u8]>)?;
    }
    w.into_inner().map_err(|e| csv::Error::from(e.into_error()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::indexing_slicing)]

    use super::*;
    use partner_domain::kernel::csv_cell::{NEUTRALIZING_PREFIX, is_formula_like};
    use proptest::prelude::*;

    fn read(doc: &[u8]) -> Vec<Vec<String>> {
        csv::ReaderBuilder::new()
            .has_headers(false)
            .from_reader(doc)
            .records()
            .map(|r| r.expect("record").iter().map(str::to_owned).collect())
            .collect()
    }

    #[test]
    fn cells_are_quoted_and_neutralised() {
        let rows = [[
            "=1+1".to_owned(),
            "a \"quoted\" word".to_owned(),
            String::new(),
        ]];
        let doc = write(["a", "b", "c"], &rows, 0).expect("csv");
        assert_eq!(
            String::from_utf8(doc).expect("utf-8"),
            "\"a\",\"b\",\"c\"\n\"'=1+1\",\"a \"\"quoted\"\" word\",\"\"\n"
        );
    }

    /// Cell text: anything, and often something that starts with a formula trigger or holds
    /// quotes, commas and line breaks.
    fn cell() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<String>(),
            "[=+\\-@\t\r\",\n' a-z]{0,12}",
            ("[=+\\-@\t\r]", any::<String>()).prop_map(|(a, b)| a + &b),
        ]
    }

    proptest! {
        #[test]
        fn documents_read_back_to_the_same_cells_modulo_the_prefix(
            rows in proptest::collection::vec(proptest::array::uniform3(cell()), 0..8)
        ) {
            let doc = write(["x", "y", "z"], &rows, 0).expect("csv");
            let back = read(&doc);
            prop_assert_eq!(back.len(), rows.len() + 1);
            prop_assert_eq!(&back[0], &vec!["x".to_owned(), "y".to_owned(), "z".to_owned()]);
            for (written, original) in back[1..].iter().zip(&rows) {
                prop_assert_eq!(written.len(), 3);
                for (w, o) in written.iter().zip(original) {
                    prop_assert!(!is_formula_like(w), "{w:?}");
                    let restored = if is_formula_like(o) {
                        w.strip_prefix(NEUTRALIZING_PREFIX)
                    } else {
                        Some(w.as_str())
                    };
                    prop_assert_eq!(restored, Some(o.as_str()));
                }
            }
        }
    }
}
