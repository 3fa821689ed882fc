//! Webhook endpoints and their delivery log.

#![allow(dead_code)]

use utoipa::ToSchema;

#[allow(unused_imports)]
use super::*;
use crate::routes::webhooks::{DeliveryDetailOut, DeliveryOut, EndpointOut};

#[derive(ToSchema)]
pub(crate) struct WebhookEndpointList {
    data: Vec<EndpointOut<'static>>,
}

#[derive(ToSchema)]
pub(crate) struct WebhookEndpointData {
    data: EndpointOut<'static>,
}

#[derive(ToSchema)]
pub(crate) struct WebhookDeliveryPage {
    data: Vec<DeliveryOut<'static>>,
    page: PageInfoDoc,
}

#[derive(ToSchema)]
pub(crate) struct WebhookDeliveryData {
    data: DeliveryOut<'static>,
}

#[derive(ToSchema)]
pub(crate) struct WebhookDeliveryDetailData {
    data: DeliveryDetailOut<'static>,
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

#[derive(ToSchema)]
pub(crate) struct PortalLinkData {
    data: crate::routes::portal::LinkOut,
}

#[derive(ToSchema)]
pub(crate) struct PortalSessionData {
    data: crate::routes::portal::SessionOut,
}

/// One hour of deliveries.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DeliveryHour {
    /// The start of the hour (UTC).
    #[schema(format = DateTime)]
    hour: String,
    delivered: u32,
    failed: u32,
    pending: u32,
}

#[derive(ToSchema)]
pub(crate) struct DeliveryHoursData {
    /// 24 hours, oldest first.
    data: Vec<DeliveryHour>,
}
