//! Webhook endpoints, the delivery log, and the workers' claim/record cycle.

use std::collections::HashMap;
use std::time::Duration;

use diesel::pg::Pg;
use diesel::prelude::*;
use diesel::sql_types::{Array, Bool, Integer, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use partner_domain::RepoError;
use partner_domain::account::auth::{Sealed, TokenKey};
use partner_domain::kernel::ids::{DeliveryId, EndpointId, LeadId, PayoutId};
use partner_domain::kernel::values::PartnerId;
use partner_domain::webhook::ports::{DeliveryRepo, InsertEndpoint, WebhookRepo};
use partner_domain::webhook::{
    AttemptOutcome, Attempted, ClaimBatch, ClaimRequest, DeliveryDetail, DeliveryFilter,
    DeliveryInfo, DeliveryStatus, ENDPOINT_DISABLED, EndpointHealth, HealthChange, NextStep,
    SubjectIds, Subjects, WebhookEndpoint,
};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::dsl::{RowLt, fixed};
use crate::models::webhook_attempts::AttemptRow;
use crate::models::webhook_deliveries::{ClaimRow, DeliveryRow};
use crate::models::webhook_endpoints::{EndpointRow, NewEndpoint};
use crate::schema::{
    domain_events, partners, webhook_deliveries, webhook_endpoint_queue, webhook_endpoints,
};
use crate::schema_extra::webhook_attempts;
use crate::tokens::{self, TokenPartner};
use crate::{PgStore, db};

// The statements below stay raw because the DSL cannot write them: the claim (a `LATERAL` join
// with `FOR UPDATE SKIP LOCKED`, feeding an `UPDATE` in a CTE) and the batch write over `unnest`
// arrays (`RECORD_SQL`: one statement per batch whatever its size, with CTEs that write).
// The outbox's statements are in `outbox.rs`; `LISTEN`/`NOTIFY` in `notify.rs`.

/// `status = 'pending'`, the predicate of the partial indexes `webhook_deliveries_endpoint_due_idx`
/// (and, negated in `prune`, of `webhook_deliveries_finished_idx`): a literal, so a prepared
/// statement's generic plan can use them.
const PENDING: &str = "webhook_deliveries.status = 'pending'";

/// The endpoints a claim visits: those whose marker in `webhook_endpoint_queue` is due at `$1`
/// (read from `webhook_endpoint_queue_due_idx`, so the cost grows with the endpoints that may have
/// due work, not with all endpoints), enabled, with room (`$4`, or the room listed in `$2`/`$3`),
/// in random order so that no endpoint is always served first, at most `$5` of them. Raw: the
/// DSL cannot order by `random()` beside a join with `unnest`.
const PICK_SQL: &str = "\
WITH busy AS ( \
  SELECT * FROM unnest($2::uuid[], $3::int4[]) AS b(endpoint_id, room)) \
SELECT q.endpoint_id AS id, COALESCE(b.room, $4) AS room \
FROM webhook_endpoint_queue q JOIN webhook_endpoints e ON e.id = q.endpoint_id \
  LEFT JOIN busy b ON b.endpoint_id = q.endpoint_id \
WHERE q.due_at <= $1 AND COALESCE(b.room, $4) > 0 AND e.disabled_at IS NULL \
ORDER BY random() LIMIT $5";

/// The workers' claim, in one statement (raw: the DSL cannot express a LATERAL join with a
/// locking clause, nor an `UPDATE` in a CTE). `ep`: the endpoints [`PICK_SQL`] chose, in its
/// order, with their room (`$3`/`$4`), still enabled; `picked`: each endpoint's oldest due rows,
/// at most its room, skipping rows another worker holds, at most `$6` in all; `claimed`: counts
/// the attempt, leases the row until `$2` under a fresh fencing token. The budget (`$5`) counts
/// attempts since the last resend or recover (`attempts - attempt_base`), and so does the
/// attempt number returned. Then what sending needs, from the event and the endpoint.
const CLAIM_SQL: &str = "\
WITH ep AS MATERIALIZED ( \
  SELECT u.id, u.room FROM unnest($3::uuid[], $4::int4[]) WITH ORDINALITY AS u(id, room, ord) \
  JOIN webhook_endpoints e ON e.id = u.id \
  WHERE e.disabled_at IS NULL \
  ORDER BY u.ord), \
picked AS ( \
  SELECT p.id FROM ep CROSS JOIN LATERAL ( \
    SELECT d.id FROM webhook_deliveries d \
    WHERE d.endpoint_id = ep.id AND d.status = 'pending' AND d.next_attempt_at <= $1 AND d.attempts - d.attempt_base < $5 \
    ORDER BY d.next_attempt_at LIMIT ep.room \
    FOR UPDATE SKIP LOCKED) p \
  LIMIT $6), \
claimed AS ( \
  UPDATE webhook_deliveries d \
  SET attempts = d.attempts + 1, next_attempt_at = $2, lease_token = gen_random_uuid() \
  FROM picked WHERE d.id = picked.id \
  RETURNING d.id, d.endpoint_id, d.lease_token, d.attempts - d.attempt_base AS attempts, d.kind, d.event_id) \
SELECT c.id, c.endpoint_id, c.lease_token, c.attempts, c.kind, ev.created_at AS event_created_at, \
  ev.subject, ev.extra::text AS extra, w.url, w.secret, \
  CASE WHEN w.previous_secret_expires_at > $1 THEN w.previous_secret END AS previous_secret, \
  COALESCE(w.previous_secret_expires_at <= $1, false) AS previous_expired, \
  w.custom_header_name, w.custom_header_value \
FROM claimed c JOIN domain_events ev ON ev.id = c.event_id JOIN webhook_endpoints w ON w.id = c.endpoint_id";

/// Moves the markers of the endpoints `$1` (locked by the caller's transaction, in an earlier
/// statement, so this one's snapshot sees every delivery committed by a writer that held the
/// marker) to their earliest pending delivery, due or leased, and removes those with none. (Under
/// that lock a marker may move either way: one found later than a pending delivery heals.)
const ADVANCE_SQL: &str = "\
WITH n AS ( \
  SELECT q.endpoint_id, (SELECT min(d.next_attempt_at) FROM webhook_deliveries d \
    WHERE d.endpoint_id = q.endpoint_id AND d.status = 'pending') AS due \
  FROM webhook_endpoint_queue q WHERE q.endpoint_id = ANY($1::uuid[])), \
gone AS ( \
  DELETE FROM webhook_endpoint_queue q USING n WHERE q.endpoint_id = n.endpoint_id AND n.due IS NULL) \
UPDATE webhook_endpoint_queue q SET due_at = n.due FROM n \
WHERE q.endpoint_id = n.endpoint_id AND n.due <> q.due_at";

/// An endpoint [`PICK_SQL`] chose, with its room.
#[derive(QueryableByName)]
struct Picked {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    id: Uuid,
    #[diesel(sql_type = Integer)]
    room: i32,
}

/// Raises or removes the markers of `endpoints` that are stale (nothing pending, or nothing
/// pending before a later time), in a transaction of its own: the markers are locked first
/// (`FOR UPDATE SKIP LOCKED`: one a writer holds until its commit is skipped and stays as it is,
/// early, which is safe), then [`ADVANCE_SQL`] reads the deliveries with a snapshot taken after
/// the locks, so it cannot miss a delivery whose writer marked the endpoint before.
async fn advance(conn: &mut AsyncPgConnection, endpoints: &[Uuid]) -> QueryResult<()> {
    if endpoints.is_empty() {
        return Ok(());
    }
    conn.transaction(async |conn| {
        let locked: Vec<Uuid> = webhook_endpoint_queue::table
            .filter(webhook_endpoint_queue::endpoint_id.eq_any(endpoints))
            .select(webhook_endpoint_queue::endpoint_id)
            .for_update()
            .skip_locked()
            .load(conn)
            .await?;
        if !locked.is_empty() {
            diesel::sql_query(ADVANCE_SQL)
                .bind::<Array<diesel::sql_types::Uuid>, _>(&locked)
                .execute(conn)
                .await?;
        }
        Ok(())
    })
    .await
}

/// Outcomes of a batch in one statement, fenced by the lease token: a row reclaimed by another
/// worker after this one's lease ran out (new token) or already finished is left alone. The
/// `ANY($1)` restates the join so the primary key is used whatever the planner guesses of
/// `unnest`. Each applied outcome also goes into the attempt log (`webhook_attempts`), stamped
/// with the time the request started.
const RECORD_SQL: &str = "\
WITH u AS ( \
  SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::timestamptz[], $5::timestamptz[], $6::int4[], \
    $7::text[], $8::int4[]) AS u(id, lease, next, at, retry_at, status_code, error, duration_ms)), \
done AS ( \
  UPDATE webhook_deliveries d SET \
    status = CASE u.next WHEN 'delivered' THEN 'delivered' WHEN 'retry' THEN 'pending' ELSE 'failed' END, \
    delivered_at = CASE WHEN u.next = 'delivered' THEN u.at END, \
    next_attempt_at = CASE WHEN u.next = 'retry' THEN u.retry_at END, \
    last_attempt_at = u.at - make_interval(secs => COALESCE(u.duration_ms, 0) / 1000.0::float8), \
    last_status_code = u.status_code, last_error = u.error, lease_token = NULL \
  FROM u \
  WHERE d.id = ANY($1::uuid[]) AND d.id = u.id AND d.lease_token = u.lease AND d.status = 'pending' \
  RETURNING d.id, d.last_attempt_at, u.status_code, u.duration_ms, u.error) \
INSERT INTO webhook_attempts (delivery_id, attempted_at, status_code, duration_ms, error) \
SELECT id, last_attempt_at, status_code, duration_ms, error FROM done";

/// Ends the pending deliveries of the `disabled` endpoints as `failed` with `error`. Clearing the
/// lease fences off the outcome of an attempt in flight.
pub(crate) async fn fail_disabled(
    conn: &mut AsyncPgConnection,
    disabled: &[Uuid],
    error: &str,
) -> QueryResult<usize> {
    let n = diesel::update(webhook_deliveries::table)
        .filter(webhook_deliveries::endpoint_id.eq_any(disabled))
        .filter(fixed::<Bool>(PENDING))
        .set((
            webhook_deliveries::status.eq(DeliveryStatus::Failed.as_str()),
            webhook_deliveries::next_attempt_at.eq(None::<OffsetDateTime>),
            webhook_deliveries::lease_token.eq(None::<Uuid>),
            webhook_deliveries::last_error.eq(error),
        ))
        .execute(conn)
        .await?;
    // Their markers go too: the claim never visits a disabled endpoint to clear them.
    advance(conn, disabled).await?;
    Ok(n)
}

/// The endpoints of a claim whose markers may be stale: those it visited that gave fewer rows
/// than their room (they may have nothing due left). When the batch filled, the endpoints after
/// the last one that gave a row were not visited.
fn stale(picked: &[Picked], rows: &[ClaimRow], limit: u32) -> Vec<Uuid> {
    let mut got: HashMap<Uuid, i32> = HashMap::new();
    for r in rows {
        *got.entry(r.unreadable().endpoint_id.as_uuid()).or_default() += 1;
    }
    let visited = if rows.len() >= usize::try_from(limit).unwrap_or(usize::MAX) {
        picked
            .iter()
            .rposition(|p| got.contains_key(&p.id))
            .map_or(0, |i| i + 1)
    } else {
        picked.len()
    };
    picked
        .iter()
        .take(visited)
        .filter(|p| got.get(&p.id).copied().unwrap_or(0) < p.room)
        .map(|p| p.id)
        .collect()
}

/// How often an endpoint's health is read again when another worker changed it between this
/// worker's read and its write.
const HEALTH_TRIES: usize = 3;

/// Applies the domain's health rule ([`EndpointHealth::after`]) to the endpoints of a batch's
/// attempts (`attempted`: delivery id and attempt): reads each endpoint's health, asks the rule,
/// and writes what it answers only over the health it read (compare-and-set, read again when
/// another worker changed it meanwhile). One read per batch; a write only when the health
/// changes. Returns the endpoints left disabled, whose pending deliveries end `failed`.
async fn judge_health(
    conn: &mut AsyncPgConnection,
    attempted: &[(Uuid, Attempted)],
    disable_after: Option<Duration>,
) -> Result<Vec<Uuid>, RepoError> {
    let ids: Vec<Uuid> = attempted.iter().map(|(id, _)| *id).collect();
    let rows: Vec<(Uuid, Uuid, Option<OffsetDateTime>, bool)> = webhook_deliveries::table
        .inner_join(webhook_endpoints::table)
        .filter(webhook_deliveries::id.eq_any(&ids))
        .select((
            webhook_deliveries::id,
            webhook_endpoints::id,
            webhook_endpoints::failing_since,
            webhook_endpoints::disabled_at.is_not_null(),
        ))
        .load(conn)
        .await
        .map_err(db)?;
    // Per endpoint: its health as read, and the batch's attempts at it.
    let mut endpoints: HashMap<Uuid, (EndpointHealth, Vec<Attempted>)> = HashMap::new();
    for (delivery, endpoint, failing_since, disabled) in rows {
        let health = EndpointHealth {
            failing_since,
            disabled,
        };
        let entry = endpoints
            .entry(endpoint)
            .or_insert_with(|| (health, Vec::new()));
        entry.1.extend(
            attempted
                .iter()
                .filter(|(id, _)| *id == delivery)
                .map(|(_, a)| *a),
        );
    }
    let mut disabled = Vec::new();
    for (endpoint, (mut health, attempts)) in endpoints {
        for _ in 0..HEALTH_TRIES {
            let Some(change) = health.after(&attempts, disable_after) else {
                break;
            };
            if write_health(conn, endpoint, health, change).await? {
                if change.disabled {
                    disabled.push(endpoint);
                }
                break;
            }
            // Changed by another worker since it was read (or deleted): judge it again.
            let now: Option<(Option<OffsetDateTime>, bool)> = webhook_endpoints::table
                .find(endpoint)
                .select((
                    webhook_endpoints::failing_since,
                    webhook_endpoints::disabled_at.is_not_null(),
                ))
                .get_result(conn)
                .await
                .optional()
                .map_err(db)?;
            let Some((failing_since, is_disabled)) = now else {
                break;
            };
            health = EndpointHealth {
                failing_since,
                disabled: is_disabled,
            };
        }
    }
    Ok(disabled)
}

/// Writes `change` over the endpoint's health `before`, only while the row still holds it.
async fn write_health(
    conn: &mut AsyncPgConnection,
    endpoint: Uuid,
    before: EndpointHealth,
    change: HealthChange,
) -> Result<bool, RepoError> {
    let (disabled_at, reason) = change.disable.unzip();
    let n = diesel::update(webhook_endpoints::table)
        .filter(webhook_endpoints::id.eq(endpoint))
        .filter(webhook_endpoints::failing_since.is_not_distinct_from(before.failing_since))
        .filter(
            webhook_endpoints::disabled_at
                .is_not_null()
                .eq(before.disabled),
        )
        .set((
            webhook_endpoints::failing_since.eq(change.failing_since),
            disabled_at.map(|at| webhook_endpoints::disabled_at.eq(at)),
            reason.map(|r| webhook_endpoints::disabled_reason.eq(r.as_str())),
        ))
        .execute(conn)
        .await
        .map_err(db)?;
    Ok(n == 1)
}

/// A partner's deliveries as [`WebhookRepo::deliveries`] lists them: `found` (the partner's
/// rows) cut by each filter given (one prepared statement per combination), newest first in the
/// order of `webhook_deliveries_partner_idx`. Both the partner-keyed and the token-keyed read
/// call it; they differ only in how `found` names the partner.
async fn delivery_listing(
    mut conn: &AsyncPgConnection,
    mut found: webhook_deliveries::BoxedQuery<'_, Pg>,
    filter: &DeliveryFilter,
) -> Result<Vec<DeliveryInfo>, RepoError> {
    if let Some(endpoint) = filter.endpoint_id {
        found = found.filter(webhook_deliveries::endpoint_id.eq(endpoint.as_uuid()));
    }
    if !filter.statuses.is_empty() {
        found = found
            .filter(webhook_deliveries::status.eq_any(filter.statuses.iter().map(|s| s.as_str())));
    }
    if let Some(kind) = filter.event {
        found = found.filter(webhook_deliveries::kind.eq(kind.as_str()));
    }
    if let Some(p) = filter.after {
        found = found.filter(RowLt(
            (webhook_deliveries::created_at, webhook_deliveries::id),
            (
                p.created_at.into_sql::<Timestamptz>(),
                p.id.into_sql::<diesel::sql_types::Uuid>(),
            ),
        ));
    }
    let rows: Vec<DeliveryRow> = found
        .order((
            webhook_deliveries::created_at.desc(),
            webhook_deliveries::id.desc(),
        ))
        .limit(i64::from(filter.limit))
        .select(DeliveryRow::as_select())
        .load(&mut conn)
        .await
        .map_err(db)?;
    rows.into_iter().map(DeliveryRow::into_domain).collect()
}

/// The reads of a partner's webhook endpoints and deliveries for a token: the statements of
/// their `WebhookRepo` siblings with the partner taken from the token in SQL, to be pipelined
/// with the token lookup.
mod for_token {
    use super::*;

    pub(super) async fn endpoints(
        mut conn: &AsyncPgConnection,
        partner: &TokenPartner,
    ) -> Result<Vec<WebhookEndpoint>, RepoError> {
        let rows: Vec<EndpointRow> = webhook_endpoints::table
            .filter(webhook_endpoints::partner_id.eq(partner.clone()))
            .order((webhook_endpoints::created_at, webhook_endpoints::id))
            .select(EndpointRow::as_select())
            .load(&mut conn)
            .await
            .map_err(db)?;
        rows.into_iter().map(EndpointRow::into_domain).collect()
    }

    pub(super) async fn deliveries(
        conn: &AsyncPgConnection,
        partner: &TokenPartner,
        filter: &DeliveryFilter,
    ) -> Result<Vec<DeliveryInfo>, RepoError> {
        delivery_listing(
            conn,
            webhook_deliveries::table
                .filter(webhook_deliveries::partner_id.eq(partner.clone()))
                .into_boxed(),
            filter,
        )
        .await
    }

    /// The delivery and its attempt log: two statements, both pipelined with the token lookup;
    /// the log's reads only a delivery of the token's partner.
    pub(super) async fn delivery(
        mut conn: &AsyncPgConnection,
        partner: &TokenPartner,
        id: DeliveryId,
        log_limit: u16,
    ) -> Result<Option<DeliveryDetail>, RepoError> {
        let id = id.as_uuid();
        let row = webhook_deliveries::table
            .filter(webhook_deliveries::partner_id.eq(partner.clone()))
            .filter(webhook_deliveries::id.eq(id))
            .select(DeliveryRow::as_select())
            .load::<DeliveryRow>(&mut conn);
        // The latest `log_limit` attempts (shown oldest first), of a delivery of the partner.
        let attempts = webhook_attempts::table
            .filter(webhook_attempts::delivery_id.eq(id))
            .filter(diesel::dsl::exists(
                webhook_deliveries::table
                    .filter(webhook_deliveries::id.eq(id))
                    .filter(webhook_deliveries::partner_id.eq(partner.clone())),
            ))
            .order(webhook_attempts::attempted_at.desc())
            .limit(i64::from(log_limit))
            .select(AttemptRow::as_select())
            .load::<AttemptRow>(&mut conn);
        let (row, mut attempts) = futures_util::future::try_join(row, attempts)
            .await
            .map_err(db)?;
        attempts.reverse();
        // At most one row: the id is the primary key.
        row.into_iter()
            .next()
            .map(|row| {
                Ok(DeliveryDetail {
                    delivery: row.into_domain()?,
                    attempt_log: attempts.into_iter().map(AttemptRow::into_domain).collect(),
                })
            })
            .transpose()
    }
}

#[async_trait::async_trait]
impl WebhookRepo for PgStore {
    async fn endpoints_for_token(
        &self,
        key: TokenKey,
    ) -> Result<Sealed<Vec<WebhookEndpoint>>, RepoError> {
        let conn = self.conn().await?;
        let (token, endpoints) = futures_util::future::try_join(
            tokens::lookup(&conn, &key.hash),
            for_token::endpoints(&conn, &TokenPartner::of(key)),
        )
        .await?;
        Ok(Sealed::new(token, endpoints))
    }

    async fn deliveries_for_token(
        &self,
        key: TokenKey,
        filter: &DeliveryFilter,
    ) -> Result<Sealed<Vec<DeliveryInfo>>, RepoError> {
        let conn = self.conn().await?;
        let (token, deliveries) = futures_util::future::try_join(
            tokens::lookup(&conn, &key.hash),
            for_token::deliveries(&conn, &TokenPartner::of(key), filter),
        )
        .await?;
        Ok(Sealed::new(token, deliveries))
    }

    async fn delivery_for_token(
        &self,
        key: TokenKey,
        id: DeliveryId,
        log_limit: u16,
    ) -> Result<Sealed<Option<DeliveryDetail>>, RepoError> {
        let conn = self.conn().await?;
        let (token, detail) = futures_util::future::try_join(
            tokens::lookup(&conn, &key.hash),
            for_token::delivery(&conn, &TokenPartner::of(key), id, log_limit),
        )
        .await?;
        Ok(Sealed::new(token, detail))
    }

    async fn endpoints(&self, partner: &PartnerId) -> Result<Vec<WebhookEndpoint>, RepoError> {
        let mut conn = self.conn().await?;
        let rows: Vec<EndpointRow> = webhook_endpoints::table
            .filter(webhook_endpoints::partner_id.eq(partner.as_str()))
            .order((webhook_endpoints::created_at, webhook_endpoints::id))
            .select(EndpointRow::as_select())
            .load(&mut conn)
            .await
            .map_err(db)?;
        rows.into_iter().map(EndpointRow::into_domain).collect()
    }

    async fn endpoint(
        &self,
        partner: &PartnerId,
        id: EndpointId,
    ) -> Result<Option<WebhookEndpoint>, RepoError> {
        let id = id.as_uuid();
        let mut conn = self.conn().await?;
        let row: Option<EndpointRow> = webhook_endpoints::table
            .filter(webhook_endpoints::partner_id.eq(partner.as_str()))
            .filter(webhook_endpoints::id.eq(id))
            .select(EndpointRow::as_select())
            .get_result(&mut conn)
            .await
            .optional()
            .map_err(db)?;
        row.map(EndpointRow::into_domain).transpose()
    }

    async fn insert_endpoint(
        &self,
        e: &WebhookEndpoint,
        max: usize,
    ) -> Result<InsertEndpoint, RepoError> {
        let mut conn = self.conn().await?;
        let e = e.clone();
        let max = i64::try_from(max).unwrap_or(i64::MAX);
        conn.transaction(async |conn| {
            // The partner row's lock serialises concurrent creates, so the limit holds.
            let locked: Option<String> = partners::table
                .find(e.partner_id().as_str())
                .select(partners::partner_id)
                .for_update()
                .get_result(conn)
                .await
                .optional()?;
            if locked.is_none() {
                return Ok(InsertEndpoint::UnknownPartner);
            }
            let count: i64 = webhook_endpoints::table
                .filter(webhook_endpoints::partner_id.eq(e.partner_id().as_str()))
                .count()
                .get_result(conn)
                .await?;
            if count >= max {
                return Ok(InsertEndpoint::TooMany);
            }
            diesel::insert_into(webhook_endpoints::table)
                .values(NewEndpoint::new(&e))
                .execute(conn)
                .await?;
            Ok::<_, diesel::result::Error>(InsertEndpoint::Inserted)
        })
        .await
        .map_err(db)
    }

    async fn delete_endpoint(
        &self,
        partner: &PartnerId,
        id: EndpointId,
    ) -> Result<bool, RepoError> {
        let id = id.as_uuid();
        let mut conn = self.conn().await?;
        let n = diesel::delete(webhook_endpoints::table)
            .filter(webhook_endpoints::partner_id.eq(partner.as_str()))
            .filter(webhook_endpoints::id.eq(id))
            .execute(&mut conn)
            .await
            .map_err(db)?;
        Ok(n == 1)
    }

    async fn deliveries(
        &self,
        partner: &PartnerId,
        filter: &DeliveryFilter,
    ) -> Result<Vec<DeliveryInfo>, RepoError> {
        let conn = self.conn().await?;
        delivery_listing(
            &conn,
            webhook_deliveries::table
                .filter(webhook_deliveries::partner_id.eq(partner.as_str()))
                .into_boxed(),
            filter,
        )
        .await
    }

    async fn delivery(
        &self,
        partner: &PartnerId,
        id: DeliveryId,
        log_limit: u16,
    ) -> Result<Option<DeliveryDetail>, RepoError> {
        let id = id.as_uuid();
        let mut conn = self.conn().await?;
        let row: Option<DeliveryRow> = webhook_deliveries::table
            .filter(webhook_deliveries::partner_id.eq(partner.as_str()))
            .filter(webhook_deliveries::id.eq(id))
            .select(DeliveryRow::as_select())
            .get_result(&mut conn)
            .await
            .optional()
            .map_err(db)?;
        let Some(row) = row else {
            return Ok(None);
        };
        // The latest `log_limit` attempts, shown oldest first.
        let mut attempts: Vec<AttemptRow> = webhook_attempts::table
            .filter(webhook_attempts::delivery_id.eq(id))
            .order(webhook_attempts::attempted_at.desc())
            .limit(i64::from(log_limit))
            .select(AttemptRow::as_select())
            .load(&mut conn)
            .await
            .map_err(db)?;
        attempts.reverse();
        Ok(Some(DeliveryDetail {
            delivery: row.into_domain()?,
            attempt_log: attempts.into_iter().map(AttemptRow::into_domain).collect(),
        }))
    }
}

#[async_trait::async_trait]
impl DeliveryRepo for PgStore {
    async fn claim(&self, req: &ClaimRequest) -> Result<ClaimBatch, RepoError> {
        let mut conn = self.conn().await?;
        let clamp = |n: u32| i32::try_from(n).unwrap_or(i32::MAX);
        let (busy_ids, busy_room): (Vec<Uuid>, Vec<i32>) = req
            .room
            .iter()
            .map(|(id, n)| (id.as_uuid(), clamp(*n)))
            .unzip();
        let picked: Vec<Picked> = diesel::sql_query(PICK_SQL)
            .bind::<Timestamptz, _>(req.now)
            .bind::<Array<diesel::sql_types::Uuid>, _>(&busy_ids)
            .bind::<Array<Integer>, _>(&busy_room)
            .bind::<Integer, _>(clamp(req.per_endpoint))
            .bind::<diesel::sql_types::BigInt, _>(i64::from(req.limit))
            .load(&mut conn)
            .await
            .map_err(db)?;
        if picked.is_empty() {
            return Ok(ClaimBatch::default());
        }
        let (ep_ids, ep_room): (Vec<Uuid>, Vec<i32>) =
            picked.iter().map(|p| (p.id, p.room)).unzip();
        let rows: Vec<ClaimRow> = diesel::sql_query(CLAIM_SQL)
            .bind::<Timestamptz, _>(req.now)
            .bind::<Timestamptz, _>(req.lease_until)
            .bind::<Array<diesel::sql_types::Uuid>, _>(&ep_ids)
            .bind::<Array<Integer>, _>(&ep_room)
            .bind::<Integer, _>(clamp(req.max_attempts))
            .bind::<diesel::sql_types::BigInt, _>(i64::from(req.limit))
            .load(&mut conn)
            .await
            .map_err(db)?;
        advance(&mut conn, &stale(&picked, &rows, req.limit))
            .await
            .map_err(db)?;
        // An expired previous secret signs nothing more: erased at the first delivery after its
        // expiry (its own statement, after the claim's locks are released).
        let mut expired: Vec<Uuid> = rows
            .iter()
            .filter(|r| r.previous_expired())
            .map(|r| r.unreadable().endpoint_id.as_uuid())
            .collect();
        if !expired.is_empty() {
            expired.sort_unstable();
            expired.dedup();
            diesel::update(webhook_endpoints::table)
                .filter(webhook_endpoints::id.eq_any(&expired))
                .filter(webhook_endpoints::previous_secret_expires_at.le(req.now))
                .set((
                    webhook_endpoints::previous_secret.eq(None::<String>),
                    webhook_endpoints::previous_secret_expires_at.eq(None::<OffsetDateTime>),
                ))
                .execute(&mut conn)
                .await
                .map_err(db)?;
        }
        // Each row is read on its own: one that cannot be read fails alone.
        let mut batch = ClaimBatch::default();
        for row in rows {
            let unreadable = row.unreadable();
            match row.into_domain() {
                Ok(d) => batch.ready.push(d),
                Err(e) => {
                    tracing::warn!(delivery = %unreadable.id, error = %e, "a claimed webhook delivery cannot be read");
                    batch.unreadable.push(unreadable);
                }
            }
        }
        Ok(batch)
    }

    async fn subjects(&self, wanted: &SubjectIds) -> Result<Subjects, RepoError> {
        // Every kind of record an event can be about; a new one does not compile until it is
        // read here.
        let SubjectIds {
            leads,
            orders,
            payouts,
        } = wanted;
        let mut conn = self.conn().await?;
        let mut unreadable = SubjectIds::default();
        let leads: HashMap<LeadId, _> = if leads.is_empty() {
            HashMap::new()
        } else {
            let ids: Vec<Uuid> = leads.iter().map(|l| l.as_uuid()).collect();
            let (found, bad) = crate::leads::leads_by_ids(&mut conn, &ids).await?;
            unreadable.leads = bad.into_iter().map(LeadId::from_uuid).collect();
            found.into_iter().map(|l| (l.id(), l)).collect()
        };
        let orders: HashMap<String, _> = if orders.is_empty() {
            HashMap::new()
        } else {
            let ids: Vec<&str> = orders.iter().map(String::as_str).collect();
            let (found, bad) = crate::orders::orders_by_ids(&mut conn, &ids).await?;
            unreadable.orders = bad;
            found
                .into_iter()
                .map(|o| (o.order.order_id().to_owned(), o))
                .collect()
        };
        let payouts: HashMap<PayoutId, _> = if payouts.is_empty() {
            HashMap::new()
        } else {
            let ids: Vec<Uuid> = payouts.iter().map(|p| p.as_uuid()).collect();
            let (found, bad) = crate::payouts::payouts_by_ids(&mut conn, &ids).await?;
            unreadable.payouts = bad.into_iter().map(PayoutId::from_uuid).collect();
            found.into_iter().map(|p| (p.id(), p)).collect()
        };
        Ok(Subjects {
            leads,
            orders,
            payouts,
            unreadable,
        })
    }

    async fn record(
        &self,
        outcomes: &[AttemptOutcome],
        disable_after: Option<std::time::Duration>,
    ) -> Result<u64, RepoError> {
        if outcomes.is_empty() {
            return Ok(0);
        }
        let mut conn = self.conn().await?;
        let n = outcomes.len();
        let mut durations = Vec::with_capacity(n);
        let (mut ids, mut leases, mut next, mut at, mut retry_at, mut codes, mut errors) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        for o in outcomes {
            ids.push(o.id.as_uuid());
            leases.push(o.lease);
            let (step, when) = match o.next {
                NextStep::Delivered => ("delivered", None),
                NextStep::RetryAt(t) => ("retry", Some(t)),
                NextStep::GiveUp => ("failed", None),
            };
            next.push(step);
            at.push(o.at);
            retry_at.push(when);
            codes.push(o.status_code.map(i32::from));
            durations.push(o.duration_ms.map(|d| i32::try_from(d).unwrap_or(i32::MAX)));
            errors.push(o.error.as_deref().map(|e| {
                e.chars()
                    .filter(|c| !c.is_control())
                    .take(200)
                    .collect::<String>()
            }));
        }
        let applied = diesel::sql_query(RECORD_SQL)
            .bind::<Array<diesel::sql_types::Uuid>, _>(&ids)
            .bind::<Array<diesel::sql_types::Uuid>, _>(&leases)
            .bind::<Array<Text>, _>(&next)
            .bind::<Array<Timestamptz>, _>(&at)
            .bind::<Array<Nullable<Timestamptz>>, _>(&retry_at)
            .bind::<Array<Nullable<Integer>>, _>(&codes)
            .bind::<Array<Nullable<Text>>, _>(&errors)
            .bind::<Array<Nullable<Integer>>, _>(&durations)
            .execute(&mut conn)
            .await
            .map_err(db)?;
        let attempted: Vec<(Uuid, Attempted)> = outcomes
            .iter()
            .filter_map(|o| Attempted::of(o).map(|a| (o.id.as_uuid(), a)))
            .collect();
        if !attempted.is_empty() {
            let disabled = judge_health(&mut conn, &attempted, disable_after).await?;
            if !disabled.is_empty() {
                fail_disabled(&mut conn, &disabled, ENDPOINT_DISABLED)
                    .await
                    .map_err(db)?;
            }
        }
        Ok(u64::try_from(applied).unwrap_or(0))
    }

    async fn fail_exhausted(
        &self,
        now: OffsetDateTime,
        max_attempts: u32,
        error: &str,
    ) -> Result<u64, RepoError> {
        let mut conn = self.conn().await?;
        let n = diesel::update(webhook_deliveries::table)
            .filter(fixed::<Bool>(PENDING))
            .filter(webhook_deliveries::next_attempt_at.le(now))
            .filter(
                (webhook_deliveries::attempts - webhook_deliveries::attempt_base)
                    .ge(i32::try_from(max_attempts).unwrap_or(i32::MAX)),
            )
            .set((
                webhook_deliveries::status.eq(DeliveryStatus::Failed.as_str()),
                webhook_deliveries::next_attempt_at.eq(None::<OffsetDateTime>),
                webhook_deliveries::lease_token.eq(None::<Uuid>),
                webhook_deliveries::last_status_code.eq(None::<i32>),
                webhook_deliveries::last_error.eq(error),
            ))
            .execute(&mut conn)
            .await
            .map_err(db)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn fail_disabled(&self, error: &str) -> Result<u64, RepoError> {
        let mut conn = self.conn().await?;
        let disabled = webhook_endpoints::table
            .filter(webhook_endpoints::disabled_at.is_not_null())
            .select(webhook_endpoints::id);
        let n = diesel::update(webhook_deliveries::table)
            .filter(fixed::<Bool>(PENDING))
            .filter(webhook_deliveries::endpoint_id.eq_any(disabled))
            .set((
                webhook_deliveries::status.eq(DeliveryStatus::Failed.as_str()),
                webhook_deliveries::next_attempt_at.eq(None::<OffsetDateTime>),
                webhook_deliveries::lease_token.eq(None::<Uuid>),
                webhook_deliveries::last_error.eq(error),
            ))
            .execute(&mut conn)
            .await
            .map_err(db)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn prune(&self, before: OffsetDateTime, batch: u32) -> Result<u64, RepoError> {
        let mut conn = self.conn().await?;
        let batch = i64::from(batch);
        // Small batches, each its own statement, so pruning never holds many locks for long.
        let d = diesel::alias!(webhook_deliveries as d);
        let finished = d
            .filter(fixed::<Bool>("d.status <> 'pending'"))
            .filter(d.field(webhook_deliveries::created_at).lt(before))
            .select(d.field(webhook_deliveries::id))
            .limit(batch);
        let deliveries = diesel::delete(webhook_deliveries::table)
            .filter(webhook_deliveries::id.eq_any(finished))
            .execute(&mut conn)
            .await
            .map_err(db)?;
        // Events no delivery refers to (an anti-join, as `NOT EXISTS` would plan).
        let e = diesel::alias!(domain_events as e);
        let unreferenced = e
            .left_join(
                webhook_deliveries::table
                    .on(webhook_deliveries::event_id.eq(e.field(domain_events::id))),
            )
            .filter(e.field(domain_events::created_at).lt(before))
            .filter(webhook_deliveries::id.is_null())
            .select(e.field(domain_events::id))
            .limit(batch);
        let events = diesel::delete(domain_events::table)
            .filter(domain_events::id.eq_any(unreferenced))
            .execute(&mut conn)
            .await
            .map_err(db)?;
        Ok(u64::try_from(deliveries + events).unwrap_or(0))
    }
}
