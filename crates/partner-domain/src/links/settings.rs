//! [`LinkSettings`]: what the link builders read of a partner, access rules included.

use crate::account::{CareServicesAccess, Partner};
use crate::kernel::values::{Email, Lang, PartnerId, ValueError};

/// What the link builders need of a partner, access rules included: its attribution code, its
/// contact e-mail, the `headlessLinks` switch, its languages, DNA access and its Care Services
/// grant. Built from a stored [`Partner`] (`LinkSettings::from(&partner)`), or by another
/// service from its own copy of the partner with [`LinkSettings::new`] and the `with_` calls.
///
/// ```
/// use partner_domain::account::CareServicesAccess;
/// use partner_domain::kernel::values::{CareService, Email, Lang, PartnerId};
/// use partner_domain::links::LinkSettings;
///
/// let acme = LinkSettings::new(PartnerId::parse("acme")?, Email::parse("ops@acme.test")?)
///     .with_headless_links(true)
///     .with_langs(Lang::Es, &[Lang::En, Lang::Es])?
///     .with_care_services(CareServicesAccess {
///         subscription_active: true,
///         manual_override: false,
///         yearly_bundle: false,
///         services: vec![CareService::Dermatology],
///     });
/// assert_eq!(acme.default_lang(), Lang::Es);
/// assert!(!acme.dna_access(), "no DNA access unless granted");
/// // `defaultLang` must be one of the enabled languages.
/// assert!(acme.clone().with_langs(Lang::Es, &[Lang::En]).is_err());
/// # Ok::<(), partner_domain::kernel::values::ValueError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkSettings {
    partner_id: PartnerId,
    email: Email,
    headless_links: bool,
    default_lang: Lang,
    enabled_langs: Vec<Lang>,
    dna_access: bool,
    care_services: CareServicesAccess,
}

impl LinkSettings {
    /// The settings of a partner with no switch on: provider-hosted medical links, English
    /// only, no DNA access, no Care Services.
    #[must_use]
    pub fn new(partner_id: PartnerId, email: Email) -> Self {
        Self {
            partner_id,
            email,
            headless_links: false,
            default_lang: Lang::En,
            enabled_langs: vec![Lang::En],
            dna_access: false,
            care_services: CareServicesAccess {
                subscription_active: false,
                manual_override: false,
                yearly_bundle: false,
                services: Vec::new(),
            },
        }
    }

    /// With the `headlessLinks` switch (self-hosted intake links where a product has them).
    #[must_use]
    pub fn with_headless_links(mut self, on: bool) -> Self {
        self.headless_links = on;
        self
    }

    /// With these languages; `default` must be one of `enabled` (duplicates are dropped).
    pub fn with_langs(mut self, default: Lang, enabled: &[Lang]) -> Result<Self, ValueError> {
        if !enabled.contains(&default) {
            return Err(ValueError::invalid(
                "defaultLang",
                "must be one of enabledLangs",
            ));
        }
        let mut langs = Vec::with_capacity(enabled.len());
        for l in enabled {
            if !langs.contains(l) {
                langs.push(*l);
            }
        }
        self.default_lang = default;
        self.enabled_langs = langs;
        Ok(self)
    }

    /// With DNA access granted or not ([`dna_link`](crate::links::dna_link) builds nothing
    /// without it).
    #[must_use]
    pub fn with_dna_access(mut self, on: bool) -> Self {
        self.dna_access = on;
        self
    }

    /// With this Care Services grant ([`care_link`](crate::links::care_link) checks it).
    #[must_use]
    pub fn with_care_services(mut self, access: CareServicesAccess) -> Self {
        self.care_services = access;
        self
    }

    /// The partner's attribution code.
    #[must_use]
    pub fn partner_id(&self) -> &PartnerId {
        &self.partner_id
    }

    /// The partner's contact e-mail, which the medical and DNA links show.
    #[must_use]
    pub fn email(&self) -> &Email {
        &self.email
    }

    /// The `headlessLinks` switch.
    #[must_use]
    pub fn headless_links(&self) -> bool {
        self.headless_links
    }

    /// The language used when none is asked for; always one of [`Self::enabled_langs`].
    #[must_use]
    pub fn default_lang(&self) -> Lang {
        self.default_lang
    }

    /// The enabled languages.
    #[must_use]
    pub fn enabled_langs(&self) -> &[Lang] {
        &self.enabled_langs
    }

    /// Whether the partner may have DNA links.
    #[must_use]
    pub fn dna_access(&self) -> bool {
        self.dna_access
    }

    /// What the Care Services subscription grants.
    #[must_use]
    pub fn care_services(&self) -> &CareServicesAccess {
        &self.care_services
    }
}

impl From<&Partner> for LinkSettings {
    fn from(p: &Partner) -> Self {
        let s = p.settings();
        Self {
            partner_id: p.partner_id().clone(),
            email: s.email().clone(),
            headless_links: s.headless_links(),
            default_lang: s.default_lang(),
            enabled_langs: s.enabled_langs().to_vec(),
            dna_access: s.dna_access(),
            care_services: s.care_services().clone(),
        }
    }
}
