//! `GET /api/v1/dna-links`, `/medical-intake-links`, `/care-service-links`.

use actix_web::{HttpRequest, HttpResponse, web};
use partner_domain::links::CareQuery;
use partner_domain::links::{CareServiceLink, PartnerProductLink};
use partner_domain::values::{CareService, SubId};
use serde::Serialize;

use super::{Result, ok};
use crate::AppState;
use crate::error::ApiError;
use crate::extract::Query;
use crate::middleware::Caller;

#[derive(Serialize)]
struct MedicalBody {
    data: Vec<PartnerProductLink>,
    sub: Option<String>,
}

#[derive(Serialize)]
struct CareBody {
    data: Vec<CareServiceLink>,
    sub: Option<String>,
    service: Option<&'static str>,
    duration: Option<u8>,
}

fn sub(q: &Query) -> std::result::Result<Option<SubId>, ApiError> {
    q.get("sub")
        .map(|s| {
            SubId::parse(s).map_err(|_| ApiError::invalid("sub must be an integer from 1 to 250"))
        })
        .transpose()
}

#[utoipa::path(
    get, path = "/api/v1/dna-links", tag = "links",
    responses(
        (status = 200, description = "DNA product links", body = crate::routes::schemas::DnaLinkList),
        (status = 403, description = "DNA links are disabled for this account, or the account is inactive", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn dna(state: web::Data<AppState>, Caller(me): Caller) -> Result {
    Ok(ok(state.links.dna_links(me.partner_id()).await?))
}

#[utoipa::path(
    get, path = "/api/v1/medical-intake-links", tag = "links",
    params(
        ("sub" = Option<String>, Query, description = "A sub-account number (1-250)", pattern = "^([1-9]|[1-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|250)$"),
        ("lang" = Option<String>, Query, description = "`en` or `es`; anything else falls back to the partner's default"),
    ),
    responses(
        (status = 200, description = "Medical intake links", body = crate::routes::schemas::MedicalLinkList),
        (status = 400, description = "`sub` is invalid or names no sub-account", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn medical(
    state: web::Data<AppState>,
    Caller(me): Caller,
    req: HttpRequest,
) -> Result {
    let q = Query::of(&req)?;
    let sub = sub(&q)?;
    // An unrecognized or unavailable `lang` falls back to the partner default; never an error.
    let links = state
        .links
        .medical_links(me.partner_id(), sub, q.get("lang"))
        .await?;
    Ok(HttpResponse::Ok().json(MedicalBody {
        data: links,
        sub: sub.map(|s| s.to_string()),
    }))
}

#[utoipa::path(
    get, path = "/api/v1/care-service-links", tag = "links",
    params(
        ("service" = Option<crate::routes::schemas::CareService>, Query, description = "One service"),
        ("sub" = Option<String>, Query, description = "A sub-account number (1-250)", pattern = "^([1-9]|[1-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|250)$"),
        ("duration" = Option<u8>, Query, description = "Membership months: 1, 3, 6 or 12", minimum = 1, maximum = 12),
        ("lang" = Option<String>, Query, description = "`en` or `es`"),
    ),
    responses(
        (status = 200, description = "Care Services links the partner can access", body = crate::routes::schemas::CareLinkList),
        (status = 400, description = "A parameter is invalid", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "The Care Services API is disabled", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn care(
    state: web::Data<AppState>,
    Caller(me): Caller,
    req: HttpRequest,
) -> Result {
    let q = Query::of(&req)?;
    let query = CareQuery {
        service: q
            .get("service")
            .map(|s| {
                CareService::parse(s).ok_or_else(|| {
                    ApiError::invalid(
                        "service must be primary-care, urgent-care, mental-health, dermatology or veterinary-care",
                    )
                })
            })
            .transpose()?,
        sub: sub(&q)?,
        duration: crate::params::months(q.get("duration"), "duration")?,
        lang: q.get("lang").map(str::to_owned),
    };
    let links = state.links.care_links(me.partner_id(), &query).await?;
    Ok(HttpResponse::Ok().json(CareBody {
        data: links,
        sub: query.sub.map(|s| s.to_string()),
        service: query.service.map(CareService::as_str),
        duration: query.duration,
    }))
}
