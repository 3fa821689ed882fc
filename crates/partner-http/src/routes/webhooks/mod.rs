//! Webhook endpoints: `/api/v1/webhook-endpoints` for partners, and the same under
//! `/internal/v1/partners/{partnerId}/` for the operator, with the delivery log.

use actix_web::{HttpRequest, HttpResponse, http::StatusCode, web};
use partner_domain::account::NotFoundOr;
use partner_domain::kernel::ids::{DeliveryId, EndpointId};
use partner_domain::kernel::page::parse_limit;
use partner_domain::kernel::values::{PartnerId, ValueError};
use partner_domain::webhook::hourly;
use partner_domain::webhook::{
    CustomHeader, DeliveryQuery, EndpointError, EndpointPatch, LeadCreatedDelay, NewEndpoint,
    ShownEndpoint, WebhookService, parse_endpoint_url, parse_event_filter, parse_events,
    parse_statuses,
};
use serde::Deserialize;

use super::{PageBody, PageInfo, Result, data, ok, ok_true};
use crate::AppState;
use crate::error::ApiError;
use crate::extract::{JsonBody, Query, not_null, nullable, uuid};
use crate::middleware::{Caller, one_trip};
use crate::ratelimit::Group;

mod out;

use out::endpoints_out;
pub(crate) use out::{DeliveryDetailOut, DeliveryOut, EndpointOut};

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = CustomHeaderInput)]
#[serde(deny_unknown_fields)]
pub(super) struct HeaderBody {
    name: String,
    value: String,
}

fn header(h: HeaderBody) -> std::result::Result<CustomHeader, ValueError> {
    CustomHeader::parse(&h.name, &h.value)
}

fn delay(s: &str) -> std::result::Result<LeadCreatedDelay, ValueError> {
    LeadCreatedDelay::parse_field(s, "leadCreatedDelay")
}

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = WebhookEndpointCreate)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct CreateBody {
    /// An absolute https URL of a public host, at most 2,048 characters, without credentials.
    #[schema(max_length = 2048, pattern = r"^https://[^\s\x00-\x1f\x7f-\x9f]+$")]
    url: String,
    /// At least one event type.
    #[schema(value_type = Vec<crate::routes::schemas::EventType>, min_items = 1)]
    events: Vec<String>,
    #[schema(pattern = "^(1m|5m|1h)$")]
    lead_created_delay: Option<String>,
    custom_header: Option<HeaderBody>,
    #[serde(default)]
    secret: bool,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = WebhookEndpointPatch)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct PatchBody {
    #[serde(default, deserialize_with = "not_null")]
    #[schema(
        nullable = false,
        max_length = 2048,
        pattern = r"^https://[^\s\x00-\x1f\x7f-\x9f]+$"
    )]
    url: Option<String>,
    #[serde(default, deserialize_with = "not_null")]
    #[schema(value_type = Option<Vec<crate::routes::schemas::EventType>>, nullable = false, min_items = 1)]
    events: Option<Vec<String>>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>, pattern = "^(1m|5m|1h)$")]
    lead_created_delay: Option<Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    custom_header: Option<Option<HeaderBody>>,
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false)]
    secret: Option<bool>,
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false)]
    enabled: Option<bool>,
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false)]
    expire_previous: Option<bool>,
}

impl CreateBody {
    /// The endpoint to create; `allow_private` is the setting that lets a URL name a private
    /// address (tests and local receivers), which a `TryFrom` could not carry.
    fn parse(self, allow_private: bool) -> std::result::Result<NewEndpoint, ValueError> {
        Ok(NewEndpoint {
            url: parse_endpoint_url(&self.url, allow_private)?,
            events: parse_events(&self.events)?,
            lead_created_delay: self.lead_created_delay.as_deref().map(delay).transpose()?,
            custom_header: self.custom_header.map(header).transpose()?,
            secret: self.secret,
        })
    }
}

