//! Leads: the partner's listing (`GET /api/v1/leads`) and the operator's ingest and
//! enrichment (`POST /internal/v1/leads`, `PATCH /internal/v1/leads/{id}`).

use actix_web::{HttpRequest, HttpResponse, http::StatusCode, web};
use partner_domain::lead::{LeadId, LeadPatch, NewLead, Origin, Phone, TestFlag};
use partner_domain::values::{Email, ValueError, text};
use serde::Deserialize;

use super::fields::{attribution, optional_text};
use super::{PageBody, PageInfo, Result, data, ok};
use crate::AppState;
use crate::error::ApiError;
use crate::extract::{JsonBody, Query, nullable, uuid};

use partner_domain::lead::{LeadQuery, LeadRow, ListLeadsError, Page, parse_limit};

use crate::middleware::one_trip;
use crate::ratelimit::Group;

/// The partner's leads, newest first, in keyset pages.
#[utoipa::path(
    get, path = "/api/v1/leads", tag = "activity",
    params(
        ("limit" = Option<u16>, Query, description = "Page size, 1-200 (default 50)", minimum = 1, maximum = 200),
        ("cursor" = Option<String>, Query, description = "The `nextCursor` of the previous page, unchanged"),
        ("includeTest" = Option<bool>, Query, description = "`true` includes test leads"),
    ),
    responses(
        (status = 200, description = "A page of leads", body = crate::routes::schemas::LeadPage),
        (status = 400, description = "`limit` or `cursor` is invalid", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn list(req: HttpRequest) -> HttpResponse {
    // One database round trip: the token lookup is folded into the page's statement
    // ([`one_trip`] stands in for the partner guard and keeps its answers). A request whose
    // query is invalid looks the token up alone and answers 400 after authentication and the
    // rate limit, as behind the guard.
    match lead_query(&req) {
        Ok(query) => {
            let q = query.clone();
            one_trip(
                &req,
                Group::Leads,
                None,
                async move |st, token| Ok(st.leads.list_for_token(&token, &q).await?),
                move |st, me, leads| page_response(st.leads.finish(me.partner_id(), &query, leads)),
            )
            .await
        }
        Err(e) => {
            one_trip(
                &req,
                Group::Leads,
                None,
                async |st, token| st.auth.lookup(&token).await,
                move |_, _, ()| Err(e),
            )
            .await
        }
    }
}

/// Any other method on `/api/v1/leads`: the token lookup alone, then 405.
pub(super) async fn list_other_method(req: HttpRequest) -> HttpResponse {
    one_trip(
        &req,
        Group::Leads,
        None,
        async |st, token| st.auth.lookup(&token).await,
        |_, _, ()| Err(ApiError::for_status(StatusCode::METHOD_NOT_ALLOWED)),
    )
    .await
}

fn lead_query(req: &HttpRequest) -> Result<LeadQuery> {
    let q = Query::of(req)?;
    Ok(LeadQuery {
        limit: parse_limit(q.get("limit"), 50, 200)?,
        // An empty cursor is the first page, as if absent.
        cursor: q.get("cursor").filter(|c| !c.is_empty()).map(str::to_owned),
        include_test: q.get("includeTest") == Some("true"),
    })
}

fn page_response(page: std::result::Result<Page<LeadRow>, ListLeadsError>) -> Result {
    let page = page?;
    Ok(HttpResponse::Ok().json(PageBody {
        data: page.items,
        page: PageInfo {
            next_cursor: page.next_cursor,
            limit: page.limit,
        },
    }))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = LeadIngest)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct LeadBody {
    partner_id: String,
    sub_id: Option<String>,
    first_name: String,
    last_name: String,
    email: String,
    email_consent: bool,
    phone: Option<String>,
    sms_consent: bool,
    origin: String,
    location: String,
    question_id: Option<String>,
    is_test: Option<bool>,
    test_source: Option<String>,
}

fn phone(v: Option<&str>) -> std::result::Result<Option<Phone>, ValueError> {
    v.filter(|p| !p.trim().is_empty())
        .map(Phone::parse)
        .transpose()
}

#[utoipa::path(
    post, path = "/internal/v1/leads", tag = "activity", request_body = LeadBody,
    responses(
        (status = 201, description = "The stored lead", body = crate::routes::schemas::LeadData),
        (status = 400, description = "A field is invalid", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No partner with that `partnerId`", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn create_lead(
    state: web::Data<AppState>,
    JsonBody(b): JsonBody<LeadBody>,
) -> Result {
    let at = attribution(&b.partner_id, b.sub_id.as_deref())?;
    let origin = Origin::parse(&b.origin)?;
    let new = NewLead {
        partner_id: at.partner_id,
        sub_id: at.sub_id,
        first_name: text("firstName", &b.first_name, 1, 100)?,
        last_name: text("lastName", &b.last_name, 0, 100)?,
        email: Email::parse(&b.email)?,
        email_consent: b.email_consent,
        phone: phone(b.phone.as_deref())?,
        sms_consent: b.sms_consent,
        test: TestFlag::parse(b.is_test, b.test_source.as_deref(), &origin)?,
        origin,
        location: text("location", &b.location, 0, 200)?,
        question_id: optional_text(b.question_id.as_deref(), "questionId", 100)?,
    };
    Ok(data(StatusCode::CREATED, state.leads.ingest(new).await?))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = LeadPatch)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct LeadPatchBody {
    #[serde(default, deserialize_with = "nullable")]
    phone: Option<Option<String>>,
    sms_consent: Option<bool>,
    email: Option<String>,
    email_consent: Option<bool>,
    first_name: Option<String>,
    last_name: Option<String>,
}

#[utoipa::path(
    patch, path = "/internal/v1/leads/{id}", tag = "activity", request_body = LeadPatchBody,
    params(
        ("id" = String, Path, description = "The lead's id (a UUID)", format = Uuid),
    ),
    responses(
        (status = 200, description = "The updated lead", body = crate::routes::schemas::LeadData),
        (status = 400, description = "A field is invalid, or none is named", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No such lead", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn patch_lead(
    state: web::Data<AppState>,
    path: web::Path<String>,
    JsonBody(b): JsonBody<LeadPatchBody>,
) -> Result {
    let id = LeadId::from_uuid(uuid(&path, "lead id")?);
    let patch = LeadPatch {
        phone: b.phone.map(|p| phone(p.as_deref())).transpose()?,
        sms_consent: b.sms_consent,
        email: b.email.as_deref().map(Email::parse).transpose()?,
        email_consent: b.email_consent,
        first_name: b
            .first_name
            .as_deref()
            .map(|n| text("firstName", n, 1, 100))
            .transpose()?,
        last_name: b
            .last_name
            .as_deref()
            .map(|n| text("lastName", n, 0, 100))
            .transpose()?,
    };
    if patch == LeadPatch::default() {
        return Err(ApiError::invalid(
            "name at least one of phone, smsConsent, email, emailConsent, firstName, lastName",
        ));
    }
    Ok(ok(state.leads.patch(id, &patch).await?))
}
