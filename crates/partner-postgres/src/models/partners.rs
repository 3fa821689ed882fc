//! `partners` rows.

use diesel::prelude::*;
use partner_domain::RepoError;
use partner_domain::account::{CareServicesAccess, Partner, PartnerSettings, PartnerSettingsInput};
use partner_domain::kernel::values::{CareService, Email, Lang, PartnerId};
use time::OffsetDateTime;

use crate::corrupt;
use crate::schema::partners;

/// A partner's account settings.
#[derive(Queryable, Selectable)]
#[diesel(table_name = partners, check_for_backend(diesel::pg::Pg))]
pub(crate) struct PartnerRow {
    partner_id: String,
    name: String,
    email: String,
    active: bool,
    dna_access: bool,
    headless_links: bool,
    default_lang: String,
    enabled_langs: Vec<String>,
    cs_subscription_active: bool,
    cs_manual_override: bool,
    cs_yearly_bundle: bool,
    cs_services: Vec<String>,
    created_at: OffsetDateTime,
    updated_at: OffsetDateTime,
}

impl PartnerRow {
    pub(crate) fn into_domain(self) -> Result<Partner, RepoError> {
        let lang = |s: &str| Lang::parse(s).ok_or_else(|| corrupt("language"));
        let settings = PartnerSettings::parse(PartnerSettingsInput {
            name: self.name,
            email: Email::parse(&self.email).map_err(|_| corrupt("email"))?,
            active: self.active,
            dna_access: self.dna_access,
            headless_links: self.headless_links,
            default_lang: lang(&self.default_lang)?,
            enabled_langs: self
                .enabled_langs
                .iter()
                .map(|l| lang(l))
                .collect::<Result<_, _>>()?,
            care_services: CareServicesAccess {
                subscription_active: self.cs_subscription_active,
                manual_override: self.cs_manual_override,
                yearly_bundle: self.cs_yearly_bundle,
                services: self
                    .cs_services
                    .iter()
                    .map(|s| CareService::parse(s).ok_or_else(|| corrupt("care service")))
                    .collect::<Result<_, _>>()?,
            },
        })
        .map_err(|_| corrupt("partner settings"))?;
        Ok(Partner::new(
            PartnerId::parse(&self.partner_id).map_err(|_| corrupt("partner id"))?,
            settings,
            self.created_at,
            self.updated_at,
        ))
    }
}

/// A partner's settings as the operator's upsert writes them (`created_at` only on insert).
#[derive(Insertable)]
#[diesel(table_name = partners)]
pub(crate) struct NewPartner<'a> {
    partner_id: &'a str,
    name: &'a str,
    email: &'a str,
    active: bool,
    dna_access: bool,
    headless_links: bool,
    default_lang: &'a str,
    enabled_langs: Vec<&'a str>,
    cs_subscription_active: bool,
    cs_manual_override: bool,
    cs_yearly_bundle: bool,
    cs_services: Vec<&'a str>,
    created_at: OffsetDateTime,
    updated_at: OffsetDateTime,
}

impl<'a> NewPartner<'a> {
    pub(crate) fn new(id: &'a PartnerId, s: &'a PartnerSettings, now: OffsetDateTime) -> Self {
        Self {
            partner_id: id.as_str(),
            name: s.name(),
            email: s.email().as_str(),
            active: s.active(),
            dna_access: s.dna_access(),
            headless_links: s.headless_links(),
            default_lang: s.default_lang().as_str(),
            enabled_langs: s.enabled_langs().iter().map(|l| l.as_str()).collect(),
            cs_subscription_active: s.care_services().subscription_active,
            cs_manual_override: s.care_services().manual_override,
            cs_yearly_bundle: s.care_services().yearly_bundle,
            cs_services: s
                .care_services()
                .services
                .iter()
                .map(|c| c.as_str())
                .collect(),
            created_at: now,
            updated_at: now,
        }
    }
}
