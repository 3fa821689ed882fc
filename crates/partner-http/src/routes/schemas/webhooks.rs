//! Webhook endpoints and their delivery log.

#![allow(dead_code)]

use utoipa::ToSchema;

#[allow(unused_imports)]
use super::*;

#[derive(ToSchema)]
pub(crate) struct CustomHeader {
    name: String,
    value: String,
}

/// A webhook endpoint as partners see it: never its secret, except `secret` in the answer that
/// generated it.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({
    "id": "c1d2e3f4-a5b6-4c7d-8e9f-0a1b2c3d4e5f", "url": "https://hooks.example.com/partner",
    "events": ["lead.created", "order.created"], "leadCreatedDelay": null, "customHeader": null,
    "hasSecret": true, "createdAt": "2026-11-21T10:00:00.000Z", "status": "enabled",
    "disabledReason": null, "disabledAt": null, "previousSecretExpiresAt": null
}))]
pub(crate) struct WebhookEndpoint {
    #[schema(format = Uuid)]
    id: String,
    url: String,
    events: Vec<EventType>,
    #[schema(value_type = Option<String>, pattern = "^(1m|5m|1h)$", required = true)]
    lead_created_delay: Option<String>,
    #[schema(required = true)]
    custom_header: Option<CustomHeader>,
    has_secret: bool,
    #[schema(format = DateTime)]
    created_at: String,
    #[schema(pattern = "^(enabled|disabled)$")]
    status: String,
    #[schema(value_type = Option<String>, pattern = "^(gone|failing)$", required = true)]
    disabled_reason: Option<String>,
    #[schema(format = DateTime, required = true)]
    disabled_at: Option<String>,
    #[schema(format = DateTime, required = true)]
    previous_secret_expires_at: Option<String>,
    /// Present only in the answer that generated it.
    #[schema(nullable = false, required = false)]
    secret: Option<String>,
}

#[derive(ToSchema)]
pub(crate) struct WebhookEndpointList {
    data: Vec<WebhookEndpoint>,
}

#[derive(ToSchema)]
pub(crate) struct WebhookEndpointData {
    data: WebhookEndpoint,
}

/// `WebhookDelivery`.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WebhookDelivery {
    #[schema(format = Uuid)]
    id: String,
    #[schema(format = Uuid)]
    endpoint_id: String,
    event: String,
    #[schema(pattern = "^(pending|delivered|failed)$")]
    status: String,
    attempts: i32,
    #[schema(format = DateTime, required = true)]
    next_attempt_at: Option<String>,
    #[schema(format = DateTime, required = true)]
    last_attempt_at: Option<String>,
    #[schema(required = true)]
    last_status_code: Option<i32>,
    #[schema(required = true)]
    last_error: Option<String>,
    #[schema(format = DateTime)]
    created_at: String,
    #[schema(format = DateTime, required = true)]
    delivered_at: Option<String>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AttemptLogEntry {
    #[schema(format = DateTime)]
    attempted_at: String,
    #[schema(required = true)]
    status_code: Option<i32>,
    #[schema(required = true)]
    duration_ms: Option<i32>,
    #[schema(required = true)]
    error: Option<String>,
}

/// A delivery with its last attempts, oldest first.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WebhookDeliveryDetail {
    #[schema(format = Uuid)]
    id: String,
    #[schema(format = Uuid)]
    endpoint_id: String,
    event: String,
    #[schema(pattern = "^(pending|delivered|failed)$")]
    status: String,
    attempts: i32,
    #[schema(format = DateTime, required = true)]
    next_attempt_at: Option<String>,
    #[schema(format = DateTime, required = true)]
    last_attempt_at: Option<String>,
    #[schema(required = true)]
    last_status_code: Option<i32>,
    #[schema(required = true)]
    last_error: Option<String>,
    #[schema(format = DateTime)]
    created_at: String,
    #[schema(format = DateTime, required = true)]
    delivered_at: Option<String>,
    attempt_log: Vec<AttemptLogEntry>,
}

#[derive(ToSchema)]
pub(crate) struct WebhookDeliveryPage {
    data: Vec<WebhookDelivery>,
    page: PageInfoDoc,
}

#[derive(ToSchema)]
pub(crate) struct WebhookDeliveryData {
    data: WebhookDelivery,
}

#[derive(ToSchema)]
pub(crate) struct WebhookDeliveryDetailData {
    data: WebhookDeliveryDetail,
}

#[derive(ToSchema)]
pub(crate) struct Requeued {
    /// Deliveries queued again by this call (at most 1,000, oldest first).
    requeued: u64,
    /// How many more match: calling again continues.
    remaining: u64,
}

#[derive(ToSchema)]
pub(crate) struct RequeuedData {
    data: Requeued,
}
