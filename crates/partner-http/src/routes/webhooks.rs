//! Webhook endpoints: `/api/v1/webhook-endpoints` for partners, and the same under
//! `/internal/v1/partners/{partnerId}/` for the operator, with the delivery log.

use actix_web::{HttpRequest, http::StatusCode, web};
use partner_domain::account::NotFoundOr;
use partner_domain::lead::parse_limit;
use partner_domain::values::PartnerId;
use partner_domain::webhook::{
    CustomHeader, EndpointError, EndpointPatch, LeadCreatedDelay, NewEndpoint, parse_endpoint_url,
    parse_events,
};
use serde::Deserialize;

use super::{Result, data, ok, ok_true, resource};
use crate::AppState;
use crate::error::ApiError;
use crate::extract::{JsonBody, Query, nullable, uuid};
use crate::middleware::Caller;

pub(super) fn configure_internal(cfg: &mut web::ServiceConfig) {
    cfg.service(
        resource("/partners/{partner_id}/webhook-endpoints")
            .route(web::get().to(internal_list))
            .route(web::post().to(internal_create)),
    )
    .service(
        resource("/partners/{partner_id}/webhook-endpoints/{id}")
            .route(web::patch().to(internal_update))
            .route(web::delete().to(internal_delete)),
    )
    .service(
        resource("/partners/{partner_id}/webhook-deliveries").route(web::get().to(deliveries)),
    );
}

fn endpoint_error(e: EndpointError) -> ApiError {
    match e {
        EndpointError::TooMany => {
            ApiError::invalid("an account may have at most 10 webhook endpoints")
        }
        EndpointError::InternalAddress => {
            ApiError::invalid("url must not resolve to a loopback, private or internal address")
        }
        EndpointError::NotFound => ApiError::not_found("no such webhook endpoint"),
        EndpointError::UnknownPartner => ApiError::not_found("no partner with that partnerId"),
        EndpointError::Repo(e) => e.into(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HeaderBody {
    name: String,
    value: String,
}

fn header(h: HeaderBody) -> std::result::Result<CustomHeader, ApiError> {
    Ok(CustomHeader::parse(&h.name, &h.value)?)
}

fn delay(s: &str) -> std::result::Result<LeadCreatedDelay, ApiError> {
    LeadCreatedDelay::parse(s)
        .ok_or_else(|| ApiError::invalid("leadCreatedDelay must be null, 1m, 5m or 1h"))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct CreateBody {
    url: String,
    events: Vec<String>,
    lead_created_delay: Option<String>,
    custom_header: Option<HeaderBody>,
    #[serde(default)]
    secret: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct PatchBody {
    url: Option<String>,
    events: Option<Vec<String>>,
    #[serde(default, deserialize_with = "nullable")]
    lead_created_delay: Option<Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    custom_header: Option<Option<HeaderBody>>,
    secret: Option<bool>,
}

async fn create(state: &AppState, partner: &PartnerId, b: CreateBody) -> Result {
    let new = NewEndpoint {
        url: parse_endpoint_url(&b.url, state.webhooks.allow_private())?,
        events: parse_events(&b.events)?,
        lead_created_delay: b.lead_created_delay.as_deref().map(delay).transpose()?,
        custom_header: b.custom_header.map(header).transpose()?,
        secret: b.secret,
    };
    let row = state
        .webhooks
        .create(partner, new)
        .await
        .map_err(endpoint_error)?;
    Ok(data(StatusCode::CREATED, row))
}

async fn update(state: &AppState, partner: &PartnerId, id: &str, b: PatchBody) -> Result {
    let id = uuid(id, "endpoint id")?;
    let patch = EndpointPatch {
        url: b
            .url
            .as_deref()
            .map(|u| parse_endpoint_url(u, state.webhooks.allow_private()))
            .transpose()?,
        events: b.events.as_deref().map(parse_events).transpose()?,
        lead_created_delay: b
            .lead_created_delay
            .map(|d| d.as_deref().map(delay).transpose())
            .transpose()?,
        custom_header: b
            .custom_header
            .map(|h| h.map(header).transpose())
            .transpose()?,
        secret: b.secret,
    };
    Ok(ok(state
        .webhooks
        .update(partner, id, patch)
        .await
        .map_err(endpoint_error)?))
}

pub(super) async fn list(state: web::Data<AppState>, Caller(me): Caller) -> Result {
    Ok(ok(state
        .webhooks
        .list(&me.partner_id)
        .await
        .map_err(endpoint_error)?))
}

pub(super) async fn post(
    state: web::Data<AppState>,
    Caller(me): Caller,
    JsonBody(b): JsonBody<CreateBody>,
) -> Result {
    create(&state, &me.partner_id, b).await
}

pub(super) async fn patch(
    state: web::Data<AppState>,
    Caller(me): Caller,
    path: web::Path<String>,
    JsonBody(b): JsonBody<PatchBody>,
) -> Result {
    update(&state, &me.partner_id, &path, b).await
}

pub(super) async fn delete(
    state: web::Data<AppState>,
    Caller(me): Caller,
    path: web::Path<String>,
) -> Result {
    let id = uuid(&path, "endpoint id")?;
    state
        .webhooks
        .delete(&me.partner_id, id)
        .await
        .map_err(endpoint_error)?;
    Ok(ok_true())
}

/// The operator's calls name a partner that must exist.
async fn known_partner(state: &AppState, raw: &str) -> std::result::Result<PartnerId, ApiError> {
    let p = PartnerId::parse(raw)?;
    match state.accounts.partner(&p).await {
        Ok(_) => Ok(p),
        Err(NotFoundOr::NotFound) => Err(ApiError::not_found("no partner with that partnerId")),
        Err(NotFoundOr::Repo(e)) => Err(e.into()),
    }
}

async fn internal_list(state: web::Data<AppState>, path: web::Path<String>) -> Result {
    let p = known_partner(&state, &path).await?;
    Ok(ok(state.webhooks.list(&p).await.map_err(endpoint_error)?))
}

async fn internal_create(
    state: web::Data<AppState>,
    path: web::Path<String>,
    JsonBody(b): JsonBody<CreateBody>,
) -> Result {
    let p = known_partner(&state, &path).await?;
    create(&state, &p, b).await
}

async fn internal_update(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    JsonBody(b): JsonBody<PatchBody>,
) -> Result {
    let p = known_partner(&state, &path.0).await?;
    update(&state, &p, &path.1, b).await
}

async fn internal_delete(state: web::Data<AppState>, path: web::Path<(String, String)>) -> Result {
    let p = known_partner(&state, &path.0).await?;
    let id = uuid(&path.1, "endpoint id")?;
    state
        .webhooks
        .delete(&p, id)
        .await
        .map_err(endpoint_error)?;
    Ok(ok_true())
}

async fn deliveries(
    state: web::Data<AppState>,
    path: web::Path<String>,
    req: HttpRequest,
) -> Result {
    let p = known_partner(&state, &path).await?;
    let limit = parse_limit(Query::of(&req)?.get("limit"), 50, 500)?;
    Ok(ok(state
        .webhooks
        .deliveries(&p, limit)
        .await
        .map_err(endpoint_error)?))
}
