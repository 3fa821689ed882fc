//! `GET /api/v1/dna-links`, `/medical-intake-links`, `/care-service-links`.

use actix_web::{HttpRequest, HttpResponse};
use partner_domain::kernel::values::{CareService, SubId};
use partner_domain::links::CareQuery;

use crate::error::ApiError;
use crate::extract::Query;
use crate::middleware::{Requirement, one_trip};
use crate::ratelimit::Group;
use partner_domain::account::auth::Principal;

mod out;

pub(crate) use out::{CareBody, CareLinkOut, DnaBody, DnaLinkOut, MedicalBody, MedicalLinkOut};

fn sub(q: &Query) -> std::result::Result<Option<SubId>, ApiError> {
    q.get("sub")
        .map(|s| SubId::parse(s).map_err(|e| ApiError::from(e.named("sub"))))
        .transpose()
}

#[utoipa::path(
    get, path = "/api/v1/dna-links", tag = "links",
    responses(
        (status = 200, description = "DNA product links", body = DnaBody),
        (status = 403, description = "DNA links are disabled for this account, or the account is inactive", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn dna(req: HttpRequest) -> HttpResponse {
    // One round trip: the partner, its prices and the products are read with the token's record;
    // the DNA-access 403 comes with the account state, before the rate limit, as in the guard.
    one_trip(
        &req,
        Group::Links,
        Some(Requirement {
            holds: Principal::may_use_dna_links,
            message: partner_domain::links::DNA_DISABLED,
        }),
        async |st, token| Ok(st.links.dna_links_for_token(st.auth.key(&token)).await?),
        |st, me, inputs| {
            let links = st.links.dna_links_from(me.partner_id(), inputs)?;
            Ok(HttpResponse::Ok().json(DnaBody {
                data: links.iter().map(DnaLinkOut::from).collect(),
            }))
        },
    )
    .await
}

#[utoipa::path(
    get, path = "/api/v1/medical-intake-links", tag = "links",
    params(
        ("sub" = Option<String>, Query, description = "A sub-account number (1-250)", pattern = "^([1-9]|[1-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|250)$"),
        ("lang" = Option<String>, Query, description = "`en` or `es`; anything else falls back to the partner's default"),
    ),
    responses(
        (status = 200, description = "Medical intake links", body = MedicalBody),
        (status = 400, description = "`sub` is invalid or names no sub-account", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn medical(req: HttpRequest) -> HttpResponse {
    // One round trip: the sub-account check, the partner, its prices and the products are read
    // with the token's record. An invalid query looks the token up alone and answers 400 after
    // authentication and the rate limit, as behind the guard.
    let q = match Query::of(&req) {
        Ok(q) => q,
        Err(e) => return super::refused_after_admission(&req, Group::Links, e).await,
    };
    let sub = match sub(&q) {
        Ok(s) => s,
        Err(e) => return super::refused_after_admission(&req, Group::Links, e).await,
    };
    one_trip(
        &req,
        Group::Links,
        None,
        async move |st, token| {
            Ok(st
                .links
                .medical_links_for_token(st.auth.key(&token), sub)
                .await?)
        },
        |st, me, inputs| {
            // An unrecognized or unavailable `lang` falls back to the partner default; never an
            // error.
            let links = st
                .links
                .medical_links_from(me.partner_id(), inputs, sub, q.get("lang"))?;
            Ok(HttpResponse::Ok().json(MedicalBody {
                data: links.iter().map(MedicalLinkOut::from).collect(),
                sub: sub.map(|s| s.to_string()),
            }))
        },
    )
    .await
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
        (status = 200, description = "Care Services links the partner can access", body = CareBody),
        (status = 400, description = "A parameter is invalid", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "The Care Services API is disabled", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn care(req: HttpRequest) -> HttpResponse {
    // One round trip: the sub-account check, the partner, the global switches and the products
    // are read with the token's record. An invalid query looks the token up alone and answers
    // 400 after authentication and the rate limit, as behind the guard.
    let query = match care_query(&req) {
        Ok(q) => q,
        Err(e) => return super::refused_after_admission(&req, Group::Links, e).await,
    };
    let sub = query.sub;
    one_trip(
        &req,
        Group::Links,
        None,
        async move |st, token| {
            Ok(st
                .links
                .care_links_for_token(st.auth.key(&token), sub)
                .await?)
        },
        |st, me, inputs| {
            let links = st.links.care_links_from(me.partner_id(), inputs, &query)?;
            Ok(HttpResponse::Ok().json(CareBody {
                data: links.iter().map(CareLinkOut::from).collect(),
                sub: query.sub.map(|s| s.to_string()),
                service: query.service.map(CareService::as_str),
                duration: query.duration,
            }))
        },
    )
    .await
}

fn care_query(req: &HttpRequest) -> std::result::Result<CareQuery, ApiError> {
    let q = Query::of(req)?;
    Ok(CareQuery {
        service: q
            .get("service")
            .map(|s| CareService::parse_field(s, "service"))
            .transpose()?,
        sub: sub(&q)?,
        duration: crate::params::months(q.get("duration"), "duration")?,
        lang: q.get("lang").map(str::to_owned),
    })
}
