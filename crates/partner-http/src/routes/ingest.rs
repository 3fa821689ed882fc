//! Operator API, "Activity": lead, order, analytics-event and payout ingest, and the
//! commission summary.

use actix_web::{HttpRequest, http::StatusCode, web};
use partner_domain::account::NotFoundOr;
use partner_domain::attribution::Attribution;
use partner_domain::lead::{LeadId, LeadPatch, NewLead, Origin, Phone, TestFlag, TestSource};
use partner_domain::order::{
    NewAnalyticsEvent, Order, OrderIngest, parse_event_name, parse_order_id, parse_run_id,
};
use partner_domain::payout::{NewPayout, parse_date};
use partner_domain::values::{Email, Money, PartnerId, SubId, ValueError, text};
use partner_domain::wire::parse_timestamp;
use serde::Deserialize;

use super::{Result, data, ok, resource};
use crate::AppState;
use crate::error::ApiError;
use crate::extract::{JsonBody, Query, nullable, uuid};

pub(super) fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(resource("/leads").route(web::post().to(create_lead)))
        .service(resource("/leads/{id}").route(web::patch().to(patch_lead)))
        .service(resource("/orders").route(web::post().to(create_order)))
        .service(resource("/analytics-events").route(web::post().to(create_event)))
        .service(resource("/payouts").route(web::post().to(create_payout)))
        .service(
            resource("/partners/{partner_id}/commission-summary")
                .route(web::get().to(commission_summary)),
        );
}

/// `partnerId` (plain or a sub-account code) plus an optional explicit `subId`.
fn attribution(
    partner_id: &str,
    sub_id: Option<&str>,
) -> std::result::Result<Attribution, ValueError> {
    let explicit = sub_id.map(SubId::parse).transpose()?;
    Attribution::parse(partner_id)?.with_explicit_sub(explicit)
}

fn timestamp(s: &str, field: &str) -> std::result::Result<time::OffsetDateTime, ApiError> {
    parse_timestamp(s)
        .ok_or_else(|| ApiError::invalid(format!("{field} must be an RFC 3339 timestamp")))
}

fn optional_text(
    v: Option<&str>,
    field: &'static str,
    max: usize,
) -> std::result::Result<Option<String>, ValueError> {
    v.map(|s| text(field, s, 0, max))
        .transpose()
        .map(|o| o.filter(|s| !s.is_empty()))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = LeadIngest)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct LeadBody {
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
async fn create_lead(state: web::Data<AppState>, JsonBody(b): JsonBody<LeadBody>) -> Result {
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
struct LeadPatchBody {
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
async fn patch_lead(
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

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = OrderIngest)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct OrderBody {
    order_id: String,
    partner_id: String,
    sub_id: Option<String>,
    created_date: String,
    product: String,
    amount: f64,
    commission: f64,
    status: String,
    is_test: bool,
    source: String,
    customer_name: Option<String>,
    customer_email: Option<String>,
}

#[utoipa::path(
    post, path = "/internal/v1/orders", tag = "activity", request_body = OrderBody,
    responses(
        (status = 200, description = "Replayed: the same body was stored under that `orderId` already", body = crate::routes::schemas::OrderData),
        (status = 201, description = "The stored order", body = crate::routes::schemas::OrderData),
        (status = 400, description = "A field is invalid", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No partner with that `partnerId`", body = crate::routes::schemas::ErrorBody),
        (status = 409, description = "Another body is stored under that `orderId`", body = crate::routes::schemas::ErrorBody),
    )
)]
async fn create_order(state: web::Data<AppState>, JsonBody(b): JsonBody<OrderBody>) -> Result {
    let at = attribution(&b.partner_id, b.sub_id.as_deref())?;
    let order = Order {
        order_id: parse_order_id(&b.order_id)?,
        partner_id: at.partner_id,
        sub_id: at.sub_id,
        created_date: timestamp(&b.created_date, "createdDate")?,
        product: text("product", &b.product, 1, 200)?,
        amount: Money::parse(b.amount, "amount")?,
        commission: Money::parse(b.commission, "commission")?,
        status: text("status", &b.status, 1, 64)?,
        is_test: b.is_test,
        source: text("source", &b.source, 1, 64)?,
        customer_name: optional_text(b.customer_name.as_deref(), "customerName", 200)?,
        customer_email: b
            .customer_email
            .as_deref()
            .map(|e| Email::parse_field(e, "customerEmail").map(|e| e.as_str().to_owned()))
            .transpose()?,
    };
    Ok(match state.orders.ingest(order).await? {
        OrderIngest::Created(l) => data(StatusCode::CREATED, l.order.render(&l.sub_account, true)),
        OrderIngest::Replayed(l) => ok(l.order.render(&l.sub_account, true)),
    })
}

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = AnalyticsEventIngest)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct EventBody {
    run_id: String,
    partner_id: String,
    sub_id: Option<String>,
    event: String,
    product: Option<String>,
    amount: Option<f64>,
    occurred_at: String,
    test_source: String,
}

#[utoipa::path(
    post, path = "/internal/v1/analytics-events", tag = "activity", request_body = EventBody,
    responses(
        (status = 202, description = "Recorded", body = crate::routes::schemas::OkData),
        (status = 400, description = "A field is invalid", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No partner with that `partnerId`", body = crate::routes::schemas::ErrorBody),
    )
)]
async fn create_event(state: web::Data<AppState>, JsonBody(b): JsonBody<EventBody>) -> Result {
    let at = attribution(&b.partner_id, b.sub_id.as_deref())?;
    let new = NewAnalyticsEvent {
        run_id: parse_run_id(&b.run_id)?,
        partner_id: at.partner_id,
        sub_id: at.sub_id,
        event: parse_event_name(&b.event)?,
        product: optional_text(b.product.as_deref(), "product", 200)?,
        amount: b.amount.map(|a| Money::parse(a, "amount")).transpose()?,
        occurred_at: timestamp(&b.occurred_at, "occurredAt")?,
        test_source: TestSource::parse(&b.test_source).ok_or_else(|| {
            ApiError::invalid("testSource must be provider_test_mode or simulation")
        })?,
    }
    .checked()?;
    state.orders.record_event(new).await?;
    Ok(data(
        StatusCode::ACCEPTED,
        serde_json::json!({ "ok": true }),
    ))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = PayoutIngest)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PayoutBody {
    partner_id: String,
    payout_date: String,
    payout_amount: f64,
    status: String,
    receipt_url: Option<String>,
    note: Option<String>,
}

