//! Deliveries: one event to one endpoint. Their status and log as partners see them, what a
//! worker claims and records, and the body it signs.

use std::sync::LazyLock;

use serde::{Serialize, Serializer};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::events::{Event, EventKind};
use crate::kernel::cursor::Position;
use crate::kernel::ids::{DeliveryId, EndpointId, EventId};
use crate::kernel::values::ValueError;
use crate::kernel::wire;
use crate::webhook::endpoint::CustomHeader;
use crate::webhook::payload::{SubjectIds, Subjects};
#[cfg(doc)]
use crate::webhook::ports::DeliveryRepo;
use crate::webhook::retry::NextStep;
use crate::webhook::signature::WebhookSecret;

/// A delivery as partners and the operator see it (`WebhookDelivery`, extensions.md §1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryInfo {
    /// The `X-Partner-Delivery` value.
    pub id: DeliveryId,
    /// The endpoint it is delivered to.
    pub endpoint_id: EndpointId,
    /// The kind of event it carries.
    pub event: EventKind,
    /// Where it stands.
    pub status: DeliveryStatus,
    /// Attempts made so far (all of them, across resends).
    pub attempts: i32,
    /// When it is next due; `None` once it is delivered or failed.
    pub next_attempt_at: Option<OffsetDateTime>,
    /// When it was last attempted.
    pub last_attempt_at: Option<OffsetDateTime>,
    /// The receiver's status of the last attempt, when it answered.
    pub last_status_code: Option<i32>,
    /// A short reason the last attempt failed (`timeout`, `status 500`…).
    pub last_error: Option<String>,
    /// When it was queued.
    pub created_at: OffsetDateTime,
    /// When a receiver answered 2xx.
    pub delivered_at: Option<OffsetDateTime>,
}

impl DeliveryInfo {
    /// A delivery just written: pending, due `now`, never attempted.
    pub fn queued(
        id: DeliveryId,
        endpoint_id: EndpointId,
        event: EventKind,
        now: OffsetDateTime,
    ) -> Self {
        Self {
            id,
            endpoint_id,
            event,
            status: DeliveryStatus::Pending,
            attempts: 0,
            next_attempt_at: Some(now),
            last_attempt_at: None,
            last_status_code: None,
            last_error: None,
            created_at: now,
            delivered_at: None,
        }
    }
}

/// One attempt of a delivery, as its log shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptLogEntry {
    /// When the attempt was made.
    pub attempted_at: OffsetDateTime,
    /// `null` when the receiver did not answer.
    pub status_code: Option<i32>,
    /// `null` when no request was made (the event's record was gone).
    pub duration_ms: Option<i32>,
    /// A short reason it failed, if it did.
    pub error: Option<String>,
}

/// How many attempts a delivery's log shows at most (the last ones).
pub const ATTEMPT_LOG_LIMIT: u16 = 20;

/// A delivery with its attempt log, oldest attempt first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryDetail {
    /// The delivery.
    pub delivery: DeliveryInfo,
    /// Its last [`ATTEMPT_LOG_LIMIT`] attempts, oldest first.
    pub attempt_log: Vec<AttemptLogEntry>,
}

/// Where a delivery stands (the `status` column and the answers' `status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeliveryStatus {
    /// Due now or later, or being attempted.
    Pending,
    /// A receiver answered 2xx.
    Delivered,
    /// Its retries are spent, its record is gone, or its endpoint was disabled.
    Failed,
}

impl DeliveryStatus {
    /// Every status.
    pub const ALL: [DeliveryStatus; 3] = [Self::Pending, Self::Delivered, Self::Failed];

    /// The status's wire text (`pending`, `delivered`, `failed`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Delivered => "delivered",
            Self::Failed => "failed",
        }
    }

    /// The status of its wire text, if any.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }
}

impl Serialize for DeliveryStatus {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// What a delivery listing asks for (already validated, see [`parse_statuses`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeliveryQuery {
    /// Only deliveries to this endpoint.
    pub endpoint_id: Option<EndpointId>,
    /// Empty: any status.
    pub statuses: Vec<DeliveryStatus>,
    /// Only deliveries of this kind of event.
    pub event: Option<EventKind>,
    /// Page size.
    pub limit: u16,
    /// The opaque cursor of the previous page's `nextCursor`.
    pub cursor: Option<String>,
}

