//! The answers of the webhook routes: endpoints as partners see them, and the delivery log.

use partner_domain::events::EventKind;
use partner_domain::kernel::ids::{DeliveryId, EndpointId};
use partner_domain::kernel::wire;
use partner_domain::webhook::{
    AttemptLogEntry, DeliveryDetail, DeliveryInfo, DeliveryStatus, DisabledReason,
    LeadCreatedDelay, ShownEndpoint,
};
use serde::Serialize;
use time::OffsetDateTime;

/// A webhook endpoint as partners see it: never its secret, except `secret` in the answer that
/// generated it.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = WebhookEndpoint, example = json!({
    "id": "c1d2e3f4-a5b6-4c7d-8e9f-0a1b2c3d4e5f", "url": "https://hooks.example.com/partner",
    "events": ["lead.created", "order.created"], "leadCreatedDelay": null, "customHeader": null,
    "hasSecret": true, "createdAt": "2026-11-21T10:00:00.000Z", "status": "enabled",
    "disabledReason": null, "disabledAt": null, "previousSecretExpiresAt": null
}))]
pub(crate) struct EndpointOut<'a> {
    #[schema(value_type = String, format = Uuid)]
    id: EndpointId,
    url: &'a str,
    #[schema(value_type = Vec<crate::routes::schemas::EventType>)]
    events: &'a [EventKind],
    #[schema(value_type = Option<String>, pattern = "^(1m|5m|1h)$", required = true)]
    lead_created_delay: Option<LeadCreatedDelay>,
    #[schema(required = true)]
    custom_header: Option<CustomHeaderOut<'a>>,
    has_secret: bool,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String, format = DateTime)]
    created_at: OffsetDateTime,
    #[schema(pattern = "^(enabled|disabled)$")]
    status: &'static str,
    #[schema(value_type = Option<String>, pattern = "^(gone|failing)$", required = true)]
    disabled_reason: Option<DisabledReason>,
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>, format = DateTime, required = true)]
    disabled_at: Option<OffsetDateTime>,
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>, format = DateTime, required = true)]
    previous_secret_expires_at: Option<OffsetDateTime>,
    /// Present only in the answer that generated it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, nullable = false, required = false)]
    secret: Option<&'a str>,
}

/// An endpoint's custom header. Its value is write-only: only the answer to the request that set
/// it carries `value`; every other answer carries `valueHint` instead.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = CustomHeader)]
pub(crate) struct CustomHeaderOut<'a> {
    name: &'a str,
    /// The value, in the answer to the `POST` or `PATCH` that set it only.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, nullable = false, required = false)]
    value: Option<&'a str>,
    /// `…` and the value's last 4 characters (`…` alone when it has 8 or fewer), in every
    /// other answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, nullable = false, required = false)]
    value_hint: Option<String>,
}

impl<'a> From<&'a ShownEndpoint> for EndpointOut<'a> {
    fn from(s: &'a ShownEndpoint) -> Self {
        let e = &s.endpoint;
        Self {
            id: e.id(),
            url: e.url(),
            events: e.events(),
            lead_created_delay: e.lead_created_delay(),
            custom_header: e.custom_header().map(|h| match s.header_value() {
                Some(value) => CustomHeaderOut {
                    name: h.name(),
                    value: Some(value),
                    value_hint: None,
                },
                None => CustomHeaderOut {
                    name: h.name(),
                    value: None,
                    value_hint: Some(h.value_hint()),
                },
            }),
            has_secret: e.secret().is_some(),
            created_at: e.created_at(),
            status: if s.is_enabled() {
                "enabled"
            } else {
                "disabled"
            },
            disabled_reason: e.disabled_reason(),
            disabled_at: e.disabled_at(),
            previous_secret_expires_at: s.previous_secret_expires_at(),
            secret: s.secret(),
        }
    }
}

pub(super) fn endpoints_out(shown: &[ShownEndpoint]) -> Vec<EndpointOut<'_>> {
    shown.iter().map(EndpointOut::from).collect()
}

/// `WebhookDelivery`.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = WebhookDelivery)]
pub(crate) struct DeliveryOut<'a> {
    #[schema(value_type = String, format = Uuid)]
    id: DeliveryId,
    #[schema(value_type = String, format = Uuid)]
    endpoint_id: EndpointId,
    #[schema(value_type = String)]
    event: EventKind,
    #[schema(value_type = String, pattern = "^(pending|delivered|failed)$")]
    status: DeliveryStatus,
    attempts: i32,
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>, format = DateTime, required = true)]
    next_attempt_at: Option<OffsetDateTime>,
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>, format = DateTime, required = true)]
    last_attempt_at: Option<OffsetDateTime>,
    #[schema(required = true)]
    last_status_code: Option<i32>,
    #[schema(value_type = Option<String>, required = true)]
    last_error: Option<&'a str>,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String, format = DateTime)]
    created_at: OffsetDateTime,
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>, format = DateTime, required = true)]
    delivered_at: Option<OffsetDateTime>,
}

