//! The `{ data }` wrappers of the rest of the operator API (the ingest answers, partners, flags,
//! users and tokens, the commission summary; the answers themselves are beside their routes) and
//! the flags' change body, which the handler reads as a map.

#![allow(dead_code)]

use utoipa::ToSchema;

#[allow(unused_imports)]
use super::*;

#[derive(ToSchema)]
pub(crate) struct LeadData {
    data: crate::routes::leads::LeadOut<'static>,
}

#[derive(ToSchema)]
pub(crate) struct OrderData {
    data: crate::routes::orders::OrderOut<'static>,
}

#[derive(ToSchema)]
pub(crate) struct PayoutData {
    data: crate::routes::payouts::PayoutOut<'static>,
}

#[derive(ToSchema)]
pub(crate) struct PartnerData {
    data: crate::routes::accounts::PartnerOut<'static>,
}

#[derive(ToSchema)]
pub(crate) struct CareFlagsData {
    data: crate::routes::accounts::CareFlagsOut,
}

/// A change of some switches: service name to on/off.
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CareFlagsChange {
    #[serde(rename = "primary-care")]
    primary_care: Option<bool>,
    #[serde(rename = "urgent-care")]
    urgent_care: Option<bool>,
    #[serde(rename = "mental-health")]
    mental_health: Option<bool>,
    dermatology: Option<bool>,
    #[serde(rename = "veterinary-care")]
    veterinary_care: Option<bool>,
}

#[derive(ToSchema)]
pub(crate) struct PortalUserData {
    data: crate::routes::accounts::PortalUserOut<'static>,
}

#[derive(ToSchema)]
pub(crate) struct IssuedTokenData {
    data: crate::routes::accounts::IssuedTokenOut<'static>,
}

#[derive(ToSchema)]
pub(crate) struct CommissionSummaryData {
    data: crate::routes::orders::CommissionSummaryOut,
}
