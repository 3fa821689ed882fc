//! `GET /api/v1/care-services-coupons` (JSON or CSV), and the operator's coupon calls.

use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpRequest, HttpResponse, web};
use partner_domain::coupon::{
    BulkOrder, BulkOrderRequest, Coupon, CouponAt, CouponCode, CouponFilter, CouponPage,
    CouponQuery, CouponStatus, ProductSlug, ScopeError, listing_scope, parse_months,
    parse_quantity,
};
use partner_domain::kernel::ids::{BulkOrderId, CouponId};
use partner_domain::kernel::page::parse_limit;
use partner_domain::kernel::params::{ListFormat, non_negative};
use partner_domain::kernel::values::{Email, PartnerId, SubId, ValueError, text};
use partner_domain::kernel::wire;
use partner_domain::kernel::wire::{format_timestamp, parse_timestamp_field};
use partner_domain::payout::format_date;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::{Result, data, ok};
use crate::AppState;
use crate::error::ApiError;
use crate::extract::{JsonBody, Query, uuid};
use crate::middleware::one_trip;
use crate::ratelimit::Group;
use partner_domain::account::auth::Principal;

fn slug(s: &str) -> std::result::Result<ProductSlug, ValueError> {
    ProductSlug::parse_field(s, "productSlug")
}

/// `CareServiceCoupon` of the spec (plus `subAccountId`, the attributed sub-account's subId).
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Coupon, example = json!({
    "id": "3a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", "code": "K7Q2M9X4P1ZD", "partnerId": "demo-clinic",
    "subAccountId": null, "productSlug": "urgent-care", "months": 3, "status": "active",
    "expiresAt": null, "redeemedAt": null, "redeemedEmail": null,
    "redeemedProviderPrimaryExternalId": null,
    "bulkOrderId": "7b8c9d0e-1f2a-4b3c-8d4e-5f6a7b8c9d0e",
    "purchaserEmail": "hr@acme.test", "purchaserSource": "invoice", "unitPriceCents": 4900,
    "notes": null, "createdAt": "2026-11-21T10:00:00.000Z"
}))]
// Its status is the coupon's at the instant it was read (`CouponOut::at`).
pub(crate) struct CouponOut<'a> {
    #[schema(value_type = String, format = Uuid)]
    id: CouponId,
    #[schema(value_type = String, pattern = "^[A-Z0-9]{12}$")]
    code: &'a CouponCode,
    #[schema(value_type = String)]
    partner_id: &'a PartnerId,
    #[schema(value_type = Option<String>, required = true)]
    sub_account_id: Option<SubId>,
    #[schema(value_type = crate::routes::schemas::ProductSlug)]
    product_slug: ProductSlug,
    #[schema(minimum = 1, maximum = 12)]
    months: u8,
    #[schema(value_type = crate::routes::schemas::CouponStatus)]
    status: CouponStatus,
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>, format = DateTime, required = true)]
    expires_at: Option<OffsetDateTime>,
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>, format = DateTime, required = true)]
    redeemed_at: Option<OffsetDateTime>,
    #[schema(value_type = Option<String>, required = true)]
    redeemed_email: Option<&'a str>,
    #[schema(value_type = Option<String>, required = true)]
    redeemed_provider_primary_external_id: Option<&'a str>,
    #[schema(value_type = String, format = Uuid)]
    bulk_order_id: BulkOrderId,
    purchaser_email: &'a str,
    purchaser_source: &'a str,
    unit_price_cents: i64,
    #[schema(value_type = Option<String>, required = true)]
    notes: Option<&'a str>,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String, format = DateTime)]
    created_at: OffsetDateTime,
}

