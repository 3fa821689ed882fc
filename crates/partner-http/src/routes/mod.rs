//! The route table: every path of the service, mounted here and nowhere else. Handlers live in
//! one module per resource, which holds both its partner and its operator handlers.

mod accounts;
mod catalog;
mod coupons;
mod embed;
mod embed_url;
mod events;
mod fields;
mod health;
mod leads;
mod links;
mod openapi;
mod openapi_bodies;
mod openapi_params;
mod openapi_webhooks;
mod orders;
mod payouts;
mod portal;
mod schemas;
mod streaming;
mod sub_accounts;
mod webhook_data;
mod webhooks;

use actix_web::http::Method;
use actix_web::middleware::from_fn;
use actix_web::{HttpResponse, http::StatusCode, web};
use serde::Serialize;

use partner_domain::account::auth::Principal;

use crate::error::ApiError;
use crate::middleware::{
    PORTAL_SCOPE, Requirement, care_services_enabled, internal_guard, no_store, partner_guard,
    partner_guard_requiring, public_limit,
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
    cfg.service(under("/api/v1", |scope| {
        scope
            // The document is public: partners read it before they have a token.
            .service(resource("/openapi.json").route(web::get().to(openapi::partner_document)))
            // Partner reads (GET) authenticate inside their handlers, in the read's own round
            // trip (`middleware::one_trip`); writes, and the 405 of other methods, stay behind the
            // guard, so every answer keeps its order of checks.
            .service(
                resource("/sub-accounts")
                    .route(web::get().to(sub_accounts::list))
                    .route(
                        web::post()
                            .to(sub_accounts::create)
                            .wrap(from_fn(partner_guard(Group::SubAccounts))),
                    )
                    .route(
                        web::delete()
                            .to(sub_accounts::delete)
                            .wrap(from_fn(partner_guard(Group::SubAccounts))),
                    )
                    .default_service(guarded_405(Group::SubAccounts)),
            )
            .service(
                resource("/sub-accounts/{id}")
                    .route(web::get().to(sub_accounts::one))
                    .default_service(guarded_405(Group::SubAccounts)),
            )
            .service(
                resource("/leads/{id}")
                    .route(web::get().to(leads::one))
                    .default_service(guarded_405(Group::Leads)),
            )
            // Authenticates inside the handlers, for GET in the page's own statement (one round
            // trip); other methods answer 405 after authentication and the rate limit, as
            // behind the guard.
            .service(
                resource("/leads")
                    .route(web::get().to(leads::list))
                    .default_service(web::to(leads::list_other_method)),
            )
            .service(
                resource("/orders")
                    .route(web::get().to(orders::list))
                    .default_service(guarded_405(Group::Orders)),
            )
            .service(
                resource("/orders/{orderId}")
                    .route(web::get().to(orders::one))
                    .default_service(guarded_405(Group::Orders)),
            )
            .service(
                resource("/payouts")
                    .route(web::get().to(payouts::list))
                    .default_service(guarded_405(Group::Payouts)),
            )
            .service(
                resource("/payouts/{recordId}")
                    .route(web::get().to(payouts::one))
                    .default_service(guarded_405(Group::Payouts)),
            )
            .service(
                resource("/dna-links")
                    .route(web::get().to(links::dna))
                    .default_service(web::to(method_not_allowed).wrap(from_fn(
                        partner_guard_requiring(
                            Group::Links,
                            Requirement {
                                holds: Principal::may_use_dna_links,
                                message: partner_domain::links::DNA_DISABLED,
                            },
                        ),
                    ))),
            )
            .service(
                resource("/medical-intake-links")
                    .route(web::get().to(links::medical))
                    .default_service(guarded_405(Group::Links)),
            )
            .service(
                resource("/care-service-links")
                    .route(web::get().to(links::care))
                    .default_service(guarded_405(Group::Links))
                    .wrap(from_fn(care_services_enabled)),
            )
            .service(
                resource("/embed")
                    .route(web::get().to(embed_url::show))
                    .default_service(guarded_405(Group::Links))
                    .wrap(from_fn(care_services_enabled)),
            )
            .service(
                resource("/care-services-coupons")
                    .route(web::get().to(coupons::list))
                    .default_service(guarded_405(Group::Coupons))
                    .wrap(from_fn(care_services_enabled)),
            )
            .service(
                resource("/care-services-coupons/{code}")
                    .route(web::get().to(coupons::one))
                    .default_service(guarded_405(Group::Coupons))
                    .wrap(from_fn(care_services_enabled)),
            )
            .service(
                resource("/webhook-endpoints")
                    .route(web::get().to(webhooks::list))
                    .route(
                        web::post()
                            .to(webhooks::post)
                            .wrap(from_fn(partner_guard(Group::WebhookEndpoints))),
                    )
                    .default_service(guarded_405(Group::WebhookEndpoints)),
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
                    .default_service(guarded_405(Group::WebhookEndpoints)),
            )
            // Before `{id}`, which would take `by-hour` for an id.
            .service(
                resource("/webhook-deliveries/by-hour")
                    .route(web::get().to(webhooks::by_hour))
                    .default_service(guarded_405(Group::WebhookEndpoints)),
            )
            .service(
                resource("/webhook-deliveries/{id}")
                    .route(web::get().to(webhooks::delivery))
                    .default_service(guarded_405(Group::WebhookEndpoints)),
            )
            .service(
                resource("/webhook-deliveries/{id}/resend")
                    .route(web::post().to(webhooks::resend))
                    .wrap(from_fn(partner_guard(Group::WebhookEndpoints))),
            )
            // A portal session cannot open another portal (extensions §10).
            .service(
                resource("/portal-sessions")
                    .route(web::post().to(portal::mint))
                    .wrap(from_fn(partner_guard_requiring(
                        Group::WebhookEndpoints,
                        Requirement {
                            holds: Principal::not_portal,
                            message: PORTAL_SCOPE,
                        },
                    ))),
            )
            .service(
                resource("/events")
                    .route(web::get().to(events::list))
                    .default_service(guarded_405(Group::WebhookEndpoints)),
            )
            .service(
                resource("/events/{id}")
                    .route(web::get().to(events::show))
                    .default_service(guarded_405(Group::WebhookEndpoints)),
            )
            .default_service(web::to(no_route))
            .wrap(from_fn(no_store))
    }))
    // The portal's page, its files and its code exchange: no token yet, so the public budget
    // per client address.
    .service(
        resource("/portal")
            .route(web::get().to(portal::page))
            .wrap(from_fn(public_limit)),
    )
    .service(
        resource("/portal/app.js")
            .route(web::get().to(portal::script))
            .wrap(from_fn(public_limit)),
    )
    .service(
        resource("/portal/app.css")
            .route(web::get().to(portal::style))
            .wrap(from_fn(public_limit)),
    )
    .service(under("/portal/v1", |scope| {
        scope
            .service(resource("/sessions").route(web::post().to(portal::exchange)))
            .default_service(web::to(no_route))
            .wrap(from_fn(public_limit))
            .wrap(from_fn(no_store))
    }))
    // The public surfaces share one budget per client address (`public_limit`, §12). In the
    // catalog it runs inside `catalog::headers`, so a 429 carries the CORS headers a browser
    // needs to read it (preflights are answered before it, at no cost); on the embedded view it
    // runs first.
    .configure(|cfg| {
        // The public catalog: one path per category, and all of them.
        for category in partner_domain::catalog::Category::ALL {
            cfg.service(
                resource(&format!("/api/{}", category.as_str()))
                    .route(web::get().to(move |s, r| catalog::list(s, r, Some(category))))
                    .route(web::method(Method::OPTIONS).to(catalog::preflight))
                    .wrap(from_fn(public_limit))
                    .wrap(from_fn(catalog::headers)),
            );
        }
        cfg.service(
            resource("/api/all-products")
                .route(web::get().to(|s, r| catalog::list(s, r, None)))
                .route(web::method(Method::OPTIONS).to(catalog::preflight))
                .wrap(from_fn(public_limit))
                .wrap(from_fn(catalog::headers)),
        );
    })
    .service(
        resource("/embed/care-services")
            .route(web::get().to(embed::care_services))
            .wrap(from_fn(care_services_enabled))
            .wrap(from_fn(public_limit)),
    );
}

