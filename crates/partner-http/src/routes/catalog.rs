//! The public catalog under `{catalog_url}/api/<category>`: no token, attribution by
//! `partner_id`, the spec's caching and CORS headers on every answer (errors too).

use actix_web::body::BoxBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderName, HeaderValue};
use actix_web::http::{Method, StatusCode};
use actix_web::middleware::Next;
use actix_web::{Error, HttpRequest, HttpResponse, web};
use partner_domain::attribution::Attribution;
use partner_domain::catalog::Category;
use partner_domain::links::CatalogProduct;
use serde::Serialize;

use super::Result;
use crate::AppState;
use crate::error::ApiError;
use crate::extract::Query;

pub(super) fn configure(cfg: &mut web::ServiceConfig) {
    for category in Category::ALL {
        cfg.service(
            super::resource(&format!("/api/{}", category.as_str()))
                .route(web::get().to(move |s, r| list(s, r, Some(category))))
                .wrap(actix_web::middleware::from_fn(headers)),
        );
    }
    cfg.service(
        super::resource("/api/all-products")
            .route(web::get().to(|s, r| list(s, r, None)))
            .wrap(actix_web::middleware::from_fn(headers)),
    );
}

#[derive(Serialize)]
struct CatalogBody {
    products: Vec<CatalogProduct>,
    count: usize,
}

/// Public: no token. `all-products` lists every category.
#[utoipa::path(
    get, path = "/api/{category}", tag = "catalog", security(()),
    params(
        ("category" = String, Path, description = "`weight-loss`, `mens-health`, `womens-health`, `hair-loss`, `wellness` or `all-products`",
            pattern = "^(weight-loss|mens-health|womens-health|hair-loss|wellness|all-products)$"),
        ("partner_id" = String, Query, description = "The partner (or `partner-subId` code) the links are attributed to"),
    ),
    responses(
        (status = 200, description = "The partner's products", body = crate::routes::schemas::CatalogList),
        (status = 400, description = "`partner_id` is missing or malformed", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No active partner has that `partner_id`", body = crate::routes::schemas::ErrorBody),
    )
)]
async fn list(state: web::Data<AppState>, req: HttpRequest, category: Option<Category>) -> Result {
    let q = Query::of(&req)?;
    let raw = q
        .get("partner_id")
        .filter(|p| !p.is_empty())
        .ok_or_else(|| ApiError::invalid("partner_id is required"))?;
    let attribution =
        Attribution::parse(raw).map_err(|_| ApiError::invalid("partner_id is malformed"))?;
    let products = state.links.catalog(&attribution, category).await?;
    Ok(HttpResponse::Ok().json(CatalogBody {
        count: products.len(),
        products,
    }))
}

/// `OPTIONS` answers 204; every answer gets the caching and CORS headers.
async fn headers(
    req: ServiceRequest,
    next: Next<BoxBody>,
) -> std::result::Result<ServiceResponse<BoxBody>, Error> {
    let mut res = if req.method() == Method::OPTIONS {
        req.into_response(HttpResponse::build(StatusCode::NO_CONTENT).finish())
    } else {
        next.call(req).await?
    };
    let h = res.headers_mut();
    for (name, value) in [
        (
            "cache-control",
            "no-store, no-cache, must-revalidate, proxy-revalidate",
        ),
        ("cdn-cache-control", "no-store"),
        ("access-control-allow-origin", "*"),
        ("access-control-allow-methods", "GET, OPTIONS"),
        ("access-control-allow-headers", "Content-Type"),
    ] {
        h.insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
    if !h.contains_key(header::CONTENT_TYPE) && res.status() != StatusCode::NO_CONTENT {
        res.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    Ok(res)
}