impl<'a> CouponOut<'a> {
    /// `c` as it stands at `at` (its status).
    pub(crate) fn at(c: &'a Coupon, at: OffsetDateTime) -> Self {
        let redemption = c.redemption();
        Self {
            id: c.id(),
            code: c.code(),
            partner_id: c.partner_id(),
            sub_account_id: c.sub_id(),
            product_slug: c.product_slug(),
            months: c.months(),
            status: c.status_at(at),
            expires_at: c.expires_at(),
            redeemed_at: redemption.map(|r| r.at),
            redeemed_email: redemption.map(|r| r.email.as_str()),
            redeemed_provider_primary_external_id: redemption
                .map(|r| r.provider_primary_external_id.as_str()),
            bulk_order_id: c.bulk_order_id(),
            purchaser_email: c.purchaser_email(),
            purchaser_source: c.purchaser_source(),
            unit_price_cents: c.unit_price_cents(),
            notes: c.notes(),
            created_at: c.created_at(),
        }
    }
}

impl<'a> From<&'a CouponAt> for CouponOut<'a> {
    fn from(c: &'a CouponAt) -> Self {
        Self::at(&c.coupon, c.at)
    }
}

/// An issued bulk order.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = BulkOrder)]
pub(crate) struct BulkOrderOut<'a> {
    #[schema(value_type = String, format = Uuid)]
    bulk_order_id: BulkOrderId,
    coupons: Vec<CouponOut<'a>>,
}

impl<'a> From<&'a BulkOrder> for BulkOrderOut<'a> {
    fn from(o: &'a BulkOrder) -> Self {
        Self {
            bulk_order_id: o.bulk_order_id,
            coupons: o.coupons.iter().map(|c| CouponOut::at(c, o.at)).collect(),
        }
    }
}

#[derive(Serialize)]
pub(super) struct ListBody<'a> {
    data: Vec<CouponOut<'a>>,
    total: u64,
    limit: u16,
    offset: u64,
}

/// CSV columns, in the spec's order.
const CSV_HEADER: [&str; 16] = [
    "code",
    "product_slug",
    "months",
    "status",
    "partner_id",
    "sub_account_id",
    "unit_price_cents",
    "bulk_order_id",
    "purchaser_email",
    "purchaser_source",
    "created_at",
    "expires_at",
    "redeemed_at",
    "redeemed_email",
    "redeemed_provider_primary_external_id",
    "notes",
];

/// A coupon's CSV cells, in [`CSV_HEADER`]'s order, as stored (null is empty). Neutralising
/// formula-like values is [`crate::csv_export::write`]'s job.
fn csv_cells(r: &CouponOut<'_>) -> [String; 16] {
    let ts = |t: Option<OffsetDateTime>| t.map(format_timestamp).unwrap_or_default();
    let opt = |v: Option<&str>| v.unwrap_or_default().to_owned();
    [
        r.code.as_str().to_owned(),
        r.product_slug.as_str().to_owned(),
        r.months.to_string(),
        r.status.as_str().to_owned(),
        r.partner_id.as_str().to_owned(),
        r.sub_account_id.map(|s| s.to_string()).unwrap_or_default(),
        r.unit_price_cents.to_string(),
        r.bulk_order_id.to_string(),
        r.purchaser_email.to_owned(),
        r.purchaser_source.to_owned(),
        format_timestamp(r.created_at),
        ts(r.expires_at),
        ts(r.redeemed_at),
        opt(r.redeemed_email),
        opt(r.redeemed_provider_primary_external_id),
        opt(r.notes),
    ]
}

fn csv_body(page: &CouponPage) -> std::result::Result<Vec<u8>, ApiError> {
    crate::csv_export::write(
        CSV_HEADER,
        page.items
            .iter()
            .map(|c| csv_cells(&CouponOut::at(c, page.at))),
        256 * (page.items.len() + 1),
    )
    .map_err(|e| ApiError::internal(&e))
}