/// What the store is asked for: `limit` rows after `after` (newest first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryFilter {
    /// Only deliveries to this endpoint.
    pub endpoint_id: Option<EndpointId>,
    /// Only deliveries in one of these statuses (empty: any).
    pub statuses: Vec<DeliveryStatus>,
    /// Only deliveries of this kind of event.
    pub event: Option<EventKind>,
    /// Rows after this position (newest first); `None` from the start.
    pub after: Option<Position>,
    /// How many rows.
    pub limit: u16,
}

/// `status`: a comma-separated, non-empty subset of `pending`, `delivered`, `failed`.
pub fn parse_statuses(s: &str) -> Result<Vec<DeliveryStatus>, ValueError> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let st = DeliveryStatus::parse(part).ok_or(ValueError::invalid(
            "status",
            "a comma-separated list of pending, delivered and failed",
        ))?;
        if !out.contains(&st) {
            out.push(st);
        }
    }
    Ok(out)
}

/// `event`: any kind a delivery may carry.
pub fn parse_event_filter(s: &str) -> Result<EventKind, ValueError> {
    static REASON: LazyLock<String> =
        LazyLock::new(|| format!("one of {}", EventKind::DELIVERED_NAMES));
    EventKind::parse_delivered(s).ok_or(ValueError::invalid("event", REASON.as_str()))
}

/// How far back `recover` reaches.
pub const RECOVER_WINDOW: time::Duration = time::Duration::days(7);

/// How many deliveries one `recover` call queues again at most (oldest first; calling again
/// continues).
pub const RECOVER_LIMIT: u32 = 1_000;

/// What a worker asks for when it claims due deliveries. Fairness is decided here, not by the
/// store: no endpoint gets more than its room, so one endpoint's backlog never takes every slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRequest {
    /// Deliveries due at or before this instant.
    pub now: OffsetDateTime,
    /// Claimed deliveries are leased to this worker until then; after it they are due again.
    pub lease_until: OffsetDateTime,
    /// Deliveries in all.
    pub limit: u32,
    /// Deliveries per endpoint, for endpoints not listed in `room`.
    pub per_endpoint: u32,
    /// Endpoints with less room than `per_endpoint`: busy in this worker, or backed off (0).
    pub room: Vec<(EndpointId, u32)>,
    /// Deliveries that already made this many attempts are not claimed: their budget is spent
    /// (a worker died during the last one) and [`DeliveryRepo::fail_exhausted`]
    /// ends them.
    pub max_attempts: u32,
}

/// Where the store held a claimed delivery's row when the claim took it, opaque to the domain (the
/// PostgreSQL store's tuple address): handed back with the attempt's outcome
/// ([`AttemptOutcome::row`]), it lets the store reach the row without searching for it. A hint
/// that no longer points at the row (the row moved) costs the store a search, never a wrong
/// write: the lease still fences the outcome. [`RowHint::NONE`] when the store keeps none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct RowHint(u64);

impl RowHint {
    /// No hint: the store searches for the row.
    pub const NONE: Self = Self(0);

    /// The hint a store made of its own address for the row.
    pub const fn new(raw: u64) -> Self {
        Self(raw)
    }

    /// What the store made it of.
    pub const fn get(self) -> u64 {
        self.0
    }
}

/// A claimed delivery with everything needed to send it. Claiming counts the attempt, so a
/// delivery whose worker keeps dying still ends after its budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedDelivery {
    /// The delivery.
    pub id: DeliveryId,
    /// Its endpoint.
    pub endpoint_id: EndpointId,
    /// The fencing token of this claim: an outcome is recorded only while the row still holds it.
    pub lease: Uuid,
    /// Where the store held the row when it claimed it, for the outcome.
    pub row: RowHint,
    /// The number of this attempt (1 for the first).
    pub attempt: u32,
    /// The event's own id (`X-Partner-Event-Id`): the same on every delivery of the event.
    pub event_id: EventId,
    /// The event it carries.
    pub event: Event,
    /// When the event happened (the body's `created_at`).
    pub event_created_at: OffsetDateTime,
    /// The endpoint's URL.
    pub url: String,
    /// The endpoint's current signing secret (`None`: unsigned).
    pub secret: Option<WebhookSecret>,
    /// The secret a rotation replaced, while its overlap lasts: deliveries carry both signatures.
    pub previous_secret: Option<WebhookSecret>,
    /// The endpoint's custom header, sent on every delivery.
    pub custom_header: Option<CustomHeader>,
    /// The version of the endpoint's row the claim read URL, secrets and header from: a worker
    /// that cannot tell from the store's announcements whether the endpoint changed since the
    /// claim asks whether this is still its version ([`super::ports::DeliveryRepo::endpoint_unchanged`]).
    pub endpoint_version: i64,
}

