//! The outbox, inside the caller's transaction: events with their deliveries, and deliveries
//! queued again. Every write that makes a delivery pending is here, so the workers are told of
//! them in one place, after the commit ([`crate::PgStore::deliveries_committed`]).

use diesel::prelude::*;
use diesel::sql_types::{Text, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use partner_domain::RepoError;
use partner_domain::events::{DomainEvent, Recipients, Requeue};
use partner_domain::kernel::ids::DeliveryId;
use partner_domain::kernel::values::PartnerId;
use partner_domain::webhook::{DeliveryInfo, DeliveryStatus};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::db;
use crate::models::webhook_deliveries::{DeliveryRow, Recovered};
use crate::schema::{partners, webhook_deliveries};

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

/// An event for one endpoint (a ping): the event, written only when `$6` is the partner's
/// endpoint, and with it its one delivery `$7`, due at once. Raw: a CTE that writes.
const WRITE_TO_ENDPOINT_SQL: &str = "\
WITH ev AS ( \
  INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at) \
  SELECT gen_random_uuid(), w.partner_id, $2, $3, $4::jsonb, $5 \
  FROM webhook_endpoints w WHERE w.partner_id = $1 AND w.id = $6 RETURNING id) \
INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, attempts, \
  next_attempt_at, created_at) \
SELECT $7, $6, $1, ev.id, $2, 'pending', 0, $5, $5 FROM ev";

/// Queues the endpoint's deliveries that failed since `$3` again, with a fresh budget, and says
/// in the same statement whether the endpoint is the partner's at all. Raw: a CTE that writes,
/// counted beside a read.
const RECOVER_SQL: &str = "\
WITH ep AS (SELECT id FROM webhook_endpoints WHERE partner_id = $1 AND id = $2), \
upd AS ( \
  UPDATE webhook_deliveries d SET status = 'pending', next_attempt_at = $4, \
    attempt_base = d.attempts, lease_token = NULL \
  FROM ep WHERE d.endpoint_id = ep.id AND d.status = 'failed' AND d.created_at >= $3 \
  RETURNING d.id) \
SELECT (SELECT count(*) FROM ep) AS found, (SELECT count(*) FROM upd) AS requeued";

/// Writes the events and their deliveries. Returns the number of deliveries written: after the
/// transaction commits, the caller tells the workers.
pub(crate) async fn write(
    conn: &mut AsyncPgConnection,
    events: &[DomainEvent],
    now: OffsetDateTime,
) -> Result<usize, diesel::result::Error> {
    let mut deliveries = 0;
    for e in events {
        let stored = e.event.to_stored();
        let n = match e.to {
            Recipients::Subscribers => {
                crate::Prepared(
                    diesel::sql_query(WRITE_SQL)
                        .bind::<Text, _>(e.partner_id.as_str())
                        .bind::<Text, _>(stored.kind.as_str())
                        .bind::<Text, _>(&stored.subject)
                        .bind::<Text, _>(stored.extra.to_string())
                        .bind::<Timestamptz, _>(now)
                        .bind::<diesel::sql_types::Bool, _>(stored.kind.honours_endpoint_delay()),
                )
                .execute(conn)
                .await?
            }
            Recipients::Endpoint { endpoint, delivery } => {
                diesel::sql_query(WRITE_TO_ENDPOINT_SQL)
                    .bind::<Text, _>(e.partner_id.as_str())
                    .bind::<Text, _>(stored.kind.as_str())
                    .bind::<Text, _>(&stored.subject)
                    .bind::<Text, _>(stored.extra.to_string())
                    .bind::<Timestamptz, _>(now)
                    .bind::<diesel::sql_types::Uuid, _>(endpoint.as_uuid())
                    .bind::<diesel::sql_types::Uuid, _>(delivery.as_uuid())
                    .execute(conn)
                    .await?
            }
        };
        deliveries += n;
    }
    Ok(deliveries)
}

/// Queues deliveries again (see `Outbox::requeue`). A fresh budget: the count since
/// `attempt_base` starts again. Clearing the lease fences off the outcome of an attempt in flight.
pub(crate) async fn requeue(
    conn: &mut AsyncPgConnection,
    partner: &PartnerId,
    which: Requeue,
    now: OffsetDateTime,
) -> Result<Option<u64>, diesel::result::Error> {
    match which {
        Requeue::Delivery(id) => {
            let n = diesel::update(webhook_deliveries::table)
                .filter(webhook_deliveries::partner_id.eq(partner.as_str()))
                .filter(webhook_deliveries::id.eq(id.as_uuid()))
                .set((
                    webhook_deliveries::status.eq(DeliveryStatus::Pending.as_str()),
                    webhook_deliveries::next_attempt_at.eq(now),
                    webhook_deliveries::attempt_base.eq(webhook_deliveries::attempts),
                    webhook_deliveries::lease_token.eq(None::<Uuid>),
                    webhook_deliveries::delivered_at.eq(None::<OffsetDateTime>),
                ))
                .execute(conn)
                .await?;
            Ok((n > 0).then(|| u64::try_from(n).unwrap_or(u64::MAX)))
        }
        Requeue::FailedSince { endpoint, since } => {
            let r: Recovered = diesel::sql_query(RECOVER_SQL)
                .bind::<Text, _>(partner.as_str())
                .bind::<diesel::sql_types::Uuid, _>(endpoint.as_uuid())
                .bind::<Timestamptz, _>(since)
                .bind::<Timestamptz, _>(now)
                .get_result(conn)
                .await?;
            Ok((r.found > 0).then(|| u64::try_from(r.requeued).unwrap_or(0)))
        }
    }
}

/// One of the partner's deliveries, as the transaction sees it.
pub(crate) async fn delivery(
    conn: &mut AsyncPgConnection,
    partner: &PartnerId,
    id: DeliveryId,
) -> Result<Option<DeliveryInfo>, RepoError> {
    let row: Option<DeliveryRow> = webhook_deliveries::table
        .filter(webhook_deliveries::partner_id.eq(partner.as_str()))
        .filter(webhook_deliveries::id.eq(id.as_uuid()))
        .select(DeliveryRow::as_select())
        .get_result(conn)
        .await
        .optional()
        .map_err(db)?;
    row.map(DeliveryRow::into_domain).transpose()
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
