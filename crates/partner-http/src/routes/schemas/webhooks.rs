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

/// The kinds of event in the events feed: those an endpoint subscribes to, from the domain's one
/// declaration ([`partner_domain::events::EventKind::SUBSCRIBABLE`]; never `ping`).
pub(crate) struct FeedEventType;

impl utoipa::PartialSchema for FeedEventType {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .description(Some("The event types of the events feed."))
            .enum_values(Some(
                partner_domain::events::EventKind::SUBSCRIBABLE
                    .map(partner_domain::events::EventKind::as_str),
            ))
            .into()
    }
}

impl ToSchema for FeedEventType {}

/// An event of the feed: the body its webhooks carry, with the event's own `id` (every delivery
/// of it carries that id in `X-Partner-Event-Id`).
#[derive(ToSchema)]
#[schema(as = Event)]
pub(crate) struct EventDoc {
    #[schema(format = Uuid)]
    id: String,
    event: FeedEventType,
    #[schema(format = DateTime, example = "2026-11-21T10:00:00.000Z")]
    created_at: String,
    /// The webhook's `data` for this event, built from the record as it is now; `null` when the
    /// record no longer exists.
    #[schema(value_type = Option<Object>)]
    data: Option<serde_json::Value>,
}

/// `page` of the events feed: `nextCursor` is never null (after the last event returned; the
/// cursor given when the page is empty; without one, the current end of the feed).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FeedPageInfo {
    #[schema(example = "e1000000000000034a0000000000000007a1b2c3d4e5f60718293a4b5c6d7e8f90")]
    next_cursor: String,
    #[schema(minimum = 1, maximum = 200, example = 50)]
    limit: u16,
}

#[derive(ToSchema)]
pub(crate) struct EventPage {
    data: Vec<EventDoc>,
    page: FeedPageInfo,
}

#[derive(ToSchema)]
pub(crate) struct EventData {
    data: EventDoc,
}
