//! Route table: one module per resource, all mounted here.

mod activity;
mod catalog;
mod coupons;
mod embed;
mod health;
mod ingest;
mod internal;
mod internal_catalog;
mod links;
mod sub_accounts;
mod webhooks;

use actix_web::middleware::from_fn;
use actix_web::{HttpResponse, http::StatusCode, web};
use serde::Serialize;

use crate::error::ApiError;
use crate::middleware::{
    Requirement, care_services_enabled, internal_guard, no_store, partner_guard,
    partner_guard_requiring,
};
use crate::ratelimit::Group;

pub(crate) fn configure_health(cfg: &mut web::ServiceConfig) {
    cfg.service(resource("/healthz").route(web::get().to(health::healthz)))
        .service(resource("/readyz").route(web::get().to(health::readyz)));
}

/// Everything: the public routes and the operator API.
pub(crate) fn configure(cfg: &mut web::ServiceConfig) {
    configure_public(cfg);
    configure_internal(cfg);
}

/// The health checks, the partner API, the public catalog and the embedded view.
pub(crate) fn configure_public(cfg: &mut web::ServiceConfig) {
    configure_health(cfg);
    cfg.service(
        web::scope("/api/v1")
            .service(sub_accounts::resource().wrap(from_fn(partner_guard(Group::SubAccounts))))
            // Authenticates inside the handlers, for GET in the page's own statement (one round
            // trip); other methods answer 405 after authentication and the rate limit, as
            // behind the guard.
            .service(
                web::resource("/leads")
                    .route(web::get().to(activity::leads))
                    .default_service(web::to(activity::leads_other_method)),
            )
            .service(
                resource("/orders")
                    .route(web::get().to(activity::orders))
                    .wrap(from_fn(partner_guard(Group::Orders))),
            )
            .service(
                resource("/payouts")
                    .route(web::get().to(activity::payouts))
                    .wrap(from_fn(partner_guard(Group::Payouts))),
            )
            .service(
                resource("/dna-links")
                    .route(web::get().to(links::dna))
                    .wrap(from_fn(partner_guard_requiring(
                        Group::Links,
                        Requirement {
                            holds: |p| p.dna_access,
                            message: "DNA links are disabled for this account",
                        },
                    ))),
            )
            .service(
                resource("/medical-intake-links")
                    .route(web::get().to(links::medical))
                    .wrap(from_fn(partner_guard(Group::Links))),
            )
            .service(
                resource("/care-service-links")
                    .route(web::get().to(links::care))
                    .wrap(from_fn(partner_guard(Group::Links)))
                    .wrap(from_fn(care_services_enabled)),
            )
            .service(
                resource("/care-services-coupons")
                    .route(web::get().to(coupons::list))
                    .wrap(from_fn(partner_guard(Group::Coupons)))
                    .wrap(from_fn(care_services_enabled)),
            )
            .service(
                resource("/webhook-endpoints")
                    .route(web::get().to(webhooks::list))
                    .route(web::post().to(webhooks::post))
                    .wrap(from_fn(partner_guard(Group::WebhookEndpoints))),
            )
            .service(
                resource("/webhook-endpoints/{id}")
                    .route(web::patch().to(webhooks::patch))
                    .route(web::delete().to(webhooks::delete))
                    .wrap(from_fn(partner_guard(Group::WebhookEndpoints))),
            )
            .service(
                resource("/webhook-endpoints/{id}/test")
                    .route(web::post().to(webhooks::test))
                    .wrap(from_fn(partner_guard(Group::WebhookEndpoints))),
            )
            .service(
                resource("/webhook-endpoints/{id}/recover")
                    .route(web::post().to(webhooks::recover))
                    .wrap(from_fn(partner_guard(Group::WebhookEndpoints))),
            )
            .service(
                resource("/webhook-deliveries")
                    .route(web::get().to(webhooks::deliveries))
                    .wrap(from_fn(partner_guard(Group::WebhookEndpoints))),
            )
            .service(
                resource("/webhook-deliveries/{id}")
                    .route(web::get().to(webhooks::delivery))
                    .wrap(from_fn(partner_guard(Group::WebhookEndpoints))),
            )
            .service(
                resource("/webhook-deliveries/{id}/resend")
                    .route(web::post().to(webhooks::resend))
                    .wrap(from_fn(partner_guard(Group::WebhookEndpoints))),
            )
            .default_service(web::to(no_route))
            .wrap(from_fn(no_store)),
    )
    .configure(catalog::configure)
    .service(
        resource("/embed/care-services")
            .route(web::get().to(embed::care_services))
            .wrap(from_fn(care_services_enabled)),
    );
}

/// The operator API under `/internal/v1`.
pub(crate) fn configure_internal(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("/internal/v1")
            .configure(internal::configure)
            .configure(ingest::configure)
            .configure(internal_catalog::configure)
            .configure(coupons::configure_internal)
            .configure(webhooks::configure_internal)
            .default_service(web::to(no_route))
            .wrap(from_fn(internal_guard))
            .wrap(from_fn(no_store)),
    );
}

/// A resource whose unmatched methods answer 405 (without this, actix falls back to the
/// enclosing scope's 404 default).
pub(crate) fn resource(path: &str) -> actix_web::Resource {
    web::resource(path).default_service(web::to(method_not_allowed))
}

async fn method_not_allowed() -> HttpResponse {
    actix_web::ResponseError::error_response(&ApiError::for_status(StatusCode::METHOD_NOT_ALLOWED))
}

/// Unknown routes: 404 `not_found`.
pub(crate) async fn no_route() -> HttpResponse {
    actix_web::ResponseError::error_response(&ApiError::not_found("no such resource"))
}

#[derive(Serialize)]
struct Data<T> {
    data: T,
}

/// `{ "data": value }` with `status`.
pub(crate) fn data<T: Serialize>(status: StatusCode, value: T) -> HttpResponse {
    HttpResponse::build(status).json(Data { data: value })
}

/// `{ "data": value }` with 200.
pub(crate) fn ok<T: Serialize>(value: T) -> HttpResponse {
    data(StatusCode::OK, value)
}

/// `{ "data": { "ok": true } }`.
pub(crate) fn ok_true() -> HttpResponse {
    ok(serde_json::json!({ "ok": true }))
}

/// `{ data, page: { nextCursor, limit } }`.
#[derive(Serialize)]
pub(crate) struct PageBody<T> {
    pub(crate) data: Vec<T>,
    pub(crate) page: PageInfo,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PageInfo {
    pub(crate) next_cursor: Option<String>,
    pub(crate) limit: u16,
}

type Result<T = HttpResponse> = std::result::Result<T, ApiError>;