impl PatchBody {
    /// The change to make, parsed as [`CreateBody::parse`] parses the same fields.
    fn parse(self, allow_private: bool) -> std::result::Result<EndpointPatch, ValueError> {
        Ok(EndpointPatch {
            url: self
                .url
                .as_deref()
                .map(|u| parse_endpoint_url(u, allow_private))
                .transpose()?,
            events: self.events.as_deref().map(parse_events).transpose()?,
            lead_created_delay: self
                .lead_created_delay
                .map(|d| d.as_deref().map(delay).transpose())
                .transpose()?,
            custom_header: self
                .custom_header
                .map(|h| h.map(header).transpose())
                .transpose()?,
            secret: self.secret,
            enabled: self.enabled,
            expire_previous: self.expire_previous,
        })
    }
}

pub(super) async fn create(state: &AppState, partner: &PartnerId, b: CreateBody) -> Result {
    let new = b.parse(state.webhooks.allow_private())?;
    let created = state.webhooks.create(partner, new).await?;
    Ok(marked(
        &created,
        data(StatusCode::CREATED, EndpointOut::from(&created)),
    ))
}

pub(super) async fn update(
    state: &AppState,
    partner: &PartnerId,
    id: &str,
    b: PatchBody,
) -> Result {
    let id = EndpointId::from_uuid(uuid(id, "endpoint id")?);
    let patch = b.parse(state.webhooks.allow_private())?;
    let updated = state.webhooks.update(partner, id, patch).await?;
    Ok(marked(&updated, ok(EndpointOut::from(&updated))))
}

/// An answer showing the signing secret or the custom header's value is marked as shown once:
/// an idempotent replay of it is kept sealed for the token that asked (issue 23, N10).
fn marked(shown: &ShownEndpoint, res: HttpResponse) -> HttpResponse {
    if shown.secret().is_some() || shown.header_value().is_some() {
        crate::idempotency::shown_once(res)
    } else {
        res
    }
}

#[utoipa::path(
    get, path = "/api/v1/webhook-endpoints", tag = "webhooks",
    responses(
        (status = 200, description = "The endpoints", body = crate::routes::schemas::WebhookEndpointList),
    )
)]
pub(super) async fn list(req: HttpRequest) -> HttpResponse {
    // One round trip: the endpoints are read with the token's record ([`one_trip`] stands in
    // for the partner guard and keeps its answers).
    one_trip(
        &req,
        Group::WebhookEndpoints,
        None,
        async |st, token| Ok(st.webhooks.list_for_token(st.auth.key(&token)).await?),
        |st, _, endpoints| Ok(ok(endpoints_out(&st.webhooks.rows(endpoints)))),
    )
    .await
}