/// The operator API under `/internal/v1`.
pub(crate) fn configure_internal(cfg: &mut web::ServiceConfig) {
    cfg.service(under("/internal/v1", |scope| {
        scope
            .service(resource("/openapi.json").route(web::get().to(openapi::internal_document)))
            // Accounts and tokens.
            .service(
                resource("/partners/{partner_id}")
                    .route(web::put().to(accounts::put_partner))
                    .route(web::get().to(accounts::get_partner)),
            )
            .service(
                resource("/care-services/feature-flags")
                    .route(web::put().to(accounts::put_flags))
                    .route(web::get().to(accounts::get_flags)),
            )
            .service(resource("/users").route(web::post().to(accounts::create_user)))
            .service(resource("/users/{id}").route(web::delete().to(accounts::delete_user)))
            .service(
                resource("/users/{id}/tokens")
                    .route(web::post().to(accounts::create_token))
                    .route(web::get().to(accounts::list_tokens)),
            )
            .service(resource("/tokens/{id}/rotate").route(web::post().to(accounts::rotate_token)))
            .service(resource("/tokens/{id}").route(web::delete().to(accounts::revoke_token)))
            // Activity.
            .service(resource("/leads").route(web::post().to(leads::create_lead)))
            .service(resource("/leads/{id}").route(web::patch().to(leads::patch_lead)))
            .service(resource("/orders").route(web::post().to(orders::create_order)))
            .service(resource("/analytics-events").route(web::post().to(orders::create_event)))
            .service(resource("/payouts").route(web::post().to(payouts::create_payout)))
            .service(
                resource("/partners/{partner_id}/commission-summary")
                    .route(web::get().to(orders::commission_summary)),
            )
            // Catalog.
            .service(resource("/medical-products/{id}").route(web::put().to(catalog::put_medical)))
            .service(resource("/dna-products/{id}").route(web::put().to(catalog::put_dna)))
            .service(
                resource("/care-service-products/{id}").route(web::put().to(catalog::put_care)),
            )
            .service(
                resource("/partners/{partner_id}/medical-prices/{product_id}")
                    .route(web::put().to(catalog::put_medical_prices)),
            )
            .service(
                resource("/partners/{partner_id}/dna-prices/{product_id}")
                    .route(web::put().to(catalog::put_dna_price)),
            )
            // Care Services coupons.
            .service(
                resource("/care-services-coupons/bulk-orders")
                    .route(web::post().to(coupons::issue)),
            )
            .service(
                resource("/care-services-coupons/redeem").route(web::post().to(coupons::redeem)),
            )
            .service(
                resource("/care-services-coupons/{id}/void").route(web::post().to(coupons::void)),
            )
            // Webhooks, on behalf of a partner.
            .service(
                resource("/partners/{partner_id}/webhook-endpoints")
                    .route(web::get().to(webhooks::internal_list))
                    .route(web::post().to(webhooks::internal_create)),
            )
            .service(
                resource("/partners/{partner_id}/webhook-endpoints/{id}")
                    .route(web::patch().to(webhooks::internal_update))
                    .route(web::delete().to(webhooks::internal_delete)),
            )
            .service(
                resource("/partners/{partner_id}/webhook-endpoints/{id}/test")
                    .route(web::post().to(webhooks::internal_test)),
            )
            .service(
                resource("/partners/{partner_id}/webhook-endpoints/{id}/recover")
                    .route(web::post().to(webhooks::internal_recover)),
            )
            .service(
                resource("/partners/{partner_id}/webhook-deliveries")
                    .route(web::get().to(webhooks::internal_deliveries)),
            )
            .service(
                resource("/partners/{partner_id}/webhook-deliveries/{id}")
                    .route(web::get().to(webhooks::internal_delivery)),
            )
            .service(
                resource("/partners/{partner_id}/webhook-deliveries/{id}/resend")
                    .route(web::post().to(webhooks::internal_resend)),
            )
            .default_service(web::to(no_route))
            .wrap(from_fn(internal_guard))
            .wrap(from_fn(no_store))
    }));
}