#[utoipa::path(
    post, path = "/internal/v1/payouts", tag = "activity", request_body = PayoutBody,
    responses(
        (status = 201, description = "The stored payout", body = crate::routes::schemas::PayoutData),
        (status = 400, description = "A field is invalid", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No partner with that `partnerId`", body = crate::routes::schemas::ErrorBody),
    )
)]
async fn create_payout(state: web::Data<AppState>, JsonBody(b): JsonBody<PayoutBody>) -> Result {
    let new = NewPayout {
        partner_id: PartnerId::parse(&b.partner_id)?,
        payout_date: parse_date(&b.payout_date)
            .ok_or_else(|| ApiError::invalid("payoutDate must be YYYY-MM-DD"))?,
        amount: Money::parse(b.payout_amount, "payoutAmount")?,
        status: text("status", &b.status, 1, 32)?,
        receipt_url: optional_text(b.receipt_url.as_deref(), "receiptUrl", 2048)?,
        note: optional_text(b.note.as_deref(), "note", 2000)?,
    };
    Ok(data(StatusCode::CREATED, state.payouts.record(new).await?))
}

#[utoipa::path(
    get, path = "/internal/v1/partners/{partner_id}/commission-summary", tag = "activity",
    params(
        ("partner_id" = String, Path, description = "The partner's id"),
        ("from" = String, Query, description = "First day, `YYYY-MM-DD`", format = Date),
        ("to" = String, Query, description = "Last day, `YYYY-MM-DD`", format = Date),
    ),
    responses(
        (status = 200, description = "Real orders and their commission in the period", body = crate::routes::schemas::CommissionSummaryData),
        (status = 400, description = "A parameter is invalid", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No partner with that `partnerId`", body = crate::routes::schemas::ErrorBody),
    )
)]
async fn commission_summary(
    state: web::Data<AppState>,
    path: web::Path<String>,
    req: HttpRequest,
) -> Result {
    let partner = PartnerId::parse(&path)?;
    let q = Query::of(&req)?;
    let date = |name: &str| {
        q.get(name)
            .and_then(parse_date)
            .ok_or_else(|| ApiError::invalid(format!("{name} is required, as YYYY-MM-DD")))
    };
    let (from, to) = (date("from")?, date("to")?);
    if from > to {
        return Err(ApiError::invalid("from must not be after to"));
    }
    match state.accounts.partner(&partner).await {
        Ok(_) => {}
        Err(NotFoundOr::NotFound) => {
            return Err(ApiError::not_found("no partner with that partnerId"));
        }
        Err(NotFoundOr::Repo(e)) => return Err(e.into()),
    }
    Ok(ok(state
        .orders
        .commission_summary(&partner, from, to)
        .await?))
}