/// The `lastError` of a delivery whose stored event (its subject) cannot be read: it ends
/// `failed` at once, alone; the deliveries claimed with it are sent.
pub const SUBJECT_UNREADABLE: &str = "subject unreadable";

/// A claimed delivery whose stored event cannot be read: it is failed under its lease with
/// [`SUBJECT_UNREADABLE`], without a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnreadableDelivery {
    /// The delivery.
    pub id: DeliveryId,
    /// Its endpoint.
    pub endpoint_id: EndpointId,
    /// The fencing token of its claim.
    pub lease: Uuid,
    /// Where the store held the row when it claimed it, for the outcome.
    pub row: RowHint,
}

/// What one claim took: the deliveries ready to send, and those whose stored event cannot be
/// read (claimed all the same, so that each fails alone); and the records their events are about
/// that the store read along with the claim, if it reads any there.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClaimBatch {
    /// Deliveries to send.
    pub ready: Vec<ClaimedDelivery>,
    /// Deliveries to fail with [`SUBJECT_UNREADABLE`].
    pub unreadable: Vec<UnreadableDelivery>,
    /// Records of `ready`'s events read by the claim itself (a store may read some kinds there,
    /// saving [`DeliveryRepo::subjects`] a round trip: the PostgreSQL store reads the leads).
    pub subjects: Subjects,
    /// Which records the claim looked up, found or not: only the others are to be read with
    /// [`DeliveryRepo::subjects`].
    pub looked_up: SubjectIds,
}

impl ClaimBatch {
    /// How many deliveries were claimed in all.
    pub fn len(&self) -> usize {
        self.ready.len() + self.unreadable.len()
    }

    /// Whether nothing was claimed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// How an attempt ended, to be recorded under its claim's lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptOutcome {
    /// The delivery.
    pub id: DeliveryId,
    /// The fencing token of the claim the attempt was made under.
    pub lease: Uuid,
    /// The claim's [`ClaimedDelivery::row`], handed back to the store.
    pub row: RowHint,
    /// When the attempt ended.
    pub at: OffsetDateTime,
    /// The receiver's status, `None` when it did not answer.
    pub status_code: Option<u16>,
    /// A short reason (`timeout`, `status 500`…), never a URL, secret or receiver body.
    pub error: Option<String>,
    /// How long the request took; `None` when none was made (the event's record was gone).
    pub duration_ms: Option<u32>,
    /// What happens to the delivery next.
    pub next: NextStep,
}

/// The delivery body `{ id, event, created_at, data }`, serialized once: these exact bytes are
/// signed and sent.
pub fn delivery_body(
    id: DeliveryId,
    kind: EventKind,
    created_at: OffsetDateTime,
    data: serde_json::Value,
) -> Vec<u8> {
    #[derive(Serialize)]
    struct Body<'a> {
        id: DeliveryId,
        event: EventKind,
        created_at: String,
        data: &'a serde_json::Value,
    }
    serde_json::to_vec(&Body {
        id,
        event: kind,
        created_at: wire::format_timestamp(created_at),
        data: &data,
    })
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_and_event_filters() {
        assert_eq!(
            parse_statuses("failed,pending,failed"),
            Ok(vec![DeliveryStatus::Failed, DeliveryStatus::Pending])
        );
        for bad in ["", "done", "Pending", "pending,"] {
            assert!(parse_statuses(bad).is_err(), "{bad:?}");
        }
        for st in DeliveryStatus::ALL {
            assert_eq!(DeliveryStatus::parse(st.as_str()), Some(st));
        }
        assert_eq!(parse_event_filter("ping"), Ok(EventKind::Ping));
        assert_eq!(
            parse_event_filter("refund.created").map_err(|e| e.to_string()),
            Err(
                "event is invalid: one of lead.created, lead.enriched, order.created, \
                 payout.created or ping"
                    .into()
            )
        );
    }

    #[test]
    fn a_queued_delivery_is_pending_due_now_and_never_attempted() {
        let now = OffsetDateTime::UNIX_EPOCH;
        let d = DeliveryInfo::queued(
            DeliveryId::from_uuid(Uuid::nil()),
            EndpointId::from_uuid(Uuid::nil()),
            EventKind::Ping,
            now,
        );
        assert_eq!((d.status, d.attempts), (DeliveryStatus::Pending, 0));
        assert_eq!(d.next_attempt_at, Some(now));
        assert_eq!((d.last_attempt_at, d.delivered_at), (None, None));
    }
}