/// A resource whose unmatched methods answer 405 (without this, actix falls back to the
/// enclosing scope's 404 default). Every path of the service is mounted through here (inside
/// [`under`] for a scope), so [`mounted_paths`] lists them all.
pub(crate) fn resource(path: &str) -> actix_web::Resource {
    MOUNTED.with(|m| {
        if let Some(paths) = m.borrow_mut().as_mut() {
            let prefix = PREFIX.with(|p| *p.borrow());
            paths.push(format!("{prefix}{path}"));
        }
    });
    web::resource(path).default_service(web::to(method_not_allowed))
}

thread_local! {
    /// The paths [`resource`] mounted, while [`mounted_paths`] records them.
    static MOUNTED: std::cell::RefCell<Option<Vec<String>>> = const { std::cell::RefCell::new(None) };
    /// The scope [`resource`] is being mounted under (see [`under`]).
    static PREFIX: std::cell::RefCell<&'static str> = const { std::cell::RefCell::new("") };
}

/// A scope at `prefix` whose resources are built by `build` (so [`resource`] knows the prefix).
fn under<T>(prefix: &'static str, build: impl FnOnce(actix_web::Scope) -> T) -> T {
    let outer = PREFIX.with(|p| std::mem::replace(&mut *p.borrow_mut(), prefix));
    let scope = build(web::scope(prefix));
    PREFIX.with(|p| *p.borrow_mut() = outer);
    scope
}

