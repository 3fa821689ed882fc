//! The links' answer types: what the links calls and the catalog serialize, and their OpenAPI
//! schemas, from the domain's link values.

use partner_domain::kernel::ids::ProductId;
use partner_domain::kernel::values::{CareService, Money, PartnerId};
use partner_domain::links::{
    CareServiceLink, CareTierView, DnaProductLink, MedicalTierView, PartnerProductLink,
};
use serde::Serialize;
use utoipa::ToSchema;

use crate::routes::schemas::{Category, Money as MoneyDoc};

/// `DnaProductLink` of the spec.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = DnaProductLink)]
pub(crate) struct DnaLinkOut<'a> {
    #[schema(value_type = String, format = Uuid)]
    record_id: ProductId,
    email: &'a str,
    #[schema(value_type = String)]
    partner_id: &'a PartnerId,
    product_name: &'a str,
    description: &'a str,
    intake_url: &'a str,
    product_image_url: &'a str,
    #[schema(value_type = MoneyDoc)]
    minimum_price: Money,
    #[schema(value_type = MoneyDoc)]
    recommended_price: Money,
    #[schema(value_type = MoneyDoc)]
    maximum_price: Money,
    #[schema(value_type = MoneyDoc)]
    user_set_price: Money,
    parent_product: &'a [String],
    available: bool,
}

impl<'a> From<&'a DnaProductLink> for DnaLinkOut<'a> {
    fn from(l: &'a DnaProductLink) -> Self {
        Self {
            record_id: l.record_id,
            email: &l.email,
            partner_id: &l.partner_id,
            product_name: &l.product_name,
            description: &l.description,
            intake_url: &l.intake_url,
            product_image_url: &l.product_image_url,
            minimum_price: l.minimum_price,
            recommended_price: l.recommended_price,
            maximum_price: l.maximum_price,
            user_set_price: l.user_set_price,
            parent_product: &l.parent_product,
            available: l.available,
        }
    }
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = MedicalTierView)]
pub(crate) struct MedicalTierOut<'a> {
    key: &'a str,
    label: &'a str,
    #[schema(value_type = MoneyDoc)]
    min_price: Money,
    #[schema(value_type = MoneyDoc)]
    max_price: Money,
    #[schema(value_type = MoneyDoc)]
    user_price: Money,
    #[schema(value_type = MoneyDoc)]
    commission: Money,
}

impl<'a> From<&'a MedicalTierView> for MedicalTierOut<'a> {
    fn from(t: &'a MedicalTierView) -> Self {
        Self {
            key: &t.key,
            label: &t.label,
            min_price: t.min_price,
            max_price: t.max_price,
            user_price: t.user_price,
            commission: t.commission,
        }
    }
}

/// `PartnerProductLink` of the spec.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = PartnerProductLink)]
pub(crate) struct MedicalLinkOut<'a> {
    #[schema(value_type = String, format = Uuid)]
    record_id: ProductId,
    email: &'a str,
    #[schema(value_type = String)]
    partner_id: &'a PartnerId,
    product_name: &'a str,
    details: &'a str,
    url: &'a str,
    legacy_url: &'a str,
    /// `headless` or `legacy`.
    url_style: &'a str,
    image_url: &'a str,
    #[schema(value_type = Vec<Category>)]
    category: &'a [partner_domain::catalog::Category],
    suggested_prices: &'a str,
    tiers: Vec<MedicalTierOut<'a>>,
}

impl<'a> From<&'a PartnerProductLink> for MedicalLinkOut<'a> {
    fn from(l: &'a PartnerProductLink) -> Self {
        Self {
            record_id: l.record_id,
            email: &l.email,
            partner_id: &l.partner_id,
            product_name: &l.product_name,
            details: &l.details,
            url: &l.url,
            legacy_url: &l.legacy_url,
            url_style: l.url_style,
            image_url: &l.image_url,
            category: &l.category,
            suggested_prices: &l.suggested_prices,
            tiers: l.tiers.iter().map(MedicalTierOut::from).collect(),
        }
    }
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = CareTierView)]
pub(crate) struct CareTierOut<'a> {
    key: &'a str,
    label: &'a str,
    #[schema(value_type = MoneyDoc)]
    user_price: Money,
    #[schema(value_type = MoneyDoc)]
    commission: Money,
    url: &'a str,
}

impl<'a> From<&'a CareTierView> for CareTierOut<'a> {
    fn from(t: &'a CareTierView) -> Self {
        Self {
            key: &t.key,
            label: &t.label,
            user_price: t.user_price,
            commission: t.commission,
            url: &t.url,
        }
    }
}

/// `CareServiceLink` of the spec.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = CareServiceLink)]
pub(crate) struct CareLinkOut<'a> {
    #[schema(value_type = String, format = Uuid)]
    record_id: ProductId,
    #[schema(value_type = crate::routes::schemas::CareService)]
    service: &'static str,
    product_name: &'a str,
    description: &'a str,
    image_url: &'a str,
    url: &'a str,
    redeem_url: &'a str,
    tiers: Vec<CareTierOut<'a>>,
}

impl<'a> From<&'a CareServiceLink> for CareLinkOut<'a> {
    fn from(l: &'a CareServiceLink) -> Self {
        Self {
            record_id: l.record_id,
            service: CareService::as_str(l.service),
            product_name: &l.product_name,
            description: &l.description,
            image_url: &l.image_url,
            url: &l.url,
            redeem_url: &l.redeem_url,
            tiers: l.tiers.iter().map(CareTierOut::from).collect(),
        }
    }
}

/// `{ data }` of the DNA links.
#[derive(Serialize, ToSchema)]
#[schema(as = DnaLinkList)]
pub(crate) struct DnaBody<'a> {
    pub(crate) data: Vec<DnaLinkOut<'a>>,
}

/// `{ data, sub }`: `sub` echoes the `sub` query parameter (`null` without it).
#[derive(Serialize, ToSchema)]
#[schema(as = MedicalLinkList)]
pub(crate) struct MedicalBody<'a> {
    pub(crate) data: Vec<MedicalLinkOut<'a>>,
    #[schema(required = true)]
    pub(crate) sub: Option<String>,
}

/// `{ data, sub, service, duration }`, echoing the query (`null` where absent).
#[derive(Serialize, ToSchema)]
#[schema(as = CareLinkList)]
pub(crate) struct CareBody<'a> {
    pub(crate) data: Vec<CareLinkOut<'a>>,
    #[schema(required = true)]
    pub(crate) sub: Option<String>,
    #[schema(value_type = Option<crate::routes::schemas::CareService>, required = true)]
    pub(crate) service: Option<&'static str>,
    #[schema(minimum = 1, maximum = 12, required = true)]
    pub(crate) duration: Option<u8>,
}
