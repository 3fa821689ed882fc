//! The catalog's answer types: the public catalog's products, and the operator's stored products
//! and partners' prices, with their OpenAPI schemas, from the domain's catalog values.

use std::collections::BTreeMap;

use partner_domain::catalog::{
    CareProduct, CareTier, Category, DnaProduct, MedicalProduct, MedicalTier, Stored,
};
use partner_domain::kernel::ids::{ImageFileId, ProductId};
use partner_domain::kernel::values::{Lang, Money, PartnerId};
use partner_domain::kernel::wire;
use partner_domain::links::CatalogProduct;
use serde::Serialize;
use time::OffsetDateTime;
use utoipa::ToSchema;

use crate::routes::schemas::{
    CareService as CareServiceDoc, Category as CategoryDoc, Lang as LangDoc, Money as MoneyDoc,
};

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

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = MedicalTier)]
pub(crate) struct MedicalTierOut<'a> {
    key: &'a str,
    label: &'a str,
    months: u8,
    #[schema(value_type = MoneyDoc)]
    min_price: Money,
    #[schema(value_type = MoneyDoc)]
    max_price: Money,
    #[schema(value_type = MoneyDoc)]
    recommended_price: Money,
    #[schema(value_type = MoneyDoc)]
    commission: Money,
}

impl<'a> From<&'a MedicalTier> for MedicalTierOut<'a> {
    fn from(t: &'a MedicalTier) -> Self {
        Self {
            key: &t.key,
            label: &t.label,
            months: t.months,
            min_price: t.min_price,
            max_price: t.max_price,
            recommended_price: t.recommended_price,
            commission: t.commission,
        }
    }
}

/// A stored medical product.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = MedicalProduct)]
pub(crate) struct MedicalProductOut<'a> {
    #[schema(value_type = String, format = Uuid)]
    id: ProductId,
    name: &'a str,
    #[schema(value_type = Vec<CategoryDoc>)]
    categories: &'a [Category],
    details: &'a str,
    image_url: &'a str,
    #[schema(value_type = String, format = Uuid)]
    image_file_id: ImageFileId,
    image_source_url: &'a str,
    active: bool,
    legacy_path: &'a str,
    #[schema(required = true)]
    self_hosted_slug: Option<&'a str>,
    #[schema(value_type = Vec<LangDoc>)]
    self_hosted_langs: &'a [Lang],
    suggested_prices: &'a str,
    tiers: Vec<MedicalTierOut<'a>>,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String, format = DateTime)]
    created_at: OffsetDateTime,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String, format = DateTime)]
    updated_at: OffsetDateTime,
}

impl<'a> From<&'a Stored<MedicalProduct>> for MedicalProductOut<'a> {
    fn from(s: &'a Stored<MedicalProduct>) -> Self {
        let p = &s.record;
        Self {
            id: p.id(),
            name: p.name(),
            categories: p.categories(),
            details: p.details(),
            image_url: p.image_url(),
            image_file_id: p.image_file_id(),
            image_source_url: p.image_source_url(),
            active: p.active(),
            legacy_path: p.legacy_path(),
            self_hosted_slug: p.self_hosted_slug(),
            self_hosted_langs: p.self_hosted_langs(),
            suggested_prices: p.suggested_prices(),
            tiers: p.tiers().iter().map(MedicalTierOut::from).collect(),
            created_at: s.created_at,
            updated_at: s.updated_at,
        }
    }
}

/// A stored DNA product.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = DnaProduct)]
pub(crate) struct DnaProductOut<'a> {
    #[schema(value_type = String, format = Uuid)]
    id: ProductId,
    product_name: &'a str,
    description: &'a str,
    intake_path: &'a str,
    product_image_url: &'a str,
    #[schema(value_type = MoneyDoc)]
    minimum_price: Money,
    #[schema(value_type = MoneyDoc)]
    recommended_price: Money,
    #[schema(value_type = MoneyDoc)]
    maximum_price: Money,
    parent_product: &'a [String],
    available: bool,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String, format = DateTime)]
    created_at: OffsetDateTime,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String, format = DateTime)]
    updated_at: OffsetDateTime,
}

impl<'a> From<&'a Stored<DnaProduct>> for DnaProductOut<'a> {
    fn from(s: &'a Stored<DnaProduct>) -> Self {
        let p = &s.record;
        Self {
            id: p.id(),
            product_name: p.product_name(),
            description: p.description(),
            intake_path: p.intake_path(),
            product_image_url: p.product_image_url(),
            minimum_price: p.minimum_price(),
            recommended_price: p.recommended_price(),
            maximum_price: p.maximum_price(),
            parent_product: p.parent_product(),
            available: p.available(),
            created_at: s.created_at,
            updated_at: s.updated_at,
        }
    }
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = CareTier)]
pub(crate) struct CareTierOut<'a> {
    key: &'a str,
    label: &'a str,
    months: u8,
    #[schema(value_type = MoneyDoc)]
    user_price: Money,
    #[schema(value_type = MoneyDoc)]
    commission: Money,
}

impl<'a> From<&'a CareTier> for CareTierOut<'a> {
    fn from(t: &'a CareTier) -> Self {
        Self {
            key: &t.key,
            label: &t.label,
            months: t.months,
            user_price: t.user_price,
            commission: t.commission,
        }
    }
}

/// A stored Care Services product.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = CareProduct)]
pub(crate) struct CareProductOut<'a> {
    #[schema(value_type = String, format = Uuid)]
    id: ProductId,
    #[schema(value_type = CareServiceDoc)]
    service: &'static str,
    slug: &'a str,
    product_name: &'a str,
    description: &'a str,
    image_url: &'a str,
    tiers: Vec<CareTierOut<'a>>,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String, format = DateTime)]
    created_at: OffsetDateTime,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String, format = DateTime)]
    updated_at: OffsetDateTime,
}

impl<'a> From<&'a Stored<CareProduct>> for CareProductOut<'a> {
    fn from(s: &'a Stored<CareProduct>) -> Self {
        let p = &s.record;
        Self {
            id: p.id(),
            service: p.service().as_str(),
            slug: p.slug(),
            product_name: p.product_name(),
            description: p.description(),
            image_url: p.image_url(),
            tiers: p.tiers().iter().map(CareTierOut::from).collect(),
            created_at: s.created_at,
            updated_at: s.updated_at,
        }
    }
}

/// A partner's tier prices of a medical product.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = MedicalPrices)]
pub(crate) struct MedicalPricesOut<'a> {
    #[schema(value_type = String)]
    pub(crate) partner_id: &'a PartnerId,
    #[schema(value_type = String, format = Uuid)]
    pub(crate) product_id: ProductId,
    #[schema(value_type = BTreeMap<String, MoneyDoc>)]
    pub(crate) tier_prices: &'a BTreeMap<String, Money>,
}

/// A partner's price of a DNA product.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = DnaPrice)]
pub(crate) struct DnaPriceOut<'a> {
    #[schema(value_type = String)]
    pub(crate) partner_id: &'a PartnerId,
    #[schema(value_type = String, format = Uuid)]
    pub(crate) product_id: ProductId,
    #[schema(value_type = MoneyDoc)]
    pub(crate) user_set_price: Money,
}