#[utoipa::path(
    post, path = "/api/v1/webhook-endpoints", tag = "webhooks", request_body = CreateBody,
    responses(
        (status = 201, description = "Created; `secret` is shown this once when requested", body = crate::routes::schemas::WebhookEndpointData),
        (status = 400, description = "A field is invalid, or the account has 10 endpoints already", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn post(
    state: web::Data<AppState>,
    Caller(me): Caller,
    JsonBody(b): JsonBody<CreateBody>,
) -> Result {
    create(&state, me.partner_id(), b).await
}

#[utoipa::path(
    patch, path = "/api/v1/webhook-endpoints/{id}", tag = "webhooks", request_body = PatchBody,
    params(
        ("id" = String, Path, description = "The endpoint's id (a UUID)", format = Uuid),
    ),
    responses(
        (status = 200, description = "Updated", body = crate::routes::schemas::WebhookEndpointData),
        (status = 400, description = "A field is invalid", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No such endpoint", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn patch(
    state: web::Data<AppState>,
    Caller(me): Caller,
    path: web::Path<String>,
    JsonBody(b): JsonBody<PatchBody>,
) -> Result {
    update(&state, me.partner_id(), &path, b).await
}

#[utoipa::path(
    delete, path = "/api/v1/webhook-endpoints/{id}", tag = "webhooks",
    params(
        ("id" = String, Path, description = "The endpoint's id (a UUID)", format = Uuid),
    ),
    responses(
        (status = 200, description = "Deleted", body = crate::routes::schemas::OkData),
        (status = 400, description = "`id` is not a UUID", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No such endpoint", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn delete(
    state: web::Data<AppState>,
    Caller(me): Caller,
    path: web::Path<String>,
) -> Result {
    let id = EndpointId::from_uuid(uuid(&path, "endpoint id")?);
    state.webhooks.delete(me.partner_id(), id).await?;
    Ok(ok_true())
}

/// The operator's calls name a partner that must exist.
pub(super) async fn known_partner(
    state: &AppState,
    raw: &str,
) -> std::result::Result<PartnerId, ApiError> {
    let p = PartnerId::parse(raw)?;
    match state.accounts.partner(&p).await {
        Ok(_) => Ok(p),
        Err(NotFoundOr::NotFound) => Err(ApiError::not_found("no partner with that partnerId")),
        Err(NotFoundOr::Repo(e)) => Err(e.into()),
    }
}

#[utoipa::path(
    get, path = "/internal/v1/partners/{partner_id}/webhook-endpoints", tag = "webhooks",
    params(
        ("partner_id" = String, Path, description = "The partner"),
    ),
    responses(
        (status = 200, description = "The endpoints", body = crate::routes::schemas::WebhookEndpointList),
        (status = 400, description = "`partner_id` is malformed", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No partner with that `partnerId`", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn internal_list(state: web::Data<AppState>, path: web::Path<String>) -> Result {
    let p = known_partner(&state, &path).await?;
    Ok(ok(endpoints_out(&state.webhooks.list(&p).await?)))
}

#[utoipa::path(
    post, path = "/internal/v1/partners/{partner_id}/webhook-endpoints", tag = "webhooks", request_body = CreateBody,
    params(
        ("partner_id" = String, Path, description = "The partner"),
    ),
    responses(
        (status = 201, description = "Created; `secret` is shown this once when requested", body = crate::routes::schemas::WebhookEndpointData),
        (status = 400, description = "A field is invalid, or the account has 10 endpoints already", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No partner with that `partnerId`", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn internal_create(
    state: web::Data<AppState>,
    path: web::Path<String>,
    JsonBody(b): JsonBody<CreateBody>,
) -> Result {
    // No statement before the URL's host is resolved: a keyed request's first statement claims
    // its key and holds a pooled connection to its end, which must not wait on a name server
    // (attack12). The insert answers an unknown partner itself (404, as `known_partner`).
    let p = PartnerId::parse(&path)?;
    create(&state, &p, b).await
}

#[utoipa::path(
    patch, path = "/internal/v1/partners/{partner_id}/webhook-endpoints/{id}", tag = "webhooks", request_body = PatchBody,
    params(
        ("partner_id" = String, Path, description = "The partner"),
        ("id" = String, Path, description = "The endpoint's id (a UUID)", format = Uuid),
    ),
    responses(
        (status = 200, description = "Updated", body = crate::routes::schemas::WebhookEndpointData),
        (status = 400, description = "A field is invalid", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No such endpoint, or no partner with that `partnerId`", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn internal_update(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    JsonBody(b): JsonBody<PatchBody>,
) -> Result {
    // As `internal_create`: the partner is looked up only once the update found no endpoint,
    // to tell which 404 it is.
    let p = PartnerId::parse(&path.0)?;
    let id = EndpointId::from_uuid(uuid(&path.1, "endpoint id")?);
    let patch = b.parse(state.webhooks.allow_private())?;
    match state.webhooks.update(&p, id, patch).await {
        Ok(updated) => Ok(marked(&updated, ok(EndpointOut::from(&updated)))),
        Err(EndpointError::NotFound) => {
            known_partner(&state, &path.0).await?;
            Err(EndpointError::NotFound.into())
        }
        Err(e) => Err(e.into()),
    }
}

#[utoipa::path(
    delete, path = "/internal/v1/partners/{partner_id}/webhook-endpoints/{id}", tag = "webhooks",
    params(
        ("partner_id" = String, Path, description = "The partner"),
        ("id" = String, Path, description = "The endpoint's id (a UUID)", format = Uuid),
    ),
    responses(
        (status = 200, description = "Deleted", body = crate::routes::schemas::OkData),
        (status = 400, description = "`id` is not a UUID", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No such endpoint, or no partner with that `partnerId`", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn internal_delete(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result {
    let p = known_partner(&state, &path.0).await?;
    let id = EndpointId::from_uuid(uuid(&path.1, "endpoint id")?);
    state.webhooks.delete(&p, id).await?;
    Ok(ok_true())
}

/// The listing's query: `endpointId`, `status` (comma-separated), `event`, `limit` (1-`max`,
/// default 50), `cursor`.
fn delivery_query(req: &HttpRequest, max: u16) -> std::result::Result<DeliveryQuery, ApiError> {
    let q = Query::of(req)?;
    Ok(DeliveryQuery {
        endpoint_id: q
            .get("endpointId")
            .map(|s| uuid(s, "endpointId").map(EndpointId::from_uuid))
            .transpose()?,
        statuses: q
            .get("status")
            .map(parse_statuses)
            .transpose()?
            .unwrap_or_default(),
        event: q.get("event").map(parse_event_filter).transpose()?,
        limit: parse_limit(q.get("limit"), 50, max)?,
        // An empty cursor is the first page, as if absent.
        cursor: q.get("cursor").filter(|c| !c.is_empty()).map(str::to_owned),
    })
}

pub(super) async fn list_deliveries(
    state: &AppState,
    partner: &PartnerId,
    q: DeliveryQuery,
) -> Result {
    let page = state.webhooks.deliveries(partner, &q).await?;
    Ok(HttpResponse::Ok().json(PageBody {
        data: page.items.iter().map(DeliveryOut::from).collect(),
        page: PageInfo {
            next_cursor: page.next_cursor,
            limit: page.limit,
        },
    }))
}

pub(super) async fn show_delivery(state: &AppState, partner: &PartnerId, id: &str) -> Result {
    let id = DeliveryId::from_uuid(uuid(id, "delivery id")?);
    let detail = state.webhooks.delivery(partner, id).await?;
    Ok(ok(DeliveryDetailOut::from(&detail)))
}

pub(super) async fn resend_delivery(state: &AppState, partner: &PartnerId, id: &str) -> Result {
    let id = DeliveryId::from_uuid(uuid(id, "delivery id")?);
    let d = state.webhooks.resend(partner, id).await?;
    Ok(data(StatusCode::ACCEPTED, DeliveryOut::from(&d)))
}

pub(super) async fn test_endpoint(state: &AppState, partner: &PartnerId, id: &str) -> Result {
    let id = EndpointId::from_uuid(uuid(id, "endpoint id")?);
    let d = state.webhooks.ping(partner, id).await?;
    Ok(data(StatusCode::ACCEPTED, DeliveryOut::from(&d)))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = WebhookRecover)]
#[serde(deny_unknown_fields)]
pub(super) struct RecoverBody {
    /// Within the last 7 days.
    #[schema(format = DateTime)]
    since: String,
}

pub(super) async fn recover_endpoint(
    state: &AppState,
    partner: &PartnerId,
    id: &str,
    b: RecoverBody,
) -> Result {
    let id = EndpointId::from_uuid(uuid(id, "endpoint id")?);
    let since = partner_domain::kernel::wire::parse_since_exact(&b.since)?;
    let r = state.webhooks.recover(partner, id, since).await?;
    Ok(data(
        StatusCode::ACCEPTED,
        serde_json::json!({ "requeued": r.requeued, "remaining": r.remaining }),
    ))
}

#[utoipa::path(
    get, path = "/api/v1/webhook-deliveries", tag = "webhooks",
    params(
        ("endpointId" = Option<String>, Query, description = "Only this endpoint's deliveries (a UUID)"),
        ("status" = Option<String>, Query, description = "Comma-separated subset of `pending`, `delivered`, `failed`"),
        ("event" = Option<String>, Query, description = "One event type"),
        ("cursor" = Option<String>, Query, description = "The `nextCursor` of the previous page, unchanged"),
        ("limit" = Option<u16>, Query, description = "1-200 (default 50)", minimum = 1, maximum = 200),
    ),
    responses(
        (status = 200, description = "A page of deliveries, newest first", body = crate::routes::schemas::WebhookDeliveryPage),
        (status = 400, description = "A parameter is invalid", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn deliveries(req: HttpRequest) -> HttpResponse {
    // One round trip: the page is read with the token's record. An invalid query looks the
    // token up alone and answers 400 after authentication and the rate limit, as behind the
    // guard; a cursor is verified for the authenticated partner before the page is used.
    match delivery_query(&req, 200) {
        Ok(q) => {
            let query = q.clone();
            one_trip(
                &req,
                Group::WebhookEndpoints,
                None,
                async move |st, token| {
                    Ok(st
                        .webhooks
                        .deliveries_for_token(st.auth.key(&token), &q)
                        .await?)
                },
                move |st, me, rows| {
                    let page = st
                        .webhooks
                        .finish_deliveries(me.partner_id(), &query, rows)?;
                    Ok(HttpResponse::Ok().json(PageBody {
                        data: page.items.iter().map(DeliveryOut::from).collect(),
                        page: PageInfo {
                            next_cursor: page.next_cursor,
                            limit: page.limit,
                        },
                    }))
                },
            )
            .await
        }
        Err(e) => super::refused_after_admission(&req, Group::WebhookEndpoints, e).await,
    }
}

#[utoipa::path(
    get, path = "/api/v1/webhook-deliveries/by-hour", tag = "webhooks",
    params(
        ("endpointId" = Option<String>, Query, description = "Only this endpoint's deliveries (a UUID)"),
    ),
    responses(
        (status = 200, description = "The last 24 hours (the current one last), each with how many of the deliveries created in it are delivered, failed and pending now", body = crate::routes::schemas::DeliveryHoursData),
        (status = 400, description = "`endpointId` is not a UUID", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn by_hour(req: HttpRequest) -> HttpResponse {
    // One round trip: the counts are read with the token's record; a malformed query looks the
    // token up alone and answers 400 after authentication, as behind the guard.
    let endpoint = Query::of(&req).and_then(|q| {
        q.get("endpointId")
            .map(|s| uuid(s, "endpointId").map(EndpointId::from_uuid))
            .transpose()
    });
    match endpoint {
        Ok(endpoint) => {
            one_trip(
                &req,
                Group::WebhookEndpoints,
                None,
                async move |st, token| {
                    let since = st.webhooks.hour_window();
                    let counts = st
                        .webhooks
                        .hourly_for_token(st.auth.key(&token), endpoint, since)
                        .await?;
                    Ok(counts.map(|c| (since, c)))
                },
                |_, _, (since, counts)| Ok(ok(hourly::by_hour(since, &counts))),
            )
            .await
        }
        Err(e) => super::refused_after_admission(&req, Group::WebhookEndpoints, e).await,
    }
}

#[utoipa::path(
    get, path = "/api/v1/webhook-deliveries/{id}", tag = "webhooks",
    params(
        ("id" = String, Path, description = "The delivery's id (a UUID)", format = Uuid),
    ),
    responses(
        (status = 200, description = "The delivery and its attempt log", body = crate::routes::schemas::WebhookDeliveryDetailData),
        (status = 400, description = "`id` is not a UUID", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No such delivery", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn delivery(req: HttpRequest, path: web::Path<String>) -> HttpResponse {
    // One round trip: the delivery and its log are read with the token's record. A malformed
    // id looks the token up alone and answers 400 after authentication, as behind the guard.
    match uuid(&path, "delivery id") {
        Ok(id) => {
            let id = DeliveryId::from_uuid(id);
            one_trip(
                &req,
                Group::WebhookEndpoints,
                None,
                async move |st, token| {
                    Ok(st
                        .webhooks
                        .delivery_for_token(st.auth.key(&token), id)
                        .await?)
                },
                |_, _, detail| {
                    let detail = WebhookService::found(detail)?;
                    Ok(ok(DeliveryDetailOut::from(&detail)))
                },
            )
            .await
        }
        Err(e) => super::refused_after_admission(&req, Group::WebhookEndpoints, e).await,
    }
}

#[utoipa::path(
    post, path = "/api/v1/webhook-deliveries/{id}/resend", tag = "webhooks",
    params(
        ("id" = String, Path, description = "The delivery's id (a UUID)", format = Uuid),
    ),
    responses(
        (status = 202, description = "The delivery was queued again", body = crate::routes::schemas::WebhookDeliveryData),
        (status = 400, description = "`id` is not a UUID, or the endpoint is disabled", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No such delivery", body = crate::routes::schemas::ErrorBody),
        (status = 429, description = "Over the budget of 20 webhook actions (test, resend, recover) per minute", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn resend(
    state: web::Data<AppState>,
    Caller(me): Caller,
    path: web::Path<String>,
) -> Result {
    state.webhooks.spend_action(me.partner_id()).await?;
    resend_delivery(&state, me.partner_id(), &path).await
}

#[utoipa::path(
    post, path = "/api/v1/webhook-endpoints/{id}/test", tag = "webhooks",
    params(
        ("id" = String, Path, description = "The endpoint's id (a UUID)", format = Uuid),
    ),
    responses(
        (status = 202, description = "A `ping` delivery was queued", body = crate::routes::schemas::WebhookDeliveryData),
        (status = 400, description = "`id` is not a UUID, or the endpoint is disabled", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No such endpoint", body = crate::routes::schemas::ErrorBody),
        (status = 429, description = "Over the budget of 20 webhook actions (test, resend, recover) per minute", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn test(
    state: web::Data<AppState>,
    Caller(me): Caller,
    path: web::Path<String>,
) -> Result {
    state.webhooks.spend_action(me.partner_id()).await?;
    test_endpoint(&state, me.partner_id(), &path).await
}

#[utoipa::path(
    post, path = "/api/v1/webhook-endpoints/{id}/recover", tag = "webhooks", request_body = RecoverBody,
    params(
        ("id" = String, Path, description = "The endpoint's id (a UUID)", format = Uuid),
    ),
    responses(
        (status = 202, description = "Failed deliveries since `since` were queued again, at most 1,000, oldest first; `remaining` more match", body = crate::routes::schemas::RequeuedData),
        (status = 400, description = "`since` is invalid or out of range, or the endpoint is disabled", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No such endpoint", body = crate::routes::schemas::ErrorBody),
        (status = 429, description = "Over the budget of 20 webhook actions (test, resend, recover) per minute", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn recover(
    state: web::Data<AppState>,
    Caller(me): Caller,
    path: web::Path<String>,
    b: std::result::Result<JsonBody<RecoverBody>, ApiError>,
) -> Result {
    // Spent before the body is judged: a call answered 400 counts too.
    state.webhooks.spend_action(me.partner_id()).await?;
    recover_endpoint(&state, me.partner_id(), &path, b?.0).await
}

/// The operator's log keeps its documented `?limit=` of up to 500.
#[utoipa::path(
    get, path = "/internal/v1/partners/{partner_id}/webhook-deliveries", tag = "webhooks",
    params(
        ("partner_id" = String, Path, description = "The partner"),
        ("endpointId" = Option<String>, Query, description = "Only this endpoint's deliveries (a UUID)"),
        ("status" = Option<String>, Query, description = "Comma-separated subset of `pending`, `delivered`, `failed`"),
        ("event" = Option<String>, Query, description = "One event type"),
        ("cursor" = Option<String>, Query, description = "The `nextCursor` of the previous page, unchanged"),
        ("limit" = Option<u16>, Query, description = "1-500 (default 50)", minimum = 1, maximum = 500),
    ),
    responses(
        (status = 200, description = "A page of deliveries, newest first", body = crate::routes::schemas::WebhookDeliveryPage),
        (status = 400, description = "A parameter is invalid", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No partner with that `partnerId`", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn internal_deliveries(
    state: web::Data<AppState>,
    path: web::Path<String>,
    req: HttpRequest,
) -> Result {
    let p = known_partner(&state, &path).await?;
    let q = delivery_query(&req, 500)?;
    list_deliveries(&state, &p, q).await
}

#[utoipa::path(
    get, path = "/internal/v1/partners/{partner_id}/webhook-deliveries/{id}", tag = "webhooks",
    params(
        ("partner_id" = String, Path, description = "The partner"),
        ("id" = String, Path, description = "The delivery's id (a UUID)", format = Uuid),
    ),
    responses(
        (status = 200, description = "The delivery and its attempt log", body = crate::routes::schemas::WebhookDeliveryDetailData),
        (status = 400, description = "`id` is not a UUID", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No such delivery, or no partner with that `partnerId`", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn internal_delivery(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result {
    let p = known_partner(&state, &path.0).await?;
    show_delivery(&state, &p, &path.1).await
}

#[utoipa::path(
    post, path = "/internal/v1/partners/{partner_id}/webhook-deliveries/{id}/resend", tag = "webhooks",
    params(
        ("partner_id" = String, Path, description = "The partner"),
        ("id" = String, Path, description = "The delivery's id (a UUID)", format = Uuid),
    ),
    responses(
        (status = 202, description = "The delivery was queued again", body = crate::routes::schemas::WebhookDeliveryData),
        (status = 400, description = "`id` is not a UUID, or the endpoint is disabled", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No such delivery, or no partner with that `partnerId`", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn internal_resend(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result {
    let p = known_partner(&state, &path.0).await?;
    resend_delivery(&state, &p, &path.1).await
}

#[utoipa::path(
    post, path = "/internal/v1/partners/{partner_id}/webhook-endpoints/{id}/test", tag = "webhooks",
    params(
        ("partner_id" = String, Path, description = "The partner"),
        ("id" = String, Path, description = "The endpoint's id (a UUID)", format = Uuid),
    ),
    responses(
        (status = 202, description = "A `ping` delivery was queued", body = crate::routes::schemas::WebhookDeliveryData),
        (status = 400, description = "`id` is not a UUID, or the endpoint is disabled", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No such endpoint, or no partner with that `partnerId`", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn internal_test(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result {
    let p = known_partner(&state, &path.0).await?;
    test_endpoint(&state, &p, &path.1).await
}

#[utoipa::path(
    post, path = "/internal/v1/partners/{partner_id}/webhook-endpoints/{id}/recover", tag = "webhooks", request_body = RecoverBody,
    params(
        ("partner_id" = String, Path, description = "The partner"),
        ("id" = String, Path, description = "The endpoint's id (a UUID)", format = Uuid),
    ),
    responses(
        (status = 202, description = "Failed deliveries since `since` were queued again, at most 1,000, oldest first; `remaining` more match", body = crate::routes::schemas::RequeuedData),
        (status = 400, description = "`since` is invalid or out of range, or the endpoint is disabled", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No such endpoint, or no partner with that `partnerId`", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn internal_recover(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    JsonBody(b): JsonBody<RecoverBody>,
) -> Result {
    let p = known_partner(&state, &path.0).await?;
    recover_endpoint(&state, &p, &path.1, b).await
}
