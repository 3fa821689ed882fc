//! The outbox, inside the caller's transaction: events with their deliveries, and deliveries
//! queued again. Every write that makes a delivery pending is here, so the workers are told of
//! them in one place, after the commit ([`crate::PgStore::deliveries_committed`]).

use diesel::prelude::*;
use diesel::sql_types::{Text, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use partner_domain::RepoError;
use partner_domain::events::{DomainEvent, Recipients, Requeue, Requeued};
use partner_domain::kernel::ids::DeliveryId;
use partner_domain::kernel::values::PartnerId;
use partner_domain::webhook::DeliveryInfo;
use time::OffsetDateTime;

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
  VALUES (uuid_v7(), $1, $2, $3, $4::jsonb, $5) RETURNING id) \
INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, attempts, \
  next_attempt_at, created_at) \
SELECT uuid_v7(), w.id, w.partner_id, ev.id, $2, 'pending', 0, \
  $5 + make_interval(secs => CASE WHEN $6 \
                             THEN COALESCE(w.lead_created_delay_seconds, 0) ELSE 0 END), $5 \
FROM webhook_endpoints w, ev WHERE w.partner_id = $1 AND $2 = ANY (w.events) AND w.disabled_at IS NULL";

/// An event for one endpoint (a ping): the event, written only when `$6` is the partner's
/// endpoint, and with it its one delivery `$7`, due at once. Raw: a CTE that writes.
const WRITE_TO_ENDPOINT_SQL: &str = "\
WITH ev AS ( \
  INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at) \
  SELECT uuid_v7(), w.partner_id, $2, $3, $4::jsonb, $5 \
  FROM webhook_endpoints w WHERE w.partner_id = $1 AND w.id = $6 RETURNING id) \
INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, attempts, \
  next_attempt_at, created_at) \
SELECT $7, $6, $1, ev.id, $2, 'pending', 0, $5, $5 FROM ev";

/// Queues at most `$5` of the endpoint's deliveries that failed since `$3` again, oldest first,
/// with a fresh budget, and says in the same statement whether the endpoint is the partner's at
/// all and how many more matched. Raw: a CTE that writes, counted beside reads (which see the rows
/// as they were before the update: `matched` counts the requeued ones too).
const RECOVER_SQL: &str = "\
WITH ep AS (SELECT id FROM webhook_endpoints WHERE partner_id = $1 AND id = $2), \
picked AS ( \
  SELECT d.id FROM webhook_deliveries d JOIN ep ON d.endpoint_id = ep.id \
  WHERE d.status = 'failed' AND d.created_at >= $3 \
  ORDER BY d.created_at, d.id LIMIT $5 FOR UPDATE OF d), \
upd AS ( \
  UPDATE webhook_deliveries d SET status = 'pending', next_attempt_at = $4, \
    attempt_base = d.attempts, lease_token = NULL \
  FROM picked WHERE d.id = picked.id \
  RETURNING d.id) \
SELECT (SELECT count(*) FROM ep) AS found, (SELECT count(*) FROM upd) AS requeued, \
  (SELECT count(*) FROM webhook_deliveries d JOIN ep ON d.endpoint_id = ep.id \
   WHERE d.status = 'failed' AND d.created_at >= $3) AS matched";

/// Queues one of the partner's deliveries again, unless its endpoint is disabled, and says in the
/// same statement whether the partner has that delivery at all. The endpoint is read under a share
/// lock, so a concurrent disabling (which ends its pending deliveries `failed`) waits for this
/// requeue. Raw: a CTE that writes, counted beside a read.
const RESEND_SQL: &str = "\
WITH dl AS ( \
  SELECT d.id, w.disabled_at IS NULL AS enabled \
  FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id \
  WHERE d.partner_id = $1 AND d.id = $2 FOR SHARE OF w), \
upd AS ( \
  UPDATE webhook_deliveries d SET status = 'pending', next_attempt_at = $3, \
    attempt_base = d.attempts, lease_token = NULL, delivered_at = NULL \
  FROM dl WHERE d.id = dl.id AND dl.enabled \
  RETURNING d.id) \
SELECT (SELECT count(*) FROM dl) AS found, (SELECT count(*) FROM upd) AS requeued, \
  (SELECT count(*) FROM upd) AS matched";

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
) -> Result<Option<Requeued>, diesel::result::Error> {
    let r: Recovered = match which {
        Requeue::Delivery(id) => {
            diesel::sql_query(RESEND_SQL)
                .bind::<Text, _>(partner.as_str())
                .bind::<diesel::sql_types::Uuid, _>(id.as_uuid())
                .bind::<Timestamptz, _>(now)
                .get_result(conn)
                .await?
        }
        Requeue::FailedSince {
            endpoint,
            since,
            limit,
        } => {
            diesel::sql_query(RECOVER_SQL)
                .bind::<Text, _>(partner.as_str())
                .bind::<diesel::sql_types::Uuid, _>(endpoint.as_uuid())
                .bind::<Timestamptz, _>(since)
                .bind::<Timestamptz, _>(now)
                .bind::<diesel::sql_types::BigInt, _>(i64::from(limit))
                .get_result(conn)
                .await?
        }
    };
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    Ok((r.found > 0).then(|| Requeued {
        requeued: count(r.requeued),
        remaining: count(r.matched - r.requeued),
    }))
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
