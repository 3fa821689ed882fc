//! The catalog's answer types: the public catalog's products, and the operator's stored products
//! and partners' prices, with their OpenAPI schemas, from the domain's catalog values.

use partner_domain::kernel::ids::{ImageFileId, ProductId};
use partner_domain::links::CatalogProduct;
use serde::Serialize;
use utoipa::ToSchema;

/// A product of the public catalog.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = CatalogProduct)]
pub(crate) struct CatalogProductOut<'a> {
    #[schema(value_type = String, format = Uuid)]
    id: ProductId,
    name: &'a str,
    image: &'a str,
    image_kind: &'static str,
    #[schema(value_type = String, format = Uuid)]
    image_file_id: ImageFileId,
    image_source_url: &'a str,
    intake_url: &'a str,
    #[serde(rename = "price1Month")]
    #[schema(example = "$299.00")]
    price_1_month: &'a str,
    #[serde(rename = "price3Month")]
    price_3_month: &'a str,
    #[serde(rename = "price6Month")]
    price_6_month: &'a str,
    details: &'a str,
}

impl<'a> From<&'a CatalogProduct> for CatalogProductOut<'a> {
    fn from(p: &'a CatalogProduct) -> Self {
        Self {
            id: p.id,
            name: &p.name,
            image: &p.image,
            image_kind: p.image_kind,
            image_file_id: p.image_file_id,
            image_source_url: &p.image_source_url,
            intake_url: &p.intake_url,
            price_1_month: &p.price_1_month,
            price_3_month: &p.price_3_month,
            price_6_month: &p.price_6_month,
            details: &p.details,
        }
    }
}

/// `{ products, count }`.
#[derive(Serialize, ToSchema)]
#[schema(as = CatalogList)]
pub(crate) struct CatalogBody<'a> {
    pub(crate) products: Vec<CatalogProductOut<'a>>,
    #[schema(value_type = u64)]
    pub(crate) count: usize,
}
