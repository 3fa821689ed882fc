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
use partner_domain::webhook::hourly::StatusCount;
use partner_domain::webhook::ports::{
    DeliveryRepo, EndpointCheck, InsertEndpoint, PruneMark, PruneStep, WebhookRepo,
};
use partner_domain::webhook::{
    AttemptOutcome, Attempted, ClaimBatch, ClaimRequest, DeliveryDetail, DeliveryFilter,
    DeliveryInfo, DeliveryStatus, ENDPOINT_DISABLED, EndpointHealth, HealthChange, NextStep,
    SubjectIds, Subjects, WebhookEndpoint,
};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::claim::advance;
use crate::dsl::{RowLt, fixed};
use crate::models::webhook_attempts::AttemptRow;
use crate::models::webhook_deliveries::DeliveryRow;
use crate::models::webhook_endpoints::{EndpointRow, NewEndpoint};
use crate::schema::{partners, webhook_deliveries, webhook_endpoints};
use crate::schema_extra::webhook_attempts;
use crate::tokens::{self, TokenPartner};
use crate::{PgStore, db};

// The batch write of outcomes stays raw because the DSL cannot write it: one `UPDATE` over
// `unnest` arrays (`RECORD_SQL`: one statement per batch whatever its size, with CTEs that
// write). The claim (raw too: `LATERAL`, `FOR UPDATE SKIP LOCKED`) is in `claim.rs`, the outbox's
// statements in `outbox.rs`, `LISTEN`/`NOTIFY` in `notify.rs`.

/// `status = 'pending'`, the predicate of the partial indexes `webhook_deliveries_endpoint_due_idx`
/// (and, negated in `prune`, of `webhook_deliveries_finished_idx`): a literal, so a prepared
/// statement's generic plan can use them.
const PENDING: &str = "webhook_deliveries.status = 'pending'";

/// Outcomes of a batch in one statement, fenced by the lease token: a row reclaimed by another
/// worker after this one's lease ran out (new token) or already finished is left alone. The
/// `ANY($1)` restates the join so the primary key is used whatever the planner guesses of
/// `unnest`. Each applied outcome also goes into the attempt log (`webhook_attempts`), stamped
/// with the time the request started.
///
/// It answers one row per delivery of the batch that still exists: its endpoint's health as the
/// statement's snapshot saw it (what [`judge_health`] judges, read before in a statement of its
/// own: a round trip per batch, 0.2 ms, issue 22) and whether its outcome was applied. The
/// snapshot is the one a separate read just after would mostly see; a change committed meanwhile
/// is caught by the health write's compare-and-set either way.
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
  RETURNING d.id, d.last_attempt_at, u.status_code, u.duration_ms, u.error), \
logged AS ( \
  INSERT INTO webhook_attempts (delivery_id, attempted_at, status_code, duration_ms, error) \
  SELECT id, last_attempt_at, status_code, duration_ms, error FROM done) \
SELECT d.id AS delivery_id, w.id AS endpoint_id, w.failing_since, w.disabled_at IS NOT NULL AS disabled, \
  EXISTS (SELECT 1 FROM done WHERE done.id = d.id) AS applied \
FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id \
WHERE d.id = ANY($1::uuid[])";

/// A row of [`RECORD_SQL`]'s answer.
#[derive(QueryableByName)]
struct Recorded {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    delivery_id: Uuid,
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    endpoint_id: Uuid,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    failing_since: Option<OffsetDateTime>,
    #[diesel(sql_type = Bool)]
    disabled: bool,
    #[diesel(sql_type = Bool)]
    applied: bool,
}

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

/// How often an endpoint's health is read again when another worker changed it between this
/// worker's read and its write.
const HEALTH_TRIES: usize = 3;

