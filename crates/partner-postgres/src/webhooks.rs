//! Webhook endpoints, the delivery log, and the workers' claim/record cycle.

use std::collections::HashMap;

use diesel::prelude::*;
use diesel::sql_types::{Array, Bytea, Integer, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use partner_domain::RepoError;
use partner_domain::auth::{Sealed, TokenKey};
use partner_domain::events::{Subject, SubjectKind};
use partner_domain::ids::{DeliveryId, EndpointId};
use partner_domain::ports::{DeliveryRepo, InsertEndpoint, WebhookRepo};
use partner_domain::values::PartnerId;
use partner_domain::webhook::{
    AttemptLogEntry, AttemptOutcome, ClaimRequest, ClaimedDelivery, CustomHeader, DeliveryDetail,
    DeliveryFilter, DeliveryInfo, DisabledReason, ENDPOINT_DISABLED, EventKind, LeadCreatedDelay,
    NextStep, WebhookEndpoint, WebhookSecret,
};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::tokens::{self, TokenPartner};
use crate::{PgStore, corrupt, db};

const ENDPOINT_COLUMNS: &str = "id, partner_id, url, events, lead_created_delay_seconds, custom_header_name, \
    custom_header_value, secret, created_at, updated_at, disabled_at, disabled_reason, previous_secret, \
    previous_secret_expires_at";

#[derive(QueryableByName)]
struct EndpointRow {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    id: Uuid,
    #[diesel(sql_type = Text)]
    partner_id: String,
    #[diesel(sql_type = Text)]
    url: String,
    #[diesel(sql_type = Array<Text>)]
    events: Vec<String>,
    #[diesel(sql_type = Nullable<Integer>)]
    lead_created_delay_seconds: Option<i32>,
    #[diesel(sql_type = Nullable<Text>)]
    custom_header_name: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    custom_header_value: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    secret: Option<String>,
    #[diesel(sql_type = Timestamptz)]
    created_at: OffsetDateTime,
    #[diesel(sql_type = Timestamptz)]
    updated_at: OffsetDateTime,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    disabled_at: Option<OffsetDateTime>,
    #[diesel(sql_type = Nullable<Text>)]
    disabled_reason: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    previous_secret: Option<String>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    previous_secret_expires_at: Option<OffsetDateTime>,
}

fn delay_seconds(d: Option<LeadCreatedDelay>) -> Option<i32> {
    d.map(|d| i32::try_from(d.duration().whole_seconds()).unwrap_or(i32::MAX))
}

fn delay_from_seconds(s: Option<i32>) -> Result<Option<LeadCreatedDelay>, RepoError> {
    s.map(|s| match s {
        60 => Ok(LeadCreatedDelay::OneMinute),
        300 => Ok(LeadCreatedDelay::FiveMinutes),
        3600 => Ok(LeadCreatedDelay::OneHour),
        _ => Err(corrupt("lead.created delay")),
    })
    .transpose()
}

fn events(v: &[String]) -> Result<Vec<EventKind>, RepoError> {
    v.iter()
        .map(|e| EventKind::parse(e).ok_or_else(|| corrupt("event kind")))
        .collect()
}

fn header(name: Option<String>, value: Option<String>) -> Result<Option<CustomHeader>, RepoError> {
    match (name, value) {
        (Some(name), Some(value)) => CustomHeader::parse(&name, &value)
            .map(Some)
            .map_err(|_| corrupt("custom header")),
        _ => Ok(None),
    }
}

impl EndpointRow {
    fn into_domain(self) -> Result<WebhookEndpoint, RepoError> {
        Ok(WebhookEndpoint {
            id: EndpointId::from_uuid(self.id),
            partner_id: PartnerId::parse(&self.partner_id).map_err(|_| corrupt("partner id"))?,
            url: self.url,
            events: events(&self.events)?,
            lead_created_delay: delay_from_seconds(self.lead_created_delay_seconds)?,
            custom_header: header(self.custom_header_name, self.custom_header_value)?,
            secret: self.secret.map(WebhookSecret::from_stored),
            previous_secret: self.previous_secret.map(WebhookSecret::from_stored),
            previous_secret_expires_at: self.previous_secret_expires_at,
            disabled_at: self.disabled_at,
            disabled_reason: self
                .disabled_reason
                .map(|r| DisabledReason::parse(&r).ok_or_else(|| corrupt("disabled reason")))
                .transpose()?,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

#[derive(QueryableByName)]
struct DeliveryRow {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    id: Uuid,
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    endpoint_id: Uuid,
    #[diesel(sql_type = Text)]
    kind: String,
    #[diesel(sql_type = Text)]
    status: String,
    #[diesel(sql_type = Integer)]
    attempts: i32,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    next_attempt_at: Option<OffsetDateTime>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    last_attempt_at: Option<OffsetDateTime>,
    #[diesel(sql_type = Nullable<Integer>)]
    last_status_code: Option<i32>,
    #[diesel(sql_type = Nullable<Text>)]
    last_error: Option<String>,
    #[diesel(sql_type = Timestamptz)]
    created_at: OffsetDateTime,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    delivered_at: Option<OffsetDateTime>,
}

const DELIVERY_COLUMNS: &str = "id, endpoint_id, kind, status, attempts, next_attempt_at, last_attempt_at, \
    last_status_code, last_error, created_at, delivered_at";

impl DeliveryRow {
    fn into_domain(self) -> DeliveryInfo {
        DeliveryInfo {
            id: DeliveryId::from_uuid(self.id),
            endpoint_id: EndpointId::from_uuid(self.endpoint_id),
            event: self.kind,
            status: self.status,
            attempts: self.attempts,
            next_attempt_at: self.next_attempt_at,
            last_attempt_at: self.last_attempt_at,
            last_status_code: self.last_status_code,
            last_error: self.last_error,
            created_at: self.created_at,
            delivered_at: self.delivered_at,
        }
    }
}

#[derive(QueryableByName)]
struct AttemptRow {
    #[diesel(sql_type = Timestamptz)]
    attempted_at: OffsetDateTime,
    #[diesel(sql_type = Nullable<Integer>)]
    status_code: Option<i32>,
    #[diesel(sql_type = Nullable<Integer>)]
    duration_ms: Option<i32>,
    #[diesel(sql_type = Nullable<Text>)]
    error: Option<String>,
}

#[derive(QueryableByName)]
struct ClaimRow {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    id: Uuid,
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    endpoint_id: Uuid,
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    lease_token: Uuid,
    #[diesel(sql_type = Integer)]
    attempts: i32,
    #[diesel(sql_type = Text)]
    kind: String,
    #[diesel(sql_type = Timestamptz)]
    event_created_at: OffsetDateTime,
    #[diesel(sql_type = Text)]
    subject: String,
    #[diesel(sql_type = Text)]
    extra: String,
    #[diesel(sql_type = Text)]
    url: String,
    #[diesel(sql_type = Nullable<Text>)]
    secret: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    previous_secret: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    custom_header_name: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    custom_header_value: Option<String>,
}

impl ClaimRow {
    fn into_domain(self) -> Result<ClaimedDelivery, RepoError> {
        Ok(ClaimedDelivery {
            id: DeliveryId::from_uuid(self.id),
            endpoint_id: EndpointId::from_uuid(self.endpoint_id),
            lease: self.lease_token,
            attempt: u32::try_from(self.attempts).map_err(|_| corrupt("attempt count"))?,
            kind: EventKind::parse_delivered(&self.kind).ok_or_else(|| corrupt("event kind"))?,
            event_created_at: self.event_created_at,
            subject: self.subject,
            extra: serde_json::from_str(&self.extra).map_err(|_| corrupt("event extra"))?,
            url: self.url,
            secret: self.secret.map(WebhookSecret::from_stored),
            previous_secret: self.previous_secret.map(WebhookSecret::from_stored),
            custom_header: header(self.custom_header_name, self.custom_header_value)?,
        })
    }
}

/// The workers' claim, in one statement (the DSL cannot express a LATERAL join with a locking
/// clause). `ep`: every endpoint with room, in random order so that no endpoint is always served
/// first when `$7` (the batch limit) binds; `picked`: each endpoint's oldest due rows, at most its
/// room, skipping rows another worker holds; `claimed`: counts the attempt, leases the row until
/// `$2` under a fresh fencing token. The budget (`$6`) counts attempts since the last resend or
/// recover (`attempts - attempt_base`), and so does the attempt number returned. Then what sending needs, from the event and the endpoint.
const CLAIM_SQL: &str = "\
WITH busy AS ( \
  SELECT * FROM unnest($4::uuid[], $5::int4[]) AS b(endpoint_id, room)), \
ep AS ( \
  SELECT e.id, COALESCE(b.room, $3) AS room \
  FROM webhook_endpoints e LEFT JOIN busy b ON b.endpoint_id = e.id \
  WHERE COALESCE(b.room, $3) > 0 AND e.disabled_at IS NULL \
  ORDER BY random()), \
picked AS ( \
  SELECT p.id FROM ep CROSS JOIN LATERAL ( \
    SELECT d.id FROM webhook_deliveries d \
    WHERE d.endpoint_id = ep.id AND d.status = 'pending' AND d.next_attempt_at <= $1 AND d.attempts - d.attempt_base < $6 \
    ORDER BY d.next_attempt_at LIMIT ep.room \
    FOR UPDATE SKIP LOCKED) p \
  LIMIT $7), \
claimed AS ( \
  UPDATE webhook_deliveries d \
  SET attempts = d.attempts + 1, next_attempt_at = $2, lease_token = gen_random_uuid() \
  FROM picked WHERE d.id = picked.id \
  RETURNING d.id, d.endpoint_id, d.lease_token, d.attempts - d.attempt_base AS attempts, d.kind, d.event_id) \
SELECT c.id, c.endpoint_id, c.lease_token, c.attempts, c.kind, ev.created_at AS event_created_at, \
  ev.subject, ev.extra::text AS extra, w.url, w.secret, \
  CASE WHEN w.previous_secret_expires_at > $1 THEN w.previous_secret END AS previous_secret, \
  w.custom_header_name, w.custom_header_value \
FROM claimed c JOIN domain_events ev ON ev.id = c.event_id JOIN webhook_endpoints w ON w.id = c.endpoint_id";

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

/// Ends the pending deliveries of the endpoints `$1` (disabled) as `failed` with `$2`. Clearing
/// the lease fences off the outcome of an attempt in flight.
const FAIL_DISABLED_SQL: &str = "\
UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, lease_token = NULL, last_error = $2 \
WHERE endpoint_id = ANY ($1::uuid[]) AND status = 'pending'";

/// Endpoint health after a batch of attempts (`$2`: delivered; `$3`: the status answered; `$4`:
/// when). A delivered attempt ends an endpoint's run of failures; a `410` disables it (`gone`);
/// a run of failures that began `$5` seconds or more before the batch's last attempt disables it
/// (`failing`; `$5` <= 0: never). Only rows whose health changes are written (a healthy
/// endpoint's row is not touched per batch). Returns those endpoints and whether they are disabled.
const HEALTH_SQL: &str = "\
WITH o AS ( \
  SELECT * FROM unnest($1::uuid[], $2::bool[], $3::int4[], $4::timestamptz[]) AS o(id, ok, code, at)), \
per AS ( \
  SELECT d.endpoint_id, bool_or(o.ok) AS any_ok, COALESCE(bool_or(o.code = 410), false) AS gone, \
    min(o.at) FILTER (WHERE NOT o.ok) AS first_fail, max(o.at) AS last_at \
  FROM o JOIN webhook_deliveries d ON d.id = o.id GROUP BY d.endpoint_id), \
judged AS ( \
  SELECT per.endpoint_id, per.any_ok, per.last_at, \
    CASE WHEN per.any_ok THEN NULL ELSE COALESCE(e.failing_since, per.first_fail) END AS failing_since, \
    CASE WHEN e.disabled_at IS NOT NULL THEN NULL \
         WHEN per.gone THEN 'gone' \
         WHEN NOT per.any_ok AND $5::float8 > 0 \
              AND COALESCE(e.failing_since, per.first_fail) <= per.last_at - make_interval(secs => $5::float8) \
           THEN 'failing' END AS disable \
  FROM per JOIN webhook_endpoints e ON e.id = per.endpoint_id) \
UPDATE webhook_endpoints e SET failing_since = j.failing_since, \
  disabled_at = CASE WHEN j.disable IS NOT NULL THEN j.last_at ELSE e.disabled_at END, \
  disabled_reason = CASE WHEN j.disable IS NOT NULL THEN j.disable ELSE e.disabled_reason END \
FROM judged j WHERE e.id = j.endpoint_id \
  AND (j.disable IS NOT NULL OR j.failing_since IS DISTINCT FROM e.failing_since) \
RETURNING e.id, e.disabled_at IS NOT NULL AS disabled";

/// The partner's deliveries, newest first, filtered; `$5`/`$6` the cursor's position.
const LIST_SQL: &str = "\
SELECT id, endpoint_id, kind, status, attempts, next_attempt_at, last_attempt_at, last_status_code, last_error, \
  created_at, delivered_at \
FROM webhook_deliveries \
WHERE partner_id = $1 \
  AND ($2::uuid IS NULL OR endpoint_id = $2) \
  AND (cardinality($3::text[]) = 0 OR status = ANY ($3::text[])) \
  AND ($4::text IS NULL OR kind = $4) \
  AND ($5::timestamptz IS NULL OR (created_at, id) < ($5, $6::uuid)) \
ORDER BY created_at DESC, id DESC LIMIT $7";

/// [`LIST_SQL`] with the partner taken from the token in SQL (hash `$1`, instant `$8`).
fn list_for_token_sql() -> String {
    format!(
        "SELECT id, endpoint_id, kind, status, attempts, next_attempt_at, last_attempt_at, \
           last_status_code, last_error, created_at, delivered_at \
         FROM webhook_deliveries \
         WHERE partner_id = {} \
           AND ($2::uuid IS NULL OR endpoint_id = $2) \
           AND (cardinality($3::text[]) = 0 OR status = ANY ($3::text[])) \
           AND ($4::text IS NULL OR kind = $4) \
           AND ($5::timestamptz IS NULL OR (created_at, id) < ($5, $6::uuid)) \
         ORDER BY created_at DESC, id DESC LIMIT $7",
        TokenPartner::sql(1, 8)
    )
}

/// The reads of a partner's webhook endpoints and deliveries for a token, each with the partner
/// taken from the token in SQL, to be pipelined with the token lookup.
mod for_token {
    use super::*;

    pub(super) async fn endpoints(
        mut conn: &AsyncPgConnection,
        partner: &TokenPartner,
    ) -> Result<Vec<WebhookEndpoint>, RepoError> {
        let (hash, now) = partner.binds();
        let rows: Vec<EndpointRow> = crate::Prepared(
            diesel::sql_query(format!(
                "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE partner_id = {} \
                 ORDER BY created_at, id",
                TokenPartner::sql(1, 2)
            ))
            .bind::<Bytea, _>(hash)
            .bind::<Timestamptz, _>(now),
        )
        .load(&mut conn)
        .await
        .map_err(db)?;
        rows.into_iter().map(EndpointRow::into_domain).collect()
    }

    pub(super) async fn deliveries(
        mut conn: &AsyncPgConnection,
        partner: &TokenPartner,
        filter: &DeliveryFilter,
    ) -> Result<Vec<DeliveryInfo>, RepoError> {
        let (hash, now) = partner.binds();
        let rows: Vec<DeliveryRow> = crate::Prepared(
            diesel::sql_query(list_for_token_sql())
                .bind::<Bytea, _>(hash)
                .bind::<Nullable<diesel::sql_types::Uuid>, _>(
                    filter.endpoint_id.map(EndpointId::as_uuid),
                )
                .bind::<Array<Text>, _>(&filter.statuses)
                .bind::<Nullable<Text>, _>(filter.event.map(EventKind::as_str))
                .bind::<Nullable<Timestamptz>, _>(filter.after.map(|p| p.created_at))
                .bind::<Nullable<diesel::sql_types::Uuid>, _>(filter.after.map(|p| p.id))
                .bind::<diesel::sql_types::BigInt, _>(i64::from(filter.limit))
                .bind::<Timestamptz, _>(now),
        )
        .load(&mut conn)
        .await
        .map_err(db)?;
        Ok(rows.into_iter().map(DeliveryRow::into_domain).collect())
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
        let (hash, now) = partner.binds();
        let row = crate::Prepared(
            diesel::sql_query(format!(
                "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries WHERE partner_id = {} AND id = $3",
                TokenPartner::sql(1, 2)
            ))
            .bind::<Bytea, _>(hash)
            .bind::<Timestamptz, _>(now)
            .bind::<diesel::sql_types::Uuid, _>(id),
        )
        .load::<DeliveryRow>(&mut conn);
        let attempts = crate::Prepared(
            diesel::sql_query(format!(
                "SELECT * FROM ( \
                   SELECT attempted_at, status_code, duration_ms, error FROM webhook_attempts \
                   WHERE delivery_id = $3 AND EXISTS (SELECT 1 FROM webhook_deliveries d \
                     WHERE d.id = $3 AND d.partner_id = {}) \
                   ORDER BY attempted_at DESC LIMIT $4) a \
                 ORDER BY attempted_at",
                TokenPartner::sql(1, 2)
            ))
            .bind::<Bytea, _>(hash)
            .bind::<Timestamptz, _>(now)
            .bind::<diesel::sql_types::Uuid, _>(id)
            .bind::<diesel::sql_types::BigInt, _>(i64::from(log_limit)),
        )
        .load::<AttemptRow>(&mut conn);
        let (row, attempts) = futures_util::future::try_join(row, attempts)
            .await
            .map_err(db)?;
        // At most one row: the id is the primary key.
        Ok(row.into_iter().next().map(|row| DeliveryDetail {
            delivery: row.into_domain(),
            attempt_log: attempts
                .into_iter()
                .map(|a| AttemptLogEntry {
                    attempted_at: a.attempted_at,
                    status_code: a.status_code,
                    duration_ms: a.duration_ms,
                    error: a.error,
                })
                .collect(),
        }))
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
        let rows: Vec<EndpointRow> = diesel::sql_query(format!(
            "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE partner_id = $1 ORDER BY created_at, id"
        ))
        .bind::<Text, _>(partner.as_str())
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
        let row: Option<EndpointRow> = diesel::sql_query(format!(
            "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE partner_id = $1 AND id = $2"
        ))
        .bind::<Text, _>(partner.as_str())
        .bind::<diesel::sql_types::Uuid, _>(id)
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
            #[derive(QueryableByName)]
            struct N {
                #[diesel(sql_type = diesel::sql_types::BigInt)]
                n: i64,
            }
            let locked: Option<N> =
                diesel::sql_query("SELECT 0::bigint AS n FROM partners WHERE partner_id = $1 FOR UPDATE")
                    .bind::<Text, _>(e.partner_id.as_str())
                    .get_result(conn)
                    .await
                    .optional()?;
            if locked.is_none() {
                return Ok(InsertEndpoint::UnknownPartner);
            }
            let count: N = diesel::sql_query("SELECT count(*) AS n FROM webhook_endpoints WHERE partner_id = $1")
                .bind::<Text, _>(e.partner_id.as_str())
                .get_result(conn)
                .await?;
            if count.n >= max {
                return Ok(InsertEndpoint::TooMany);
            }
            let kinds: Vec<&str> = e.events.iter().map(|k| k.as_str()).collect();
            diesel::sql_query(format!(
                "INSERT INTO webhook_endpoints ({ENDPOINT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, NULL, NULL, NULL, NULL)"
            ))
            .bind::<diesel::sql_types::Uuid, _>(e.id.as_uuid())
            .bind::<Text, _>(e.partner_id.as_str())
            .bind::<Text, _>(&e.url)
            .bind::<Array<Text>, _>(&kinds)
            .bind::<Nullable<Integer>, _>(delay_seconds(e.lead_created_delay))
            .bind::<Nullable<Text>, _>(e.custom_header.as_ref().map(CustomHeader::name))
            .bind::<Nullable<Text>, _>(e.custom_header.as_ref().map(CustomHeader::value))
            .bind::<Nullable<Text>, _>(e.secret.as_ref().map(|s| s.expose()))
            .bind::<Timestamptz, _>(e.created_at)
            .execute(conn)
            .await?;
            Ok::<_, diesel::result::Error>(InsertEndpoint::Inserted)
        })
        .await
        .map_err(db)
    }

    async fn update_endpoint(&self, e: &WebhookEndpoint) -> Result<bool, RepoError> {
        let mut conn = self.conn().await?;
        let e = e.clone();
        conn.transaction(async |conn| {
            let kinds: Vec<&str> = e.events.iter().map(|k| k.as_str()).collect();
            // Re-enabling starts the health count afresh.
            let n = diesel::sql_query(
                "UPDATE webhook_endpoints SET url = $3, events = $4, lead_created_delay_seconds = $5, \
                   custom_header_name = $6, custom_header_value = $7, secret = $8, updated_at = $9, \
                   failing_since = CASE WHEN $10::timestamptz IS NULL AND disabled_at IS NOT NULL \
                                        THEN NULL ELSE failing_since END, \
                   disabled_at = $10, disabled_reason = $11, previous_secret = $12, \
                   previous_secret_expires_at = $13 \
                 WHERE partner_id = $1 AND id = $2",
            )
            .bind::<Text, _>(e.partner_id.as_str())
            .bind::<diesel::sql_types::Uuid, _>(e.id.as_uuid())
            .bind::<Text, _>(&e.url)
            .bind::<Array<Text>, _>(&kinds)
            .bind::<Nullable<Integer>, _>(delay_seconds(e.lead_created_delay))
            .bind::<Nullable<Text>, _>(e.custom_header.as_ref().map(CustomHeader::name))
            .bind::<Nullable<Text>, _>(e.custom_header.as_ref().map(CustomHeader::value))
            .bind::<Nullable<Text>, _>(e.secret.as_ref().map(|s| s.expose()))
            .bind::<Timestamptz, _>(e.updated_at)
            .bind::<Nullable<Timestamptz>, _>(e.disabled_at)
            .bind::<Nullable<Text>, _>(e.disabled_reason.map(DisabledReason::as_str))
            .bind::<Nullable<Text>, _>(e.previous_secret.as_ref().map(|s| s.expose()))
            .bind::<Nullable<Timestamptz>, _>(e.previous_secret_expires_at)
            .execute(conn)
            .await?;
            if n == 1 && e.disabled_at.is_some() {
                diesel::sql_query(FAIL_DISABLED_SQL)
                    .bind::<Array<diesel::sql_types::Uuid>, _>(vec![e.id.as_uuid()])
                    .bind::<Text, _>(ENDPOINT_DISABLED)
                    .execute(conn)
                    .await?;
            }
            Ok::<_, diesel::result::Error>(n == 1)
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
        let n =
            diesel::sql_query("DELETE FROM webhook_endpoints WHERE partner_id = $1 AND id = $2")
                .bind::<Text, _>(partner.as_str())
                .bind::<diesel::sql_types::Uuid, _>(id)
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
        let mut conn = self.conn().await?;
        let rows: Vec<DeliveryRow> = diesel::sql_query(LIST_SQL)
            .bind::<Text, _>(partner.as_str())
            .bind::<Nullable<diesel::sql_types::Uuid>, _>(
                filter.endpoint_id.map(EndpointId::as_uuid),
            )
            .bind::<Array<Text>, _>(&filter.statuses)
            .bind::<Nullable<Text>, _>(filter.event.map(EventKind::as_str))
            .bind::<Nullable<Timestamptz>, _>(filter.after.map(|p| p.created_at))
            .bind::<Nullable<diesel::sql_types::Uuid>, _>(filter.after.map(|p| p.id))
            .bind::<diesel::sql_types::BigInt, _>(i64::from(filter.limit))
            .load(&mut conn)
            .await
            .map_err(db)?;
        Ok(rows.into_iter().map(DeliveryRow::into_domain).collect())
    }

    async fn delivery(
        &self,
        partner: &PartnerId,
        id: DeliveryId,
        log_limit: u16,
    ) -> Result<Option<DeliveryDetail>, RepoError> {
        let id = id.as_uuid();
        let mut conn = self.conn().await?;
        let row: Option<DeliveryRow> = diesel::sql_query(format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries WHERE partner_id = $1 AND id = $2"
        ))
        .bind::<Text, _>(partner.as_str())
        .bind::<diesel::sql_types::Uuid, _>(id)
        .get_result(&mut conn)
        .await
        .optional()
        .map_err(db)?;
        let Some(row) = row else {
            return Ok(None);
        };
        let attempts: Vec<AttemptRow> = diesel::sql_query(
            "SELECT * FROM ( \
               SELECT attempted_at, status_code, duration_ms, error FROM webhook_attempts \
               WHERE delivery_id = $1 ORDER BY attempted_at DESC LIMIT $2) a \
             ORDER BY attempted_at",
        )
        .bind::<diesel::sql_types::Uuid, _>(id)
        .bind::<diesel::sql_types::BigInt, _>(i64::from(log_limit))
        .load(&mut conn)
        .await
        .map_err(db)?;
        Ok(Some(DeliveryDetail {
            delivery: row.into_domain(),
            attempt_log: attempts
                .into_iter()
                .map(|a| AttemptLogEntry {
                    attempted_at: a.attempted_at,
                    status_code: a.status_code,
                    duration_ms: a.duration_ms,
                    error: a.error,
                })
                .collect(),
        }))
    }

    async fn resend(
        &self,
        partner: &PartnerId,
        id: DeliveryId,
        now: OffsetDateTime,
    ) -> Result<Option<DeliveryInfo>, RepoError> {
        let id = id.as_uuid();
        let mut conn = self.conn().await?;
        // A fresh budget: the count since `attempt_base` starts again. Clearing the lease fences
        // off the outcome of an attempt in flight now.
        let row: Option<DeliveryRow> = diesel::sql_query(format!(
            "UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = $3, attempt_base = attempts, \
               lease_token = NULL, delivered_at = NULL \
             WHERE partner_id = $1 AND id = $2 RETURNING {DELIVERY_COLUMNS}"
        ))
        .bind::<Text, _>(partner.as_str())
        .bind::<diesel::sql_types::Uuid, _>(id)
        .bind::<Timestamptz, _>(now)
        .get_result(&mut conn)
        .await
        .optional()
        .map_err(db)?;
        if row.is_some() {
            self.deliveries_committed(1);
        }
        Ok(row.map(DeliveryRow::into_domain))
    }

    async fn ping(
        &self,
        partner: &PartnerId,
        endpoint: EndpointId,
        delivery_id: DeliveryId,
        now: OffsetDateTime,
    ) -> Result<Option<DeliveryInfo>, RepoError> {
        let endpoint = endpoint.as_uuid();
        let delivery_id = delivery_id.as_uuid();
        let mut conn = self.conn().await?;
        // The event is written only when the endpoint is the partner's, and with it its one
        // delivery; the event's subject is the endpoint.
        let row: Option<DeliveryRow> = diesel::sql_query(format!(
            "WITH ev AS ( \
               INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at) \
               SELECT gen_random_uuid(), w.partner_id, 'ping', w.id::text, '{{}}'::jsonb, $4 \
               FROM webhook_endpoints w WHERE w.partner_id = $1 AND w.id = $2 RETURNING id) \
             INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, attempts, \
               next_attempt_at, created_at) \
             SELECT $3, $2, $1, ev.id, 'ping', 'pending', 0, $4, $4 FROM ev \
             RETURNING {DELIVERY_COLUMNS}"
        ))
        .bind::<Text, _>(partner.as_str())
        .bind::<diesel::sql_types::Uuid, _>(endpoint)
        .bind::<diesel::sql_types::Uuid, _>(delivery_id)
        .bind::<Timestamptz, _>(now)
        .get_result(&mut conn)
        .await
        .optional()
        .map_err(db)?;
        if row.is_some() {
            self.deliveries_committed(1);
        }
        Ok(row.map(DeliveryRow::into_domain))
    }

    async fn recover(
        &self,
        partner: &PartnerId,
        endpoint: EndpointId,
        since: OffsetDateTime,
        now: OffsetDateTime,
    ) -> Result<Option<u64>, RepoError> {
        let endpoint = endpoint.as_uuid();
        #[derive(QueryableByName)]
        struct Recovered {
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            found: i64,
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            requeued: i64,
        }
        let mut conn = self.conn().await?;
        let r: Recovered = diesel::sql_query(
            "WITH ep AS (SELECT id FROM webhook_endpoints WHERE partner_id = $1 AND id = $2), \
             upd AS ( \
               UPDATE webhook_deliveries d SET status = 'pending', next_attempt_at = $4, \
                 attempt_base = d.attempts, lease_token = NULL \
               FROM ep WHERE d.endpoint_id = ep.id AND d.status = 'failed' AND d.created_at >= $3 \
               RETURNING d.id) \
             SELECT (SELECT count(*) FROM ep) AS found, (SELECT count(*) FROM upd) AS requeued",
        )
        .bind::<Text, _>(partner.as_str())
        .bind::<diesel::sql_types::Uuid, _>(endpoint)
        .bind::<Timestamptz, _>(since)
        .bind::<Timestamptz, _>(now)
        .get_result(&mut conn)
        .await
        .map_err(db)?;
        if r.found == 0 {
            return Ok(None);
        }
        let requeued = u64::try_from(r.requeued).unwrap_or(0);
        self.deliveries_committed(usize::try_from(requeued).unwrap_or(usize::MAX));
        Ok(Some(requeued))
    }
}

#[async_trait::async_trait]
impl DeliveryRepo for PgStore {
    async fn claim(&self, req: &ClaimRequest) -> Result<Vec<ClaimedDelivery>, RepoError> {
        let mut conn = self.conn().await?;
        let clamp = |n: u32| i32::try_from(n).unwrap_or(i32::MAX);
        let (busy_ids, busy_room): (Vec<Uuid>, Vec<i32>) = req
            .room
            .iter()
            .map(|(id, n)| (id.as_uuid(), clamp(*n)))
            .unzip();
        let rows: Vec<ClaimRow> = diesel::sql_query(CLAIM_SQL)
            .bind::<Timestamptz, _>(req.now)
            .bind::<Timestamptz, _>(req.lease_until)
            .bind::<Integer, _>(clamp(req.per_endpoint))
            .bind::<Array<diesel::sql_types::Uuid>, _>(&busy_ids)
            .bind::<Array<Integer>, _>(&busy_room)
            .bind::<Integer, _>(clamp(req.max_attempts))
            .bind::<diesel::sql_types::BigInt, _>(i64::from(req.limit))
            .load(&mut conn)
            .await
            .map_err(db)?;
        rows.into_iter().map(ClaimRow::into_domain).collect()
    }

    async fn subjects(
        &self,
        wanted: &[(SubjectKind, String)],
    ) -> Result<HashMap<(SubjectKind, String), Subject>, RepoError> {
        let mut conn = self.conn().await?;
        let ids = |kind: SubjectKind| -> Vec<Uuid> {
            wanted
                .iter()
                .filter(|(k, _)| *k == kind)
                .filter_map(|(_, id)| Uuid::parse_str(id).ok())
                .collect()
        };
        let mut out = HashMap::new();
        let (leads, payouts) = (ids(SubjectKind::Lead), ids(SubjectKind::Payout));
        let orders: Vec<&str> = wanted
            .iter()
            .filter(|(k, _)| *k == SubjectKind::Order)
            .map(|(_, id)| id.as_str())
            .collect();
        if !leads.is_empty() {
            for l in crate::leads::leads_by_ids(&mut conn, &leads).await? {
                out.insert((SubjectKind::Lead, l.id.to_string()), Subject::Lead(l));
            }
        }
        if !orders.is_empty() {
            for o in crate::orders::orders_by_ids(&mut conn, &orders).await? {
                out.insert(
                    (SubjectKind::Order, o.order.order_id.clone()),
                    Subject::Order(o),
                );
            }
        }
        if !payouts.is_empty() {
            for p in crate::payouts::payouts_by_ids(&mut conn, &payouts).await? {
                out.insert((SubjectKind::Payout, p.id.to_string()), Subject::Payout(p));
            }
        }
        // A `ping` is about its endpoint, which the claim just read: nothing to look up.
        for id in ids(SubjectKind::Endpoint) {
            out.insert(
                (SubjectKind::Endpoint, id.to_string()),
                Subject::Endpoint(id),
            );
        }
        Ok(out)
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
        // Endpoint health, from the attempts that made a request.
        let attempted: Vec<&AttemptOutcome> = outcomes
            .iter()
            .filter(|o| o.duration_ms.is_some())
            .collect();
        if !attempted.is_empty() {
            #[derive(QueryableByName)]
            struct Health {
                #[diesel(sql_type = diesel::sql_types::Uuid)]
                id: Uuid,
                #[diesel(sql_type = diesel::sql_types::Bool)]
                disabled: bool,
            }
            let rows: Vec<Health> = diesel::sql_query(HEALTH_SQL)
                .bind::<Array<diesel::sql_types::Uuid>, _>(
                    attempted.iter().map(|o| o.id.as_uuid()).collect::<Vec<_>>(),
                )
                .bind::<Array<diesel::sql_types::Bool>, _>(
                    attempted
                        .iter()
                        .map(|o| o.next == NextStep::Delivered)
                        .collect::<Vec<_>>(),
                )
                .bind::<Array<Nullable<Integer>>, _>(
                    attempted
                        .iter()
                        .map(|o| o.status_code.map(i32::from))
                        .collect::<Vec<_>>(),
                )
                .bind::<Array<Timestamptz>, _>(attempted.iter().map(|o| o.at).collect::<Vec<_>>())
                .bind::<diesel::sql_types::Double, _>(
                    disable_after.map_or(0.0, |d| d.as_secs_f64()),
                )
                .load(&mut conn)
                .await
                .map_err(db)?;
            let disabled: Vec<Uuid> = rows.iter().filter(|r| r.disabled).map(|r| r.id).collect();
            if !disabled.is_empty() {
                diesel::sql_query(FAIL_DISABLED_SQL)
                    .bind::<Array<diesel::sql_types::Uuid>, _>(&disabled)
                    .bind::<Text, _>(ENDPOINT_DISABLED)
                    .execute(&mut conn)
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
        let n = diesel::sql_query(
            "UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, lease_token = NULL, \
               last_status_code = NULL, last_error = $3 \
             WHERE status = 'pending' AND next_attempt_at <= $1 AND attempts - attempt_base >= $2",
        )
        .bind::<Timestamptz, _>(now)
        .bind::<Integer, _>(i32::try_from(max_attempts).unwrap_or(i32::MAX))
        .bind::<Text, _>(error)
        .execute(&mut conn)
        .await
        .map_err(db)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn prune(&self, before: OffsetDateTime, batch: u32) -> Result<u64, RepoError> {
        let mut conn = self.conn().await?;
        let batch = i64::from(batch);
        // Small batches, each its own statement, so pruning never holds many locks for long.
        let deliveries = diesel::sql_query(
            "DELETE FROM webhook_deliveries WHERE id IN ( \
               SELECT id FROM webhook_deliveries WHERE status <> 'pending' AND created_at < $1 LIMIT $2)",
        )
        .bind::<Timestamptz, _>(before)
        .bind::<diesel::sql_types::BigInt, _>(batch)
        .execute(&mut conn)
        .await
        .map_err(db)?;
        let events = diesel::sql_query(
            "DELETE FROM domain_events WHERE id IN ( \
               SELECT e.id FROM domain_events e WHERE e.created_at < $1 \
                 AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id) LIMIT $2)",
        )
        .bind::<Timestamptz, _>(before)
        .bind::<diesel::sql_types::BigInt, _>(batch)
        .execute(&mut conn)
        .await
        .map_err(db)?;
        Ok(u64::try_from(deliveries + events).unwrap_or(0))
    }
}

/// Tells the workers of every instance (`NOTIFY webhook_deliveries`) that this store committed
/// deliveries. The notification goes out on a connection of its own, after the writing
/// transaction: a `NOTIFY` holds a database-wide lock until its transaction's commit is flushed,
/// which inside the writes would serialise every ingest commit (no group commit; 278 events/s
/// instead of thousands, measured). Coalesced to at most one every 10 ms, and not durable
/// (`synchronous_commit = off`): a lost wake-up costs one poll interval, nothing more.
pub async fn announce_deliveries(
    database_url: String,
    mut written: tokio::sync::watch::Receiver<u64>,
) {
    use diesel_async::AsyncConnection;
    loop {
        match <diesel_async::AsyncPgConnection as AsyncConnection>::establish(&database_url).await {
            Ok(mut conn) => {
                if let Err(e) = diesel::sql_query("SET synchronous_commit = off")
                    .execute(&mut conn)
                    .await
                {
                    tracing::warn!(error = %e, "preparing the webhook announcer failed");
                } else {
                    loop {
                        if written.changed().await.is_err() {
                            return; // the store is gone
                        }
                        if let Err(e) = diesel::sql_query("NOTIFY webhook_deliveries")
                            .execute(&mut conn)
                            .await
                        {
                            tracing::warn!(error = %e, "NOTIFY webhook_deliveries failed; reconnecting");
                            break;
                        }
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot open the webhook announcer connection"),
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}

/// Keeps a connection that `LISTEN`s for new deliveries and calls `wake` on each notification
/// (and once after every (re)connect, since notifications sent while disconnected are lost).
/// Runs until the process ends; a lost connection is re-established after a short pause.
pub async fn listen_for_deliveries(database_url: String, wake: impl Fn() + Send + Sync) {
    use diesel_async::AsyncConnection;
    use futures_util::StreamExt;
    loop {
        match <diesel_async::AsyncPgConnection as AsyncConnection>::establish(&database_url).await {
            Ok(mut conn) => {
                if let Err(e) = diesel::sql_query("LISTEN webhook_deliveries")
                    .execute(&mut conn)
                    .await
                {
                    tracing::warn!(error = %e, "LISTEN webhook_deliveries failed");
                } else {
                    wake();
                    let mut stream = std::pin::pin!(conn.notifications_stream());
                    while let Some(n) = stream.next().await {
                        if n.is_err() {
                            break;
                        }
                        wake();
                    }
                    tracing::warn!("the webhook notification connection closed; reconnecting");
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot open the webhook notification connection"),
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}
