//! Webhook endpoints and their delivery log.

#![allow(dead_code)]

use utoipa::ToSchema;

#[allow(unused_imports)]
use super::*;
use crate::routes::webhooks::EndpointOut;

#[derive(ToSchema)]
pub(crate) struct WebhookEndpointList {
    data: Vec<EndpointOut<'static>>,
}

#[derive(ToSchema)]
pub(crate) struct WebhookEndpointData {
    data: EndpointOut<'static>,
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