/// Applies the domain's health rule ([`EndpointHealth::after`]) to the endpoints of a batch's
/// attempts (`attempted`: delivery id and attempt), given each delivery's endpoint and its health
/// as [`RECORD_SQL`] read it (`read`): asks the rule, and writes what it answers only over the
/// health it read (compare-and-set, read again when another worker changed it meanwhile). A write
/// only when the health changes. Returns the endpoints left disabled, whose pending deliveries
/// end `failed`.
async fn judge_health(
    conn: &mut AsyncPgConnection,
    attempted: &[(Uuid, Attempted)],
    read: &[Recorded],
    disable_after: Option<Duration>,
) -> Result<Vec<Uuid>, RepoError> {
    let mut by_delivery: HashMap<Uuid, Vec<Attempted>> = HashMap::new();
    for (id, a) in attempted {
        by_delivery.entry(*id).or_default().push(*a);
    }
    // Per endpoint: its health as read, and the batch's attempts at it.
    let mut endpoints: HashMap<Uuid, (EndpointHealth, Vec<Attempted>)> = HashMap::new();
    for r in read {
        let Some(attempts) = by_delivery.get(&r.delivery_id) else {
            continue;
        };
        let health = EndpointHealth {
            failing_since: r.failing_since,
            disabled: r.disabled,
        };
        endpoints
            .entry(r.endpoint_id)
            .or_insert_with(|| (health, Vec::new()))
            .1
            .extend_from_slice(attempts);
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

    async fn hourly_for_token(
        &self,
        key: TokenKey,
        endpoint: Option<EndpointId>,
        since: OffsetDateTime,
    ) -> Result<Sealed<Vec<StatusCount>>, RepoError> {
        let conn = self.conn().await?;
        let (token, counts) = futures_util::future::try_join(
            tokens::lookup(&conn, &key.hash),
            crate::delivery_hours::for_token(&conn, key, endpoint, since),
        )
        .await?;
        Ok(Sealed::new(token, counts))
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
        // The delete and its announcement commit together: workers drop what they claimed.
        let n = conn
            .transaction(async |c| {
                let n = diesel::delete(webhook_endpoints::table)
                    .filter(webhook_endpoints::partner_id.eq(partner.as_str()))
                    .filter(webhook_endpoints::id.eq(id))
                    .execute(c)
                    .await?;
                if n == 1 {
                    crate::notify::announce_endpoint_changed(c, id).await?;
                }
                Ok::<_, diesel::result::Error>(n)
            })
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
        // The worker's own connection, never a request's held one.
        let mut conn = self.pooled().await?;
        let crate::claim::Claimed {
            rows,
            stale,
            trailing,
        } = crate::claim::claim_rows(&mut conn, req).await?;
        // The markers it left stale or trailing, after it returns (`PgStore::advance_later`).
        self.advance_later(stale, trailing);
        if rows.is_empty() {
            return Ok(ClaimBatch::default());
        }
        // An expired previous secret signs nothing more: erased at the first delivery after its
        // expiry (its own statement, after the claim's locks are released).
        let mut expired: Vec<Uuid> = rows
            .iter()
            .filter(|(r, _)| r.previous_expired())
            .map(|(r, _)| r.unreadable().endpoint_id.as_uuid())
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
        drop(conn);
        Ok(crate::claim::batch(rows))
    }

    async fn subjects(&self, wanted: &SubjectIds) -> Result<Subjects, RepoError> {
        let conn = self.conn().await?;
        subjects(&conn, wanted).await
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
        // Prepared once per connection: parsed and planned at every batch before.
        let recorded: Vec<Recorded> = crate::Prepared(
            diesel::sql_query(RECORD_SQL)
                .bind::<Array<diesel::sql_types::Uuid>, _>(&ids)
                .bind::<Array<diesel::sql_types::Uuid>, _>(&leases)
                .bind::<Array<Text>, _>(&next)
                .bind::<Array<Timestamptz>, _>(&at)
                .bind::<Array<Nullable<Timestamptz>>, _>(&retry_at)
                .bind::<Array<Nullable<Integer>>, _>(&codes)
                .bind::<Array<Nullable<Text>>, _>(&errors)
                .bind::<Array<Nullable<Integer>>, _>(&durations),
        )
        .load(&mut conn)
        .await
        .map_err(db)?;
        let applied = recorded.iter().filter(|r| r.applied).count();
        let attempted: Vec<(Uuid, Attempted)> = outcomes
            .iter()
            .filter_map(|o| Attempted::of(o).map(|a| (o.id.as_uuid(), a)))
            .collect();
        if !attempted.is_empty() {
            let disabled = judge_health(&mut conn, &attempted, &recorded, disable_after).await?;
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

    async fn release(
        &self,
        claims: &[(DeliveryId, Uuid)],
        now: OffsetDateTime,
    ) -> Result<u64, RepoError> {
        let (ids, leases) = claims.iter().map(|(id, l)| (id.as_uuid(), *l)).unzip();
        let mut conn = self.conn().await?;
        let n = crate::claim::release(&mut conn, ids, leases, now)
            .await
            .map_err(db)?;
        Ok(u64::try_from(n).unwrap_or(u64::MAX))
    }

    async fn endpoint_unchanged(
        &self,
        id: EndpointId,
        version: i64,
    ) -> Result<EndpointCheck, RepoError> {
        let mut conn = self.conn().await?;
        // Taken once the connection is held: waiting for one makes the answer no older.
        let sent = std::time::Instant::now();
        let unchanged = crate::claim::endpoint_unchanged(&mut conn, id.as_uuid(), version)
            .await
            .map_err(db)?;
        Ok(EndpointCheck { unchanged, sent })
    }

    async fn upkeep(&self) -> Result<u64, RepoError> {
        let mut conn = self.conn().await?;
        let n = crate::claim::heal_markers(&mut conn).await.map_err(db)?;
        Ok(u64::try_from(n).unwrap_or(u64::MAX))
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

    async fn prune_deliveries(
        &self,
        before: OffsetDateTime,
        from: Option<PruneMark>,
        batch: u32,
    ) -> Result<PruneStep, RepoError> {
        let mut conn = self.conn().await?;
        crate::retention::prune_deliveries(&mut conn, before, from, batch)
            .await
            .map_err(db)
    }

    async fn prune_events(
        &self,
        before: OffsetDateTime,
        from: Option<PruneMark>,
        batch: u32,
    ) -> Result<PruneStep, RepoError> {
        let mut conn = self.conn().await?;
        crate::retention::prune_events(&mut conn, before, from, batch)
            .await
            .map_err(db)
    }
}

/// The records among `wanted` that still exist, as they are now; one query per kind of record,
/// all sent together on the connection (one round trip).
pub(crate) async fn subjects(
    conn: &AsyncPgConnection,
    wanted: &SubjectIds,
) -> Result<Subjects, RepoError> {
    // Every kind of record an event can be about; a new one does not compile until it is
    // read here.
    let SubjectIds {
        leads,
        orders,
        payouts,
    } = wanted;
    let lead_ids: Vec<Uuid> = leads.iter().map(|l| l.as_uuid()).collect();
    let order_ids: Vec<&str> = orders.iter().map(String::as_str).collect();
    let payout_ids: Vec<Uuid> = payouts.iter().map(|p| p.as_uuid()).collect();
    let (leads, orders, payouts) = futures_util::future::try_join3(
        async {
            if lead_ids.is_empty() {
                Ok((Vec::new(), Vec::new()))
            } else {
                crate::leads::leads_by_ids(conn, &lead_ids).await
            }
        },
        async {
            if order_ids.is_empty() {
                Ok((Vec::new(), Vec::new()))
            } else {
                crate::orders::orders_by_ids(conn, &order_ids).await
            }
        },
        async {
            if payout_ids.is_empty() {
                Ok((Vec::new(), Vec::new()))
            } else {
                crate::payouts::payouts_by_ids(conn, &payout_ids).await
            }
        },
    )
    .await?;
    Ok(Subjects {
        leads: leads.0.into_iter().map(|l| (l.id(), l)).collect(),
        orders: orders
            .0
            .into_iter()
            .map(|o| (o.order.order_id().to_owned(), o))
            .collect(),
        payouts: payouts.0.into_iter().map(|p| (p.id(), p)).collect(),
        unreadable: SubjectIds {
            leads: leads.1.into_iter().map(LeadId::from_uuid).collect(),
            orders: orders.1,
            payouts: payouts.1.into_iter().map(PayoutId::from_uuid).collect(),
        },
    })
}
