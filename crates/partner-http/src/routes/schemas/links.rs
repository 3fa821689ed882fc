//! The shareable links: DNA, medical intake and Care Services.

#![allow(dead_code)]

use utoipa::ToSchema;

#[allow(unused_imports)]
use super::*;

/// `DnaProductLink` of the spec.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DnaProductLink {
    #[schema(format = Uuid)]
    record_id: String,
    email: String,
    partner_id: String,
    product_name: String,
    description: String,
    intake_url: String,
    product_image_url: String,
    minimum_price: Money,
    recommended_price: Money,
    maximum_price: Money,
    user_set_price: Money,
    parent_product: Vec<String>,
    available: bool,
}

#[derive(ToSchema)]
pub(crate) struct DnaLinkList {
    data: Vec<DnaProductLink>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MedicalTierView {
    key: String,
    label: String,
    min_price: Money,
    max_price: Money,
    user_price: Money,
    commission: Money,
}

/// `PartnerProductLink` of the spec.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PartnerProductLink {
    #[schema(format = Uuid)]
    record_id: String,
    email: String,
    partner_id: String,
    product_name: String,
    details: String,
    url: String,
    legacy_url: String,
    /// `self-hosted` or `legacy`.
    url_style: String,
    image_url: String,
    category: Vec<Category>,
    suggested_prices: String,
    tiers: Vec<MedicalTierView>,
}

/// `{ data, sub }`: `sub` echoes the `sub` query parameter (`null` without it).
#[derive(ToSchema)]
pub(crate) struct MedicalLinkList {
    data: Vec<PartnerProductLink>,
    #[schema(required = true)]
    sub: Option<String>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CareTierView {
    key: String,
    label: String,
    user_price: Money,
    commission: Money,
    url: String,
}

/// `CareServiceLink` of the spec.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CareServiceLink {
    #[schema(format = Uuid)]
    record_id: String,
    service: CareService,
    product_name: String,
    description: String,
    image_url: String,
    url: String,
    redeem_url: String,
    tiers: Vec<CareTierView>,
}

/// `{ data, sub, service, duration }`, echoing the query (`null` where absent).
#[derive(ToSchema)]
pub(crate) struct CareLinkList {
    data: Vec<CareServiceLink>,
    #[schema(required = true)]
    sub: Option<String>,
    #[schema(required = true)]
    service: Option<CareService>,
    #[schema(minimum = 1, maximum = 12, required = true)]
    duration: Option<u8>,
}
