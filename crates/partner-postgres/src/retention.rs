//! Retention of the delivery log and of the events (the worker's maintenance), as walks: each
//! step takes the next rows past the retention in index order after the previous step's mark,
//! so it costs what it deletes (issue 22). Deleting "the first `n` rows past the retention" in
//! every step instead re-walked, each time, what earlier steps had deleted (dead until vacuumed)
//! or kept (events that deliveries still refer to): about 1 s a statement on the realistic
//! dataset (`docs/performance.md`, "Retention").

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Integer, Nullable, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use partner_domain::webhook::ports::{PruneMark, PruneStep};
use time::OffsetDateTime;
use uuid::Uuid;

/// One step of the delivery log's walk: the next `$4` finished deliveries created before `$1`
/// after the mark (`$2`, `$3`), in the order of `webhook_deliveries_finished_idx` (created_at,
/// then id among equal times: only the few rows of the mark's own instant are read again).
/// `status <> 'pending'` is checked again on the row deleted: a delivery resent since the walk
/// read it is pending again and kept. Raw: CTEs that write.
const DELIVERIES_SQL: &str = "\
WITH walk AS MATERIALIZED ( \
  SELECT d.id, d.created_at FROM webhook_deliveries d \
  WHERE d.status <> 'pending' AND d.created_at < $1 \
    AND d.created_at >= $2 AND (d.created_at, d.id) > ($2, $3) \
  ORDER BY d.created_at, d.id LIMIT $4), \
gone AS ( \
  DELETE FROM webhook_deliveries d USING walk w \
  WHERE d.id = w.id AND d.status <> 'pending' RETURNING 1) \
SELECT (SELECT count(*) FROM gone)::int4 AS deleted, count(*)::int4 AS walked, \
  max(created_at) AS last_at, (array_agg(id ORDER BY created_at DESC, id DESC))[1] AS last_id \
FROM walk";

/// One step of the events' walk: the next `$4` events created before `$1` after the mark (`$2`,
/// `$3`) in the order of `domain_events_created_idx`; of those, the ones no delivery refers to
/// are deleted, and each partner's pruned position moves to the last feed position deleted
/// (never backwards). Raw: CTEs that write.
const EVENTS_SQL: &str = "\
WITH walk AS MATERIALIZED ( \
  SELECT e.id, e.created_at FROM domain_events e \
  WHERE e.created_at < $1 AND (e.created_at, e.id) > ($2, $3) \
  ORDER BY e.created_at, e.id LIMIT $4), \
gone AS ( \
  DELETE FROM domain_events e USING walk w \
  WHERE e.id = w.id \
    AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id) \
  RETURNING e.partner_id, e.kind, e.txid, e.seq), \
last AS ( \
  SELECT DISTINCT ON (partner_id) partner_id, txid, seq FROM gone WHERE kind <> 'ping' \
  ORDER BY partner_id, txid DESC, seq DESC), \
mark AS ( \
  INSERT INTO event_feed_pruned (partner_id, txid, seq) SELECT partner_id, txid, seq FROM last \
  ON CONFLICT (partner_id) DO UPDATE SET txid = EXCLUDED.txid, seq = EXCLUDED.seq \
  WHERE (EXCLUDED.txid, EXCLUDED.seq) > (event_feed_pruned.txid, event_feed_pruned.seq)) \
SELECT (SELECT count(*) FROM gone)::int4 AS deleted, count(*)::int4 AS walked, \
  max(created_at) AS last_at, (array_agg(id ORDER BY created_at DESC, id DESC))[1] AS last_id \
FROM walk";

#[derive(QueryableByName)]
struct StepRow {
    #[diesel(sql_type = Integer)]
    deleted: i32,
    #[diesel(sql_type = Integer)]
    walked: i32,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    last_at: Option<OffsetDateTime>,
    #[diesel(sql_type = Nullable<diesel::sql_types::Uuid>)]
    last_id: Option<Uuid>,
}

async fn step(
    conn: &mut AsyncPgConnection,
    sql: &'static str,
    before: OffsetDateTime,
    from: Option<PruneMark>,
    batch: u32,
) -> Result<PruneStep, diesel::result::Error> {
    // The start of a walk: before every row.
    let from = from.unwrap_or(PruneMark {
        created_at: time::macros::datetime!(0001-01-01 0:00 UTC),
        id: Uuid::nil(),
    });
    let r: StepRow = diesel::sql_query(sql)
        .bind::<Timestamptz, _>(before)
        .bind::<Timestamptz, _>(from.created_at)
        .bind::<diesel::sql_types::Uuid, _>(from.id)
        .bind::<BigInt, _>(i64::from(batch))
        .get_result(conn)
        .await?;
    let next = match (r.last_at, r.last_id) {
        (Some(created_at), Some(id)) if u32::try_from(r.walked).is_ok_and(|w| w >= batch) => {
            Some(PruneMark { created_at, id })
        }
        _ => None,
    };
    Ok(PruneStep {
        deleted: u64::try_from(r.deleted).unwrap_or(0),
        next,
    })
}

/// See [`DELIVERIES_SQL`].
pub(crate) async fn prune_deliveries(
    conn: &mut AsyncPgConnection,
    before: OffsetDateTime,
    from: Option<PruneMark>,
    batch: u32,
) -> Result<PruneStep, diesel::result::Error> {
    step(conn, DELIVERIES_SQL, before, from, batch).await
}

/// See [`EVENTS_SQL`].
pub(crate) async fn prune_events(
    conn: &mut AsyncPgConnection,
    before: OffsetDateTime,
    from: Option<PruneMark>,
    batch: u32,
) -> Result<PruneStep, diesel::result::Error> {
    step(conn, EVENTS_SQL, before, from, batch).await
}
