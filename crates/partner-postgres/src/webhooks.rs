//! Webhook endpoints, the delivery log, and the workers' claim/record cycle.

use diesel::prelude::*;
use diesel::sql_types::{Array, Integer, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnection, RunQueryDsl};
use partner_domain::RepoError;
use partner_domain::lead::Lead;
use partner_domain::order::OrderListing;
use partner_domain::payout::Payout;
use partner_domain::ports::{DeliveryRepo, InsertEndpoint, WebhookRepo};
use partner_domain::values::PartnerId;
use partner_domain::webhook::{
    ClaimedDelivery, CustomHeader, DeliveryInfo, EventKind, LeadCreatedDelay, WebhookEndpoint,
    WebhookSecret,
};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::{PgStore, corrupt, db};

const ENDPOINT_COLUMNS: &str = "id, partner_id, url, events, lead_created_delay_seconds, custom_header_name, \
    custom_header_value, secret, created_at, updated_at";

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

fn header(name: Option<String>, value: Option<String>) -> Option<CustomHeader> {
    match (name, value) {
        (Some(name), Some(value)) => Some(CustomHeader { name, value }),
        _ => None,
    }
}

impl EndpointRow {
    fn into_domain(self) -> Result<WebhookEndpoint, RepoError> {
        Ok(WebhookEndpoint {
            id: self.id,
            partner_id: PartnerId::parse(&self.partner_id).map_err(|_| corrupt("partner id"))?,
            url: self.url,
            events: events(&self.events)?,
            lead_created_delay: delay_from_seconds(self.lead_created_delay_seconds)?,
            custom_header: header(self.custom_header_name, self.custom_header_value),
            secret: self.secret.map(WebhookSecret::from_stored),
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
    #[diesel(sql_type = Nullable<Integer>)]
    last_status_code: Option<i32>,
    #[diesel(sql_type = Nullable<Text>)]
    last_error: Option<String>,
    #[diesel(sql_type = Timestamptz)]
    created_at: OffsetDateTime,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    delivered_at: Option<OffsetDateTime>,
}

#[derive(QueryableByName)]
struct ClaimRow {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    id: Uuid,
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
    custom_header_name: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    custom_header_value: Option<String>,
}

#[async_trait::async_trait]
impl WebhookRepo for PgStore {
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
        id: Uuid,
    ) -> Result<Option<WebhookEndpoint>, RepoError> {
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
                "INSERT INTO webhook_endpoints ({ENDPOINT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)"
            ))
            .bind::<diesel::sql_types::Uuid, _>(e.id)
            .bind::<Text, _>(e.partner_id.as_str())
            .bind::<Text, _>(&e.url)
            .bind::<Array<Text>, _>(&kinds)
            .bind::<Nullable<Integer>, _>(delay_seconds(e.lead_created_delay))
            .bind::<Nullable<Text>, _>(e.custom_header.as_ref().map(|h| h.name.as_str()))
            .bind::<Nullable<Text>, _>(e.custom_header.as_ref().map(|h| h.value.as_str()))
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
        let kinds: Vec<&str> = e.events.iter().map(|k| k.as_str()).collect();
        let n = diesel::sql_query(
            "UPDATE webhook_endpoints SET url = $3, events = $4, lead_created_delay_seconds = $5, \
               custom_header_name = $6, custom_header_value = $7, secret = $8, updated_at = $9 \
             WHERE partner_id = $1 AND id = $2",
        )
        .bind::<Text, _>(e.partner_id.as_str())
        .bind::<diesel::sql_types::Uuid, _>(e.id)
        .bind::<Text, _>(&e.url)
        .bind::<Array<Text>, _>(&kinds)
        .bind::<Nullable<Integer>, _>(delay_seconds(e.lead_created_delay))
        .bind::<Nullable<Text>, _>(e.custom_header.as_ref().map(|h| h.name.as_str()))
        .bind::<Nullable<Text>, _>(e.custom_header.as_ref().map(|h| h.value.as_str()))
        .bind::<Nullable<Text>, _>(e.secret.as_ref().map(|s| s.expose()))
        .bind::<Timestamptz, _>(e.updated_at)
        .execute(&mut conn)
        .await
        .map_err(db)?;
        Ok(n == 1)
    }

    async fn delete_endpoint(&self, partner: &PartnerId, id: Uuid) -> Result<bool, RepoError> {
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
        limit: u16,
    ) -> Result<Vec<DeliveryInfo>, RepoError> {
        let mut conn = self.conn().await?;
        let rows: Vec<DeliveryRow> = diesel::sql_query(
            "SELECT id, endpoint_id, kind, status, attempts, next_attempt_at, last_status_code, last_error, \
               created_at, delivered_at \
             FROM webhook_deliveries WHERE partner_id = $1 ORDER BY created_at DESC, id LIMIT $2",
        )
        .bind::<Text, _>(partner.as_str())
        .bind::<diesel::sql_types::BigInt, _>(i64::from(limit))
        .load(&mut conn)
        .await
        .map_err(db)?;
        Ok(rows
            .into_iter()
            .map(|r| DeliveryInfo {
                id: r.id,
                endpoint_id: r.endpoint_id,
                event: r.kind,
                status: r.status,
                attempts: r.attempts,
                next_attempt_at: r.next_attempt_at,
                last_status_code: r.last_status_code,
                last_error: r.last_error,
                created_at: r.created_at,
                delivered_at: r.delivered_at,
            })
            .collect())
    }
}

