//! The answer types of the accounts API: partners, the Care Services switches, portal users and
//! their tokens, with their OpenAPI schemas, from the domain's account values.

use partner_domain::account::{
    ApiTokenInfo, CareFlags, CareServicesAccess, IssuedToken, Partner, PortalUser,
};
use partner_domain::kernel::ids::{TokenId, UserId};
use partner_domain::kernel::values::{CareService, Email, Lang, PartnerId};
use partner_domain::kernel::wire;
use serde::Serialize;
use time::OffsetDateTime;
use utoipa::ToSchema;

use crate::routes::schemas::{CareService as CareServiceDoc, Lang as LangDoc};

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = CareServicesAccess)]
pub(crate) struct CareServicesAccessOut<'a> {
    subscription_active: bool,
    manual_override: bool,
    yearly_bundle: bool,
    #[schema(value_type = Vec<CareServiceDoc>)]
    services: &'a [CareService],
}

impl<'a> From<&'a CareServicesAccess> for CareServicesAccessOut<'a> {
    fn from(c: &'a CareServicesAccess) -> Self {
        Self {
            subscription_active: c.subscription_active,
            manual_override: c.manual_override,
            yearly_bundle: c.yearly_bundle,
            services: &c.services,
        }
    }
}

/// A partner account.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Partner, example = json!({
    "partnerId": "demo-clinic", "name": "Demo Clinic", "email": "partners@demo-clinic.test",
    "active": true, "dnaAccess": true, "headlessLinks": true, "defaultLang": "en",
    "enabledLangs": ["en", "es"],
    "careServices": { "subscriptionActive": true, "manualOverride": false, "yearlyBundle": true,
                      "services": ["primary-care"] },
    "createdAt": "2026-11-21T10:00:00.000Z", "updatedAt": "2026-11-21T10:00:00.000Z"
}))]
pub(crate) struct PartnerOut<'a> {
    #[schema(value_type = String)]
    partner_id: &'a PartnerId,
    name: &'a str,
    #[schema(value_type = String)]
    email: &'a Email,
    active: bool,
    dna_access: bool,
    headless_links: bool,
    #[schema(value_type = LangDoc)]
    default_lang: Lang,
    #[schema(value_type = Vec<LangDoc>)]
    enabled_langs: &'a [Lang],
    care_services: CareServicesAccessOut<'a>,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String, format = DateTime)]
    created_at: OffsetDateTime,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String, format = DateTime)]
    updated_at: OffsetDateTime,
}

impl<'a> From<&'a Partner> for PartnerOut<'a> {
    fn from(p: &'a Partner) -> Self {
        let s = p.settings();
        Self {
            partner_id: p.partner_id(),
            name: s.name(),
            email: s.email(),
            active: s.active(),
            dna_access: s.dna_access(),
            headless_links: s.headless_links(),
            default_lang: s.default_lang(),
            enabled_langs: s.enabled_langs(),
            care_services: s.care_services().into(),
            created_at: p.created_at(),
            updated_at: p.updated_at(),
        }
    }
}

/// The global Care Services switches, one per service.
#[derive(Serialize, ToSchema)]
#[schema(as = CareFlags)]
pub(crate) struct CareFlagsOut {
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

impl From<&CareFlags> for CareFlagsOut {
    fn from(f: &CareFlags) -> Self {
        Self {
            primary_care: f.get(CareService::PrimaryCare),
            urgent_care: f.get(CareService::UrgentCare),
            mental_health: f.get(CareService::MentalHealth),
            dermatology: f.get(CareService::Dermatology),
            veterinary_care: f.get(CareService::VeterinaryCare),
        }
    }
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = PortalUser)]
pub(crate) struct PortalUserOut<'a> {
    #[schema(value_type = String, format = Uuid)]
    id: UserId,
    #[schema(value_type = String)]
    email: &'a Email,
    #[schema(value_type = String)]
    partner_id: &'a PartnerId,
    admin: bool,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String, format = DateTime)]
    created_at: OffsetDateTime,
}

impl<'a> From<&'a PortalUser> for PortalUserOut<'a> {
    fn from(u: &'a PortalUser) -> Self {
        Self {
            id: u.id(),
            email: u.email(),
            partner_id: u.partner_id(),
            admin: u.admin(),
            created_at: u.created_at(),
        }
    }
}

/// What is known of a token after creation: never its text.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = ApiTokenInfo)]
pub(crate) struct ApiTokenOut<'a> {
    #[schema(value_type = String, format = Uuid)]
    id: TokenId,
    token_prefix: &'a str,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String, format = DateTime)]
    created_at: OffsetDateTime,
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>, format = DateTime, required = true)]
    expires_at: Option<OffsetDateTime>,
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>, format = DateTime, required = true)]
    revoked_at: Option<OffsetDateTime>,
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>, format = DateTime, required = true)]
    last_used_at: Option<OffsetDateTime>,
}

impl<'a> From<&'a ApiTokenInfo> for ApiTokenOut<'a> {
    fn from(t: &'a ApiTokenInfo) -> Self {
        Self {
            id: t.id,
            token_prefix: &t.token_prefix,
            created_at: t.created_at,
            expires_at: t.expires_at,
            revoked_at: t.revoked_at,
            last_used_at: t.last_used_at,
        }
    }
}

/// `{ data }` of a user's tokens.
#[derive(Serialize, ToSchema)]
#[schema(as = ApiTokenList)]
pub(crate) struct ApiTokenList<'a> {
    pub(crate) data: Vec<ApiTokenOut<'a>>,
}

/// A token just created or rotated: the only time its text is shown.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = IssuedToken)]
pub(crate) struct IssuedTokenOut<'a> {
    #[schema(value_type = String, format = Uuid)]
    id: TokenId,
    token: &'a str,
    token_prefix: &'a str,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String, format = DateTime)]
    created_at: OffsetDateTime,
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>, format = DateTime, required = true)]
    expires_at: Option<OffsetDateTime>,
}

impl<'a> From<&'a IssuedToken> for IssuedTokenOut<'a> {
    fn from(t: &'a IssuedToken) -> Self {
        Self {
            id: t.id(),
            token: t.token().expose(),
            token_prefix: t.token_prefix(),
            created_at: t.created_at(),
            expires_at: t.expires_at(),
        }
    }
}
