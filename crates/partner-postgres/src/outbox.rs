//! Writes domain events into the outbox inside the caller's transaction.

use diesel::prelude::*;
use diesel::sql_types::{Text, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use partner_domain::events::DomainEvent;
use time::OffsetDateTime;

use crate::schema::partners;

/// The event, and in the same statement one delivery per endpoint of the partner that subscribed
/// to its kind and is not disabled. Whether the kind waits for the endpoint's stored delay is the
/// domain's rule (`EventKind::honours_endpoint_delay`), bound as $6. Raw, and prepared once per
/// connection through [`crate::Prepared`] (ingest runs it for every lead, `docs/performance.md`):
/// a CTE that writes, feeding an `INSERT … SELECT`, which the DSL cannot write.
const WRITE_SQL: &str = "\
WITH ev AS ( \
  INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at) \
  VALUES (gen_random_uuid(), $1, $2, $3, $4::jsonb, $5) RETURNING id) \
INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, attempts, \
  next_attempt_at, created_at) \
SELECT gen_random_uuid(), w.id, w.partner_id, ev.id, $2, 'pending', 0, \
  $5 + make_interval(secs => CASE WHEN $6 \
                             THEN COALESCE(w.lead_created_delay_seconds, 0) ELSE 0 END), $5 \
FROM webhook_endpoints w, ev WHERE w.partner_id = $1 AND $2 = ANY (w.events) AND w.disabled_at IS NULL";

/// Returns the number of deliveries written: after the transaction commits, the caller tells the
/// workers ([`crate::PgStore::deliveries_committed`]).
pub(crate) async fn write(
    conn: &mut AsyncPgConnection,
    events: &[DomainEvent],
    now: OffsetDateTime,
) -> Result<usize, diesel::result::Error> {
    let mut deliveries = 0;
    for e in events {
        let n = crate::Prepared(
            diesel::sql_query(WRITE_SQL)
                .bind::<Text, _>(e.partner_id().as_str())
                .bind::<Text, _>(e.kind().as_str())
                .bind::<Text, _>(e.subject())
                .bind::<Text, _>(e.extra().to_string())
                .bind::<Timestamptz, _>(now)
                .bind::<diesel::sql_types::Bool, _>(e.kind().honours_endpoint_delay()),
        )
        .execute(conn)
        .await?;
        deliveries += n;
    }
    Ok(deliveries)
}

pub(crate) async fn partner_exists(
    conn: &mut AsyncPgConnection,
    partner: &str,
) -> Result<bool, diesel::result::Error> {
    diesel::select(diesel::dsl::exists(
        partners::table.filter(partners::partner_id.eq(partner)),
    ))
    .get_result(conn)
    .await
}
