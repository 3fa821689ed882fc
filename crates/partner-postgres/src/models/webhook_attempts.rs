//! `webhook_attempts` rows (declared in `schema_extra.rs`: the table has no primary key).

use diesel::prelude::*;
use partner_domain::webhook::AttemptLogEntry;
use time::OffsetDateTime;

use crate::schema_extra::webhook_attempts;

/// One attempt of a delivery, as its log shows it.
#[derive(Queryable, Selectable)]
#[diesel(table_name = webhook_attempts, check_for_backend(diesel::pg::Pg))]
pub(crate) struct AttemptRow {
    attempted_at: OffsetDateTime,
    status_code: Option<i32>,
    duration_ms: Option<i32>,
    error: Option<String>,
}

impl AttemptRow {
    pub(crate) fn into_domain(self) -> AttemptLogEntry {
        AttemptLogEntry {
            attempted_at: self.attempted_at,
            status_code: self.status_code,
            duration_ms: self.duration_ms,
            error: self.error,
        }
    }
}
