//! The rest of the operator API: the ingest answers, partners, flags, users and tokens, the commission summary.

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
#[serde(rename_all = "camelCase")]
pub(crate) struct CareServicesAccess {
    subscription_active: bool,
    manual_override: bool,
    yearly_bundle: bool,
    services: Vec<CareService>,
}

/// A partner account.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({
    "partnerId": "demo-clinic", "name": "Demo Clinic", "email": "partners@demo-clinic.test",
    "active": true, "dnaAccess": true, "headlessLinks": true, "defaultLang": "en",
    "enabledLangs": ["en", "es"],
    "careServices": { "subscriptionActive": true, "manualOverride": false, "yearlyBundle": true,
                      "services": ["primary-care"] },
    "createdAt": "2026-11-21T10:00:00.000Z", "updatedAt": "2026-11-21T10:00:00.000Z"
}))]
pub(crate) struct Partner {
    partner_id: String,
    name: String,
    email: String,
    active: bool,
    dna_access: bool,
    headless_links: bool,
    default_lang: Lang,
    enabled_langs: Vec<Lang>,
    care_services: CareServicesAccess,
    #[schema(format = DateTime)]
    created_at: String,
    #[schema(format = DateTime)]
    updated_at: String,
}

#[derive(ToSchema)]
pub(crate) struct PartnerData {
    data: Partner,
}

/// The global Care Services switches, one per service.
#[derive(ToSchema)]
pub(crate) struct CareFlags {
    #[serde(rename = "primary-care")]
    primary_care: bool,
    #[serde(rename = "urgent-care")]
    urgent_care: bool,
    #[serde(rename = "mental-health")]
    mental_health: bool,
    dermatology: bool,
    #[serde(rename = "veterinary-care")]
    veterinary_care: bool,
}

#[derive(ToSchema)]
pub(crate) struct CareFlagsData {
    data: CareFlags,
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
#[serde(rename_all = "camelCase")]
pub(crate) struct PortalUser {
    #[schema(format = Uuid)]
    id: String,
    email: String,
    partner_id: String,
    admin: bool,
    #[schema(format = DateTime)]
    created_at: String,
}

#[derive(ToSchema)]
pub(crate) struct PortalUserData {
    data: PortalUser,
}

/// What is known of a token after creation: never its text.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ApiTokenInfo {
    #[schema(format = Uuid)]
    id: String,
    token_prefix: String,
    #[schema(format = DateTime)]
    created_at: String,
    #[schema(format = DateTime, required = true)]
    expires_at: Option<String>,
    #[schema(format = DateTime, required = true)]
    revoked_at: Option<String>,
    #[schema(format = DateTime, required = true)]
    last_used_at: Option<String>,
}

#[derive(ToSchema)]
pub(crate) struct ApiTokenList {
    data: Vec<ApiTokenInfo>,
}

/// A token just created or rotated: the only time its text is shown.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct IssuedToken {
    #[schema(format = Uuid)]
    id: String,
    token: String,
    token_prefix: String,
    #[schema(format = DateTime)]
    created_at: String,
    #[schema(format = DateTime, required = true)]
    expires_at: Option<String>,
}

#[derive(ToSchema)]
pub(crate) struct IssuedTokenData {
    data: IssuedToken,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CommissionSummary {
    order_count: u64,
    commission_total: Money,
    excluded_test_orders: u64,
}

#[derive(ToSchema)]
pub(crate) struct CommissionSummaryData {
    data: CommissionSummary,
}
