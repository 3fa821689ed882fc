//! The events feed (extensions.md §8.1): `GET /api/v1/events` and `GET /api/v1/events/{id}`.

use actix_web::{HttpRequest, HttpResponse, web};
use partner_domain::kernel::ids::EventId;
use partner_domain::kernel::page::parse_limit;
use partner_domain::kernel::wire;
use partner_domain::webhook::feed::{FEED_DEFAULT_LIMIT, FEED_MAX_LIMIT, parse_types};
use partner_domain::webhook::{EventFeed, FeedEvent, FeedQuery, FeedRead};
use serde::Serialize;

use super::webhook_data::DataOut;
use super::{PageBody, PageInfo, ok};
use crate::error::ApiError;
use crate::extract::{Query, uuid};
use crate::middleware::{PORTAL_SCOPE, Requirement, one_trip};
use crate::ratelimit::Group;
use partner_domain::account::auth::Principal;

/// An event as the feed shows it: a webhook body, with the event's own id.
#[derive(Serialize)]
pub(crate) struct EventOut<'a> {
    id: EventId,
    event: partner_domain::events::EventKind,
    created_at: String,
    /// The webhook's `data`, from the record as it is now; `null` when the record is gone.
    /// Written straight into the answer (`WebhookData`, for deliveries, builds a
    /// `serde_json::Value` first, a tree of 10-20 allocations an event, for the signer).
    data: Option<DataOut<'a>>,
}

impl<'a> EventOut<'a> {
    fn of(e: &'a FeedEvent, read: &'a FeedRead) -> Self {
        Self {
            id: e.id,
            event: e.event.kind(),
            created_at: wire::format_timestamp(e.created_at),
            data: e.payload(&read.subjects).as_ref().map(DataOut::from),
        }
    }
}

fn feed_query(req: &HttpRequest) -> Result<FeedQuery, ApiError> {
    let q = Query::of(req)?;
    Ok(FeedQuery {
        types: q
            .get("types")
            .map(parse_types)
            .transpose()?
            .unwrap_or_default(),
        since: q.get("since").map(wire::parse_since).transpose()?,
        limit: parse_limit(q.get("limit"), FEED_DEFAULT_LIMIT, FEED_MAX_LIMIT)?,
        // An empty cursor is the start of the feed, as if absent.
        cursor: q.get("cursor").filter(|c| !c.is_empty()).map(str::to_owned),
    })
}

/// The feed is not a webhook call of §1-§3: a portal session may not read it (extensions §10).
const NOT_PORTAL: Option<Requirement> = Some(Requirement {
    holds: Principal::not_portal,
    message: PORTAL_SCOPE,
});

#[utoipa::path(
    get, path = "/api/v1/events", tag = "events",
    params(
        ("types" = Option<String>, Query, description = "Comma-separated subset of `lead.created`, `lead.enriched`, `order.created`, `payout.created`"),
        ("since" = Option<String>, Query, description = "Only events created at or after this timestamp (ISO 8601); older than the retention: 410"),
        ("cursor" = Option<String>, Query, description = "The `nextCursor` of a previous page, unchanged"),
        ("limit" = Option<u16>, Query, description = "1-200 (default 50)", minimum = 1, maximum = 200),
    ),
    responses(
        (status = 200, description = "A page of events, oldest first; `nextCursor` is never null", body = crate::routes::schemas::EventPage),
        (status = 400, description = "A parameter is invalid, or the cursor is not one this partner was given", body = crate::routes::schemas::ErrorBody),
        (status = 410, description = "`cursor_expired`: events after the cursor (or since `since`) were removed by retention; resynchronise from the listings", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn list(req: HttpRequest) -> HttpResponse {
    // One round trip for the token and the page (two when the page has events: their records).
    // An invalid query looks the token up alone and answers 400 after authentication and the
    // rate limit; a cursor is verified for the authenticated partner before the page is used.
    match feed_query(&req) {
        Ok(q) => {
            let query = q.clone();
            one_trip(
                &req,
                Group::WebhookEndpoints,
                NOT_PORTAL,
                async move |st, token| Ok(st.feed.read_for_token(st.auth.key(&token), &q).await?),
                move |st, me, read| {
                    let page = st.feed.finish(me.partner_id(), &query, read)?;
                    Ok(HttpResponse::Ok().json(PageBody {
                        data: page
                            .read
                            .events
                            .iter()
                            .map(|e| EventOut::of(e, &page.read))
                            .collect(),
                        page: PageInfo {
                            next_cursor: Some(page.next_cursor),
                            limit: page.limit,
                        },
                    }))
                },
            )
            .await
        }
        Err(e) => {
            super::refused_after_admission_requiring(&req, Group::WebhookEndpoints, NOT_PORTAL, e)
                .await
        }
    }
}

#[utoipa::path(
    get, path = "/api/v1/events/{id}", tag = "events",
    params(
        ("id" = String, Path, description = "The event's id (a UUID)", format = Uuid),
    ),
    responses(
        (status = 200, description = "The event", body = crate::routes::schemas::EventData),
        (status = 400, description = "`id` is not a UUID", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No such event", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn show(req: HttpRequest, path: web::Path<String>) -> HttpResponse {
    match uuid(&path, "event id") {
        Ok(id) => {
            let id = EventId::from_uuid(id);
            one_trip(
                &req,
                Group::WebhookEndpoints,
                NOT_PORTAL,
                async move |st, token| Ok(st.feed.event_for_token(st.auth.key(&token), id).await?),
                |_, _, read| {
                    let read = EventFeed::found(read)?;
                    match read.events.first() {
                        Some(e) => Ok(ok(EventOut::of(e, &read))),
                        None => Err(ApiError::not_found("no such event")),
                    }
                },
            )
            .await
        }
        Err(e) => {
            super::refused_after_admission_requiring(&req, Group::WebhookEndpoints, NOT_PORTAL, e)
                .await
        }
    }
}