#[utoipa::path(
    get, path = "/api/v1/care-services-coupons", tag = "coupons",
    params(
        ("partner_id" = Option<String>, Query, description = "Another partner (admin tokens only)"),
        ("status" = Option<String>, Query, description = "Comma-separated subset of `active`, `redeemed`, `void`, `expired`"),
        ("product_slug" = Option<crate::routes::schemas::ProductSlug>, Query, description = "One product"),
        ("format" = Option<String>, Query, description = "`json` (default) or `csv`", pattern = "^(json|csv)$"),
        ("limit" = Option<u16>, Query, description = "1-500 (default 100, 500 for CSV)", minimum = 1, maximum = 500),
        ("offset" = Option<u64>, Query, description = "Rows to skip (default 0)", minimum = 0, maximum = 999999999999u64),
    ),
    responses(
        (status = 200, description = "A page of coupons, as JSON or (with `format=csv`) as a CSV attachment whose formula-like cells are neutralised",
            headers(("X-Total-Count" = u64, description = "With `format=csv`: coupons matching the filters"), ("Content-Disposition" = String, description = "With `format=csv`: `attachment; filename=...`")),
            content((crate::routes::schemas::CouponList = "application/json"), (String = "text/csv"))),
        (status = 400, description = "A parameter is invalid", body = crate::routes::schemas::ErrorBody),
        (status = 403, description = "Only admin tokens may list another partner's coupons, or the account is inactive", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "The Care Services API is disabled", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn list(req: HttpRequest) -> HttpResponse {
    // One round trip: the page and its count are read with the token's record, for the partner
    // the statements derive from the token (`listing_scope`'s rule). The parameters are checked
    // again once authenticated, in their original order, so every 400/403 is the one the guard
    // path gave; a request with an invalid parameter looks the token up alone.
    let parsed = Query::of(&req).and_then(|q| unscoped(&q));
    match parsed {
        Ok((filter, _)) => {
            one_trip(
                &req,
                Group::Coupons,
                None,
                async move |st, token| {
                    Ok(st
                        .coupons
                        .list_for_token(st.auth.key(&token), &filter)
                        .await?)
                },
                |st, me, page| {
                    let q = Query::of(&req)?;
                    let (query, csv) = listing(&me, &q)?;
                    // The statements scoped the rows; this keeps a faulty adapter honest.
                    if page.items.iter().any(|c| *c.partner_id() != query.partner) {
                        return Err(ApiError::internal(
                            &"a coupon page held another partner's coupon",
                        ));
                    }
                    crate::audit::cross_read(&me, &query.partner, req.path(), page.items.len());
                    respond(st, page, query.limit, query.offset, csv)
                },
            )
            .await
        }
        Err(e) => {
            one_trip(
                &req,
                Group::Coupons,
                None,
                async |st, token| st.auth.lookup(&token).await,
                |_, me, ()| {
                    let q = Query::of(&req)?;
                    Err(listing(&me, &q).err().unwrap_or(e))
                },
            )
            .await
        }
    }
}

/// One coupon by its code, matched as redemption matches it (extensions §8.2).
#[utoipa::path(
    get, path = "/api/v1/care-services-coupons/{code}", tag = "coupons",
    params(("code" = String, Path, description = "The coupon's code; trimmed, upper-cased, spaces and hyphens removed before matching")),
    responses(
        (status = 200, description = "The coupon, as the listing shows it", body = crate::routes::schemas::CouponData),
        (status = 400, description = "`code` is not a coupon code", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "The partner has no coupon with that code, or the Care Services API is disabled", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn one(req: HttpRequest, path: web::Path<String>) -> HttpResponse {
    // One round trip, as the listing; a malformed code answers 400 after authentication.
    let code = match CouponCode::normalize_path(&path) {
        Ok(code) => code,
        Err(e) => return super::refused_after_admission(&req, Group::Coupons, e.into()).await,
    };
    one_trip(
        &req,
        Group::Coupons,
        None,
        async move |st, token| {
            Ok(st
                .coupons
                .find_for_token(st.auth.key(&token), &code)
                .await?)
        },
        |_, _, coupon| match coupon {
            Some(c) => Ok(ok(CouponOut::from(&c))),
            None => Err(ApiError::not_found("no such coupon")),
        },
    )
    .await
}

/// The listing's parameters that need no caller: `partner_id` only parsed, the others checked.
fn unscoped(q: &Query) -> std::result::Result<(CouponFilter, bool), ApiError> {
    let requested = q
        .get("partner_id")
        .map(PartnerId::parse)
        .transpose()
        .map_err(|_| ApiError::invalid(ScopeError::Malformed.to_string()))?;
    let (statuses, product_slug, csv, limit, offset) = parameters(q)?;
    Ok((
        CouponFilter {
            requested,
            statuses,
            product_slug,
            limit,
            offset,
        },
        csv,
    ))
}

/// The listing asked for by `me`, in the order the parameters were always checked: whose
/// coupons (400 malformed, 403 another partner's without admin), then the others.
fn listing(me: &Principal, q: &Query) -> std::result::Result<(CouponQuery, bool), ApiError> {
    let partner = listing_scope(me, q.get("partner_id")).map_err(|e| match e {
        e @ ScopeError::Malformed => ApiError::invalid(e.to_string()),
        e @ ScopeError::Forbidden => ApiError::forbidden(e.to_string()),
    })?;
    let (statuses, product_slug, csv, limit, offset) = parameters(q)?;
    Ok((
        CouponQuery {
            partner,
            statuses,
            product_slug,
            limit,
            offset,
        },
        csv,
    ))
}

type Parameters = (Vec<CouponStatus>, Option<ProductSlug>, bool, u16, u64);

/// `status`, `product_slug`, `format`, `limit`, `offset`, checked in that order.
fn parameters(q: &Query) -> std::result::Result<Parameters, ApiError> {
    let statuses = match q.get("status") {
        None | Some("") => Vec::new(),
        Some(s) => CouponStatus::parse_list(s)?,
    };
    let product_slug = q.get("product_slug").map(slug).transpose()?;
    let csv = ListFormat::parse_param(q.get("format"))? == ListFormat::Csv;
    let limit = parse_limit(q.get("limit"), if csv { 500 } else { 100 }, 500)?;
    let offset = crate::params::offset(q.get("offset"))?;
    Ok((statuses, product_slug, csv, limit, offset))
}

/// The page as JSON, or as the CSV export.
fn respond(state: &AppState, page: CouponPage, limit: u16, offset: u64, csv: bool) -> Result {
    if !csv {
        return Ok(HttpResponse::Ok().json(ListBody {
            data: page
                .items
                .iter()
                .map(|c| CouponOut::at(c, page.at))
                .collect(),
            total: page.total,
            limit,
            offset,
        }));
    }
    let file = format!(
        "care-services-coupons-{}.csv",
        format_date(state.coupons.now().date())
    );
    Ok(HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, HeaderValue::from_static("text/csv")))
        .insert_header((
            header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"{file}\""),
        ))
        .insert_header(("X-Total-Count", page.total.to_string()))
        .body(csv_body(&page)?))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = BulkOrderRequest)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct BulkBody {
    partner_id: String,
    product_slug: String,
    months: i64,
    quantity: i64,
    unit_price_cents: i64,
    purchaser_email: String,
    purchaser_source: String,
    sub_account_id: Option<String>,
    expires_at: Option<String>,
    notes: Option<String>,
}

#[utoipa::path(
    post, path = "/internal/v1/care-services-coupons/bulk-orders", tag = "coupons", request_body = BulkBody,
    responses(
        (status = 201, description = "The bulk order and its coupons", body = crate::routes::schemas::BulkOrderData),
        (status = 400, description = "A field is invalid", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No partner with that `partnerId`", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn issue(state: web::Data<AppState>, JsonBody(b): JsonBody<BulkBody>) -> Result {
    let order = state.coupons.issue(BulkOrderRequest::try_from(b)?).await?;
    Ok(data(
        actix_web::http::StatusCode::CREATED,
        BulkOrderOut::from(&order),
    ))
}

impl TryFrom<BulkBody> for BulkOrderRequest {
    type Error = ValueError;

    /// Checked in the order the handler always checked them: `quantity` and `unitPriceCents`
    /// first, then the fields as declared.
    fn try_from(b: BulkBody) -> std::result::Result<Self, ValueError> {
        let quantity = parse_quantity(b.quantity)?;
        let unit_price_cents = non_negative(b.unit_price_cents, "unitPriceCents")?;
        Ok(Self {
            partner_id: PartnerId::parse(&b.partner_id)?,
            sub_id: b.sub_account_id.as_deref().map(SubId::parse).transpose()?,
            product_slug: slug(&b.product_slug)?,
            months: parse_months(b.months)?,
            quantity,
            unit_price_cents,
            purchaser_email: Email::parse_field(&b.purchaser_email, "purchaserEmail")?,
            purchaser_source: text("purchaserSource", &b.purchaser_source, 1, 64)?,
            expires_at: b
                .expires_at
                .as_deref()
                .map(|s| parse_timestamp_field(s, "expiresAt"))
                .transpose()?,
            notes: b
                .notes
                .as_deref()
                .map(|n| text("notes", n, 0, 2000))
                .transpose()?
                .filter(|n| !n.is_empty()),
        })
    }
}

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = CouponRedemption)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RedeemBody {
    code: String,
    product_slug: String,
    months: i64,
    email: String,
    provider_primary_external_id: String,
}

#[utoipa::path(
    post, path = "/internal/v1/care-services-coupons/redeem", tag = "coupons", request_body = RedeemBody,
    responses(
        (status = 200, description = "The redeemed coupon", body = crate::routes::schemas::CouponData),
        (status = 400, description = "A field is invalid, or the coupon is for another product or duration", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No such coupon", body = crate::routes::schemas::ErrorBody),
        (status = 409, description = "The coupon is not active", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn redeem(
    state: web::Data<AppState>,
    JsonBody(b): JsonBody<RedeemBody>,
) -> Result {
    let r = RedeemRequest::try_from(b)?;
    let who = state
        .coupons
        .redemption(&r.email, r.provider_primary_external_id);
    let redeemed = state.coupons.redeem(&r.code, r.slug, r.months, who).await?;
    Ok(ok(CouponOut::from(&redeemed)))
}

/// A redemption body as the domain's values; the service stamps the time.
struct RedeemRequest {
    code: CouponCode,
    slug: ProductSlug,
    months: u8,
    email: Email,
    provider_primary_external_id: String,
}

impl TryFrom<RedeemBody> for RedeemRequest {
    type Error = ValueError;

    fn try_from(b: RedeemBody) -> std::result::Result<Self, ValueError> {
        Ok(Self {
            code: CouponCode::normalize_field(&b.code, "code")?,
            slug: slug(&b.product_slug)?,
            months: parse_months(b.months)?,
            email: Email::parse(&b.email)?,
            provider_primary_external_id: text(
                "providerPrimaryExternalId",
                &b.provider_primary_external_id,
                1,
                200,
            )?,
        })
    }
}

#[utoipa::path(
    post, path = "/internal/v1/care-services-coupons/{id}/void", tag = "coupons",
    params(
        ("id" = String, Path, description = "The coupon's id (a UUID)", format = Uuid),
    ),
    responses(
        (status = 200, description = "The voided coupon", body = crate::routes::schemas::CouponData),
        (status = 400, description = "`id` is not a UUID", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No such coupon", body = crate::routes::schemas::ErrorBody),
        (status = 409, description = "The coupon is not active", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn void(state: web::Data<AppState>, path: web::Path<String>) -> Result {
    let id = CouponId::from_uuid(uuid(&path, "coupon id")?);
    let void = state.coupons.void(id).await?;
    Ok(ok(CouponOut::from(&void)))
}
