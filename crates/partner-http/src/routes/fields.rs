//! Parsing helpers shared by the operator's ingest bodies (leads, orders, payouts).

use partner_domain::kernel::values::{SubId, ValueError, text};
use partner_domain::kernel::wire::parse_timestamp_field;
use partner_domain::links::attribution::Attribution;

/// `partnerId` (plain or a sub-account code) plus an optional explicit `subId`.
pub(super) fn attribution(
    partner_id: &str,
    sub_id: Option<&str>,
) -> std::result::Result<Attribution, ValueError> {
    let explicit = sub_id.map(SubId::parse).transpose()?;
    Attribution::parse(partner_id)?.with_explicit_sub(explicit)
}

pub(super) fn timestamp(
    s: &str,
    field: &'static str,
) -> std::result::Result<time::OffsetDateTime, ValueError> {
    parse_timestamp_field(s, field)
}

pub(super) fn optional_text(
    v: Option<&str>,
    field: &'static str,
    max: usize,
) -> std::result::Result<Option<String>, ValueError> {
    v.map(|s| text(field, s, 0, max))
        .transpose()
        .map(|o| o.filter(|s| !s.is_empty()))
}