/// The methods a route template answers, as a 405's `Allow` header lists them: those its
/// OpenAPI document gives it (the route table test holds the documents to the mounts), `GET`
/// for the health checks and the catalog's per-category paths (documented as one template).
pub(crate) fn allowed_methods(pattern: Option<&str>) -> String {
    static BY_PATH: std::sync::LazyLock<std::collections::HashMap<String, String>> =
        std::sync::LazyLock::new(|| {
            let mut by_path = std::collections::HashMap::new();
            for doc in [openapi::partner(), openapi::internal()] {
                for (path, item) in &doc.paths.paths {
                    let methods: Vec<&str> = [
                        ("GET", item.get.is_some()),
                        ("POST", item.post.is_some()),
                        ("PUT", item.put.is_some()),
                        ("PATCH", item.patch.is_some()),
                        ("DELETE", item.delete.is_some()),
                    ]
                    .into_iter()
                    .filter_map(|(m, has)| has.then_some(m))
                    .collect();
                    by_path.insert(path.clone(), methods.join(", "));
                }
            }
            by_path
        });
    pattern
        .and_then(|p| BY_PATH.get(p))
        .cloned()
        .unwrap_or_else(|| "GET".to_owned())
}

/// Every path [`configure`] mounts (full paths, `{param}` as in the route), in mount order: the
/// route table the OpenAPI documents are checked against (`tests/api/openapi.rs`: every mounted
/// method is documented and every documented one mounted).
pub fn mounted_paths() -> Vec<String> {
    MOUNTED.with(|m| *m.borrow_mut() = Some(Vec::new()));
    let _app = actix_web::App::new().configure(configure);
    MOUNTED.with(|m| m.borrow_mut().take()).unwrap_or_default()
}

/// The 405 of a resource whose GET authenticates in its handler: behind the partner guard, as
/// when the guard wrapped the whole resource (401/403/429 first).
fn guarded_405(group: Group) -> actix_web::Route {
    web::to(method_not_allowed).wrap(from_fn(partner_guard(group)))
}

async fn method_not_allowed() -> HttpResponse {
    actix_web::ResponseError::error_response(&ApiError::for_status(StatusCode::METHOD_NOT_ALLOWED))
}

/// What a read by id answers when its id is malformed (extensions §8.2): the token checked
/// alone, then `e` after authentication and the rate limit of `group`, as the listing answers an
/// invalid parameter.
pub(crate) async fn refused_after_admission(
    req: &actix_web::HttpRequest,
    group: Group,
    e: ApiError,
) -> HttpResponse {
    refused_after_admission_requiring(req, group, None, e).await
}

/// [`refused_after_admission`] for a read that also holds its principal to `requirement`.
pub(crate) async fn refused_after_admission_requiring(
    req: &actix_web::HttpRequest,
    group: Group,
    requirement: Option<Requirement>,
    e: ApiError,
) -> HttpResponse {
    crate::middleware::one_trip(
        req,
        group,
        requirement,
        async |st, token| st.auth.lookup(&token).await,
        move |_, _, ()| Err(e),
    )
    .await
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

pub use openapi::{internal as internal_document, partner as partner_document, to_json};
pub use webhook_data::WebhookData;

type Result<T = HttpResponse> = std::result::Result<T, ApiError>;