#[async_trait::async_trait]
impl DeliveryRepo for PgStore {
    async fn claim_due(
        &self,
        now: OffsetDateTime,
        lease_until: OffsetDateTime,
        limit: u16,
    ) -> Result<Vec<ClaimedDelivery>, RepoError> {
        let mut conn = self.conn().await?;
        // One statement: lock due rows no other worker holds, push their next attempt to the end
        // of the lease, and return what sending needs.
        let rows: Vec<ClaimRow> = diesel::sql_query(
            "WITH due AS ( \
               SELECT id FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= $1 \
               ORDER BY next_attempt_at LIMIT $3 FOR UPDATE SKIP LOCKED), \
             claimed AS ( \
               UPDATE webhook_deliveries d SET next_attempt_at = $2 FROM due WHERE d.id = due.id \
               RETURNING d.id, d.attempts, d.kind, d.event_id, d.endpoint_id) \
             SELECT c.id, c.attempts, c.kind, ev.created_at AS event_created_at, ev.subject, ev.extra::text AS extra, \
               w.url, w.secret, w.custom_header_name, w.custom_header_value \
             FROM claimed c JOIN domain_events ev ON ev.id = c.event_id JOIN webhook_endpoints w ON w.id = c.endpoint_id",
        )
        .bind::<Timestamptz, _>(now)
        .bind::<Timestamptz, _>(lease_until)
        .bind::<diesel::sql_types::BigInt, _>(i64::from(limit))
        .load(&mut conn)
        .await
        .map_err(db)?;
        rows.into_iter()
            .map(|r| {
                Ok(ClaimedDelivery {
                    id: r.id,
                    attempts: r.attempts,
                    kind: EventKind::parse(&r.kind).ok_or_else(|| corrupt("event kind"))?,
                    event_created_at: r.event_created_at,
                    subject: r.subject,
                    extra: serde_json::from_str(&r.extra).map_err(|_| corrupt("event extra"))?,
                    url: r.url,
                    secret: r.secret.map(WebhookSecret::from_stored),
                    custom_header: header(r.custom_header_name, r.custom_header_value),
                })
            })
            .collect()
    }

    async fn lead(&self, id: Uuid) -> Result<Option<Lead>, RepoError> {
        let mut conn = self.conn().await?;
        crate::leads::lead_by_id(&mut conn, id).await
    }

    async fn order(&self, order_id: &str) -> Result<Option<OrderListing>, RepoError> {
        let mut conn = self.conn().await?;
        crate::orders::order_by_id(&mut conn, order_id).await
    }

    async fn payout(&self, id: Uuid) -> Result<Option<Payout>, RepoError> {
        let mut conn = self.conn().await?;
        crate::payouts::payout_by_id(&mut conn, id).await
    }

    async fn record_success(
        &self,
        id: Uuid,
        now: OffsetDateTime,
        status: u16,
    ) -> Result<(), RepoError> {
        let mut conn = self.conn().await?;
        diesel::sql_query(
            "UPDATE webhook_deliveries SET status = 'delivered', attempts = attempts + 1, delivered_at = $2, \
               last_status_code = $3, last_error = NULL, next_attempt_at = NULL WHERE id = $1",
        )
        .bind::<diesel::sql_types::Uuid, _>(id)
        .bind::<Timestamptz, _>(now)
        .bind::<Integer, _>(i32::from(status))
        .execute(&mut conn)
        .await
        .map_err(db)?;
        Ok(())
    }

    async fn record_failure(
        &self,
        id: Uuid,
        _now: OffsetDateTime,
        status: Option<u16>,
        error: &str,
        retry_at: Option<OffsetDateTime>,
    ) -> Result<(), RepoError> {
        let mut conn = self.conn().await?;
        let error: String = error
            .chars()
            .filter(|c| !c.is_control())
            .take(500)
            .collect();
        diesel::sql_query(
            "UPDATE webhook_deliveries SET attempts = attempts + 1, last_status_code = $2, last_error = $3, \
               status = CASE WHEN $4::timestamptz IS NULL THEN 'failed' ELSE 'pending' END, next_attempt_at = $4 \
             WHERE id = $1",
        )
        .bind::<diesel::sql_types::Uuid, _>(id)
        .bind::<Nullable<Integer>, _>(status.map(i32::from))
        .bind::<Text, _>(error)
        .bind::<Nullable<Timestamptz>, _>(retry_at)
        .execute(&mut conn)
        .await
        .map_err(db)?;
        Ok(())
    }
}
