//! Webhook endpoints, the delivery log, and the workers' `DeliveryRepo` over the claim
//! (`claim.rs`) and the record of their attempts (`record.rs`).

use diesel::pg::Pg;
use diesel::prelude::*;
use diesel::sql_types::{Bool, Timestamptz};
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
    AttemptOutcome, ClaimBatch, ClaimRequest, DeliveryDetail, DeliveryFilter, DeliveryInfo,
    DeliveryStatus, SubjectIds, Subjects, WebhookEndpoint,
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
// `unnest` arrays (`RECORD_SQL` in `record.rs`: one statement per batch whatever its size, with
// CTEs that write). The claim (raw too: `LATERAL`, `FOR UPDATE SKIP LOCKED`) is in `claim.rs`,
// the outbox's statements in `outbox.rs`, `LISTEN`/`NOTIFY` in `notify.rs`.

/// `status = 'pending'`, the predicate of the partial indexes `webhook_deliveries_endpoint_due_idx`
/// (and, negated in `prune`, of `webhook_deliveries_finished_idx`): a literal, so a prepared
/// statement's generic plan can use them.
const PENDING: &str = "webhook_deliveries.status = 'pending'";

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
            .map(|(r, _)| r.endpoint_id())
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
        crate::record::record(&mut conn, outcomes, disable_after).await
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
