//! The operator's products and partner prices.

#![allow(dead_code)]

use utoipa::ToSchema;

#[allow(unused_imports)]
use super::*;

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MedicalTier {
    key: String,
    label: String,
    months: u8,
    min_price: Money,
    max_price: Money,
    recommended_price: Money,
    commission: Money,
}

/// A stored medical product.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MedicalProduct {
    #[schema(format = Uuid)]
    id: String,
    name: String,
    categories: Vec<Category>,
    details: String,
    image_url: String,
    #[schema(format = Uuid)]
    image_file_id: String,
    image_source_url: String,
    active: bool,
    legacy_path: String,
    #[schema(required = true)]
    self_hosted_slug: Option<String>,
    self_hosted_langs: Vec<Lang>,
    suggested_prices: String,
    tiers: Vec<MedicalTier>,
    #[schema(format = DateTime)]
    created_at: String,
    #[schema(format = DateTime)]
    updated_at: String,
}

#[derive(ToSchema)]
pub(crate) struct MedicalProductData {
    data: MedicalProduct,
}

/// A stored DNA product.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DnaProduct {
    #[schema(format = Uuid)]
    id: String,
    product_name: String,
    description: String,
    intake_path: String,
    product_image_url: String,
    minimum_price: Money,
    recommended_price: Money,
    maximum_price: Money,
    parent_product: Vec<String>,
    available: bool,
    #[schema(format = DateTime)]
    created_at: String,
    #[schema(format = DateTime)]
    updated_at: String,
}

#[derive(ToSchema)]
pub(crate) struct DnaProductData {
    data: DnaProduct,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CareTier {
    key: String,
    label: String,
    months: u8,
    user_price: Money,
    commission: Money,
}

/// A stored Care Services product.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CareProduct {
    #[schema(format = Uuid)]
    id: String,
    service: CareService,
    slug: String,
    product_name: String,
    description: String,
    image_url: String,
    tiers: Vec<CareTier>,
    #[schema(format = DateTime)]
    created_at: String,
    #[schema(format = DateTime)]
    updated_at: String,
}

#[derive(ToSchema)]
pub(crate) struct CareProductData {
    data: CareProduct,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MedicalPrices {
    partner_id: String,
    #[schema(format = Uuid)]
    product_id: String,
    tier_prices: std::collections::BTreeMap<String, Money>,
}

#[derive(ToSchema)]
pub(crate) struct MedicalPricesData {
    data: MedicalPrices,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DnaPrice {
    partner_id: String,
    #[schema(format = Uuid)]
    product_id: String,
    user_set_price: Money,
}

#[derive(ToSchema)]
pub(crate) struct DnaPriceData {
    data: DnaPrice,
}
