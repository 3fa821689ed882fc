//! Orders: the partner's whole history, streamed (`GET /api/v1/orders`), and the operator's
//! order and analytics-event ingest and commission summary.

use actix_web::{HttpRequest, HttpResponse, http::StatusCode, web};
use partner_domain::account::NotFoundOr;
use partner_domain::kernel::values::{Email, Money, PartnerId, ValueError, text};
use partner_domain::kernel::wire;
use partner_domain::lead::TestSource;
use partner_domain::order::{
    CommissionSummary, NewAnalyticsEvent, Order, OrderIngest, OrderListing, OrderParts,
    OrderService, parse_event_name, parse_order_id, parse_run_id,
};
use partner_domain::payout::parse_period;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;

use super::fields::{attribution, optional_text, timestamp};
use super::streaming::{CHUNK, stream_data};
use super::{Result, data, ok};
use crate::AppState;
use crate::error::ApiError;
use crate::extract::{JsonBody, Query};

use crate::middleware::one_trip;
use crate::ratelimit::Group;

/// The spec's `Order`. `partnerId`, `customerName` and `customerEmail` are present for admin
/// tokens only.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Order, example = json!({
    "orderId": "ord_1001", "createdDate": "2026-11-20T15:30:00.000Z", "subAccount": "Front desk",
    "product": "Semaglutide 3 months", "amount": 897, "commission": 89.7, "status": "paid",
    "isTest": false
}))]
pub(crate) struct OrderOut<'a> {
    order_id: &'a str,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String, format = DateTime)]
    created_date: OffsetDateTime,
    sub_account: &'a str,
    product: &'a str,
    #[schema(value_type = crate::routes::schemas::Money)]
    amount: Money,
    #[schema(value_type = crate::routes::schemas::Money)]
    commission: Money,
    status: &'a str,
    is_test: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, nullable = false, required = false)]
    partner_id: Option<&'a PartnerId>,
    // Absent for a non-admin caller; `null` for an admin when the order has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, required = false)]
    customer_name: Option<Option<&'a str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, required = false)]
    customer_email: Option<Option<&'a str>>,
}

impl<'a> OrderOut<'a> {
    /// `order` as listed under the nickname of its sub-account, for an admin caller or not.
    pub(crate) fn of(order: &'a Order, sub_account: &'a str, admin: bool) -> Self {
        Self {
            order_id: order.order_id(),
            created_date: order.created_date(),
            sub_account,
            product: order.product(),
            amount: order.amount(),
            commission: order.commission(),
            status: order.status(),
            is_test: order.is_test(),
            partner_id: admin.then(|| order.partner_id()),
            customer_name: admin.then(|| order.customer_name()),
            customer_email: admin.then(|| order.customer_email()),
        }
    }

    /// A listing's order, for an admin caller or not.
    pub(crate) fn listed(l: &'a OrderListing, admin: bool) -> Self {
        Self::of(&l.order, &l.sub_account, admin)
    }
}

/// `{ data: Order[] }`, the whole history, streamed chunk by chunk.
#[utoipa::path(
    get, path = "/api/v1/orders", tag = "activity",
    responses((status = 200, description = "Every order of the partner (streamed)", body = crate::routes::schemas::OrderList))
)]
pub(super) async fn list(req: HttpRequest) -> HttpResponse {
    // The first chunk is read with the token's record (one round trip); the following ones,
    // after authentication, for the authenticated partner.
    one_trip(
        &req,
        Group::Orders,
        None,
        async |st, token| {
            Ok(st
                .orders
                .first_chunk_for_token(st.auth.key(&token), CHUNK)
                .await?)
        },
        |st, me, orders| {
            let first = OrderService::chunk_of(orders, CHUNK);
            let (state, partner, admin) = (st.clone(), me.partner_id().clone(), me.admin());
            let wire = move |out: &mut Vec<u8>, l: &OrderListing| {
                serde_json::to_writer(out, &OrderOut::listed(l, admin))
            };
            Ok(stream_data(first, wire, move |after| {
                let (state, partner) = (state.clone(), partner.clone());
                async move { state.orders.chunk(&partner, Some(after), CHUNK).await }
            }))
        },
    )
    .await
}

