//! `webhook_deliveries` rows.

use diesel::prelude::*;
use diesel::sql_types::{Integer, Nullable, Text, Timestamptz};
use partner_domain::RepoError;
use partner_domain::events::{Event, EventKind, StoredEvent};
use partner_domain::kernel::ids::{DeliveryId, EndpointId, EventId};
use partner_domain::webhook::{
    ClaimedDelivery, DeliveryInfo, DeliveryStatus, UnreadableDelivery, WebhookSecret,
};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::corrupt;
use crate::models::webhook_endpoints::header;
use crate::record::row_hint;
use crate::schema::webhook_deliveries;

/// A delivery as the log shows it.
#[derive(Queryable, Selectable)]
#[diesel(table_name = webhook_deliveries, check_for_backend(diesel::pg::Pg))]
pub(crate) struct DeliveryRow {
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
    /// Set from a claim until its outcome is recorded.
    #[diesel(sql_type = Nullable<diesel::sql_types::Uuid>)]
    lease_token: Option<Uuid>,
}

impl DeliveryRow {
    pub(crate) fn into_domain(self) -> Result<DeliveryInfo, RepoError> {
        Ok(DeliveryInfo {
            id: DeliveryId::from_uuid(self.id),
            endpoint_id: EndpointId::from_uuid(self.endpoint_id),
            event: EventKind::parse_delivered(&self.kind).ok_or_else(|| corrupt("event kind"))?,
            status: DeliveryStatus::parse(&self.status)
                .ok_or_else(|| corrupt("delivery status"))?,
            // The claim counts an attempt when it takes the row; one still in flight (leased,
            // pending) has not been made yet ("attempts made so far", extensions §1).
            attempts: self.attempts
                - i32::from(
                    self.lease_token.is_some() && self.status == DeliveryStatus::Pending.as_str(),
                ),
            next_attempt_at: self.next_attempt_at,
            last_attempt_at: self.last_attempt_at,
            last_status_code: self.last_status_code,
            last_error: self.last_error,
            created_at: self.created_at,
            delivered_at: self.delivered_at,
        })
    }
}

/// A claimed delivery with what sending it needs (`CLAIM_SQL`).
#[derive(QueryableByName)]
pub(crate) struct ClaimRow {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    id: Uuid,
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    endpoint_id: Uuid,
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    lease_token: Uuid,
    /// Where the claim left the row (its `ctid`).
    #[diesel(sql_type = Text)]
    tid: String,
    #[diesel(sql_type = Integer)]
    attempts: i32,
    #[diesel(sql_type = Text)]
    kind: String,
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    event_id: Uuid,
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
    /// The endpoint's previous secret has expired (and is to be erased).
    #[diesel(sql_type = diesel::sql_types::Bool)]
    previous_expired: bool,
    #[diesel(sql_type = Nullable<Text>)]
    custom_header_name: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    custom_header_value: Option<String>,
    /// The endpoint row's `xmin` when claimed.
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    endpoint_version: i64,
}

impl ClaimRow {
    /// What identifies the claim, readable whatever the rest of the row holds.
    pub(crate) fn unreadable(&self) -> UnreadableDelivery {
        UnreadableDelivery {
            id: DeliveryId::from_uuid(self.id),
            endpoint_id: EndpointId::from_uuid(self.endpoint_id),
            lease: self.lease_token,
            row: row_hint(&self.tid),
        }
    }

    /// Whether the event's stored subject has the length of a hyphenated UUID: of the forms a
    /// UUID parses from, the only one `claim::CLAIM_SQL` looks a lead up by (its pattern), so a
    /// lead named otherwise is read after the claim, as before.
    pub(crate) fn subject_hyphenated(&self) -> bool {
        self.subject.len() == 36
    }

    /// The endpoint the delivery is for.
    pub(crate) fn endpoint_id(&self) -> Uuid {
        self.endpoint_id
    }

    pub(crate) fn previous_expired(&self) -> bool {
        self.previous_expired
    }

    pub(crate) fn into_domain(self) -> Result<ClaimedDelivery, RepoError> {
        Ok(ClaimedDelivery {
            id: DeliveryId::from_uuid(self.id),
            endpoint_id: EndpointId::from_uuid(self.endpoint_id),
            lease: self.lease_token,
            row: row_hint(&self.tid),
            attempt: u32::try_from(self.attempts).map_err(|_| corrupt("attempt count"))?,
            event_id: EventId::from_uuid(self.event_id),
            event: Event::from_stored(&StoredEvent {
                kind: EventKind::parse_delivered(&self.kind)
                    .ok_or_else(|| corrupt("event kind"))?,
                subject: self.subject,
                extra: serde_json::from_str(&self.extra).map_err(|_| corrupt("event extra"))?,
            })
            .ok_or_else(|| corrupt("event"))?,
            event_created_at: self.event_created_at,
            url: self.url,
            secret: self.secret.map(WebhookSecret::from_stored),
            previous_secret: self.previous_secret.map(WebhookSecret::from_stored),
            custom_header: header(self.custom_header_name, self.custom_header_value)?,
            endpoint_version: self.endpoint_version,
        })
    }
}

/// What a requeue found (`RECOVER_SQL`, `RESEND_SQL`): whether the partner's endpoint or
/// delivery exists, how many deliveries were queued again, and how many matched.
#[derive(QueryableByName)]
pub(crate) struct Recovered {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub(crate) found: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub(crate) requeued: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub(crate) matched: i64,
}
