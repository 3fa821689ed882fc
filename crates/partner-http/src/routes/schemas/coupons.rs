//! Care Services coupons.

#![allow(dead_code)]

use utoipa::ToSchema;

#[allow(unused_imports)]
use super::*;

/// `CareServiceCoupon` of the spec (plus `subAccountId`, the attributed sub-account's subId).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({
    "id": "3a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", "code": "K7Q2M9X4P1ZD", "partnerId": "demo-clinic",
    "subAccountId": null, "productSlug": "urgent-care", "months": 3, "status": "active",
    "expiresAt": null, "redeemedAt": null, "redeemedEmail": null,
    "redeemedProviderPrimaryExternalId": null,
    "bulkOrderId": "7b8c9d0e-1f2a-4b3c-8d4e-5f6a7b8c9d0e",
    "purchaserEmail": "hr@acme.test", "purchaserSource": "invoice", "unitPriceCents": 4900,
    "notes": null, "createdAt": "2026-11-21T10:00:00.000Z"
}))]
pub(crate) struct Coupon {
    #[schema(format = Uuid)]
    id: String,
    #[schema(pattern = "^[A-Z0-9]{12}$")]
    code: String,
    partner_id: String,
    #[schema(required = true)]
    sub_account_id: Option<String>,
    product_slug: ProductSlug,
    #[schema(minimum = 1, maximum = 12)]
    months: u8,
    status: CouponStatus,
    #[schema(format = DateTime, required = true)]
    expires_at: Option<String>,
    #[schema(format = DateTime, required = true)]
    redeemed_at: Option<String>,
    #[schema(required = true)]
    redeemed_email: Option<String>,
    #[schema(required = true)]
    redeemed_provider_primary_external_id: Option<String>,
    #[schema(format = Uuid)]
    bulk_order_id: String,
    purchaser_email: String,
    purchaser_source: String,
    unit_price_cents: i64,
    #[schema(required = true)]
    notes: Option<String>,
    #[schema(format = DateTime)]
    created_at: String,
}

/// `{ data, total, limit, offset }`: an offset page of coupons.
#[derive(ToSchema)]
pub(crate) struct CouponList {
    data: Vec<Coupon>,
    total: u64,
    #[schema(minimum = 1, maximum = 500)]
    limit: u16,
    offset: u64,
}

/// An issued bulk order.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BulkOrder {
    #[schema(format = Uuid)]
    bulk_order_id: String,
    coupons: Vec<Coupon>,
}

#[derive(ToSchema)]
pub(crate) struct BulkOrderData {
    data: BulkOrder,
}

#[derive(ToSchema)]
pub(crate) struct CouponData {
    data: Coupon,
}