/// One order by its `orderId`, a simulated one too (extensions §8.2).
#[utoipa::path(
    get, path = "/api/v1/orders/{orderId}", tag = "activity",
    params(("orderId" = String, Path, description = "The order's `orderId` (`TEST-SIM-…` for a simulated order)", min_length = 1, max_length = 100)),
    responses(
        (status = 200, description = "The order, as the listing shows it to this token", body = crate::routes::schemas::OrderData),
        (status = 400, description = "`orderId` is not an order id", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "The partner has no order with that id", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn one(req: HttpRequest, path: web::Path<String>) -> HttpResponse {
    // One round trip, as the listing; a malformed id answers 400 after authentication.
    let order_id = match partner_domain::order::parse_listed_order_id(&path) {
        Ok(id) => id,
        Err(e) => return super::refused_after_admission(&req, Group::Orders, e.into()).await,
    };
    one_trip(
        &req,
        Group::Orders,
        None,
        async move |st, token| {
            Ok(st
                .orders
                .find_for_token(st.auth.key(&token), &order_id)
                .await?)
        },
        |_, me, order| match order {
            Some(l) => Ok(ok(OrderOut::listed(&l, me.admin()))),
            None => Err(ApiError::not_found("no such order")),
        },
    )
    .await
}

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = OrderIngest)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct OrderBody {
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
pub(super) async fn create_order(
    state: web::Data<AppState>,
    JsonBody(b): JsonBody<OrderBody>,
) -> Result {
    let order = Order::new(OrderParts::try_from(b)?)?;
    Ok(match state.orders.ingest(order).await? {
        OrderIngest::Created(l) => data(StatusCode::CREATED, OrderOut::listed(&l, true)),
        OrderIngest::Replayed(l) => ok(OrderOut::listed(&l, true)),
    })
}

impl TryFrom<OrderBody> for OrderParts {
    type Error = ValueError;

    fn try_from(b: OrderBody) -> std::result::Result<Self, ValueError> {
        let at = attribution(&b.partner_id, b.sub_id.as_deref())?;
        Ok(Self {
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
        })
    }
}

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = AnalyticsEventIngest)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct EventBody {
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
pub(super) async fn create_event(
    state: web::Data<AppState>,
    JsonBody(b): JsonBody<EventBody>,
) -> Result {
    let new = NewAnalyticsEvent::try_from(b)?;
    state.orders.record_event(new).await?;
    Ok(data(
        StatusCode::ACCEPTED,
        serde_json::json!({ "ok": true }),
    ))
}

impl TryFrom<EventBody> for NewAnalyticsEvent {
    type Error = ValueError;

    fn try_from(b: EventBody) -> std::result::Result<Self, ValueError> {
        let at = attribution(&b.partner_id, b.sub_id.as_deref())?;
        Self {
            run_id: parse_run_id(&b.run_id)?,
            partner_id: at.partner_id,
            sub_id: at.sub_id,
            event: parse_event_name(&b.event)?,
            product: optional_text(b.product.as_deref(), "product", 200)?,
            amount: b.amount.map(|a| Money::parse(a, "amount")).transpose()?,
            occurred_at: timestamp(&b.occurred_at, "occurredAt")?,
            test_source: TestSource::parse_field(&b.test_source, "testSource")?,
        }
        .checked()
    }
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
pub(super) async fn commission_summary(
    state: web::Data<AppState>,
    path: web::Path<String>,
    req: HttpRequest,
) -> Result {
    let partner = PartnerId::parse(&path)?;
    let q = Query::of(&req)?;
    let (from, to) = parse_period(q.get("from"), q.get("to"))?;
    match state.accounts.partner(&partner).await {
        Ok(_) => {}
        Err(NotFoundOr::NotFound) => {
            return Err(ApiError::not_found("no partner with that partnerId"));
        }
        Err(NotFoundOr::Repo(e)) => return Err(e.into()),
    }
    let summary = state.orders.commission_summary(&partner, from, to).await?;
    Ok(ok(CommissionSummaryOut::from(summary)))
}

/// Real orders and their commission in a period; test and simulated orders are only counted as
/// excluded.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = CommissionSummary)]
pub(crate) struct CommissionSummaryOut {
    order_count: u64,
    #[schema(value_type = crate::routes::schemas::Money)]
    commission_total: Money,
    excluded_test_orders: u64,
}

impl From<CommissionSummary> for CommissionSummaryOut {
    fn from(s: CommissionSummary) -> Self {
        Self {
            order_count: s.order_count,
            commission_total: s.commission_total,
            excluded_test_orders: s.excluded_test_orders,
        }
    }
}