impl<'a> From<&'a DeliveryInfo> for DeliveryOut<'a> {
    fn from(d: &'a DeliveryInfo) -> Self {
        Self {
            id: d.id,
            endpoint_id: d.endpoint_id,
            event: d.event,
            status: d.status,
            attempts: d.attempts,
            next_attempt_at: d.next_attempt_at,
            last_attempt_at: d.last_attempt_at,
            last_status_code: d.last_status_code,
            last_error: d.last_error.as_deref(),
            created_at: d.created_at,
            delivered_at: d.delivered_at,
        }
    }
}

// One attempt of a delivery, as its log shows it.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = AttemptLogEntry)]
pub(crate) struct AttemptOut<'a> {
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String, format = DateTime)]
    attempted_at: OffsetDateTime,
    #[schema(required = true)]
    status_code: Option<i32>,
    #[schema(required = true)]
    duration_ms: Option<i32>,
    #[schema(value_type = Option<String>, required = true)]
    error: Option<&'a str>,
}

impl<'a> From<&'a AttemptLogEntry> for AttemptOut<'a> {
    fn from(a: &'a AttemptLogEntry) -> Self {
        Self {
            attempted_at: a.attempted_at,
            status_code: a.status_code,
            duration_ms: a.duration_ms,
            error: a.error.as_deref(),
        }
    }
}

/// A delivery with its last attempts, oldest first.
// The fields of `DeliveryOut` written out rather than `#[serde(flatten)]`ed: the document
// describes this answer as one flat object (a flatten would make it an `allOf`), and a test
// holds the two to the same fields.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = WebhookDeliveryDetail)]
pub(crate) struct DeliveryDetailOut<'a> {
    #[schema(value_type = String, format = Uuid)]
    id: DeliveryId,
    #[schema(value_type = String, format = Uuid)]
    endpoint_id: EndpointId,
    #[schema(value_type = String)]
    event: EventKind,
    #[schema(value_type = String, pattern = "^(pending|delivered|failed)$")]
    status: DeliveryStatus,
    attempts: i32,
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>, format = DateTime, required = true)]
    next_attempt_at: Option<OffsetDateTime>,
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>, format = DateTime, required = true)]
    last_attempt_at: Option<OffsetDateTime>,
    #[schema(required = true)]
    last_status_code: Option<i32>,
    #[schema(value_type = Option<String>, required = true)]
    last_error: Option<&'a str>,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String, format = DateTime)]
    created_at: OffsetDateTime,
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>, format = DateTime, required = true)]
    delivered_at: Option<OffsetDateTime>,
    attempt_log: Vec<AttemptOut<'a>>,
}

impl<'a> From<&'a DeliveryDetail> for DeliveryDetailOut<'a> {
    fn from(detail: &'a DeliveryDetail) -> Self {
        let d = &detail.delivery;
        Self {
            id: d.id,
            endpoint_id: d.endpoint_id,
            event: d.event,
            status: d.status,
            attempts: d.attempts,
            next_attempt_at: d.next_attempt_at,
            last_attempt_at: d.last_attempt_at,
            last_status_code: d.last_status_code,
            last_error: d.last_error.as_deref(),
            created_at: d.created_at,
            delivered_at: d.delivered_at,
            attempt_log: detail.attempt_log.iter().map(AttemptOut::from).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]

    use uuid::Uuid;

    use super::*;

    #[test]
    fn a_queued_delivery_renders_as_the_log_shows_it() {
        let d = DeliveryInfo::queued(
            DeliveryId::from_uuid(Uuid::nil()),
            EndpointId::from_uuid(Uuid::nil()),
            EventKind::Ping,
            OffsetDateTime::UNIX_EPOCH,
        );
        let v = serde_json::to_value(DeliveryOut::from(&d)).expect("json");
        assert_eq!(v["status"], "pending");
        assert_eq!(v["event"], "ping");
        assert_eq!(v["attempts"], 0);
        assert_eq!(v["nextAttemptAt"], v["createdAt"]);
        assert!(v["lastAttemptAt"].is_null() && v["deliveredAt"].is_null());
        let detail = DeliveryDetail {
            delivery: d,
            attempt_log: vec![],
        };
        let shown = serde_json::to_string(&DeliveryDetailOut::from(&detail)).expect("json");
        let delivery = serde_json::to_string(&DeliveryOut::from(&detail.delivery)).expect("json");
        assert_eq!(
            shown,
            format!(
                "{},\"attemptLog\":[]}}",
                delivery.strip_suffix('}').expect("an object")
            ),
            "the detail is the delivery's fields, in the same order, and its log"
        );
    }
}
