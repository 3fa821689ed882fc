//! Partner accounts, portal users, API tokens and the Care Services feature flags, with the
//! operator-side service that manages them.

pub mod auth;
pub mod token;

pub mod portal;
pub mod ports;

mod service;

pub use service::{AccountService, CreateUserError, IssueTokenError, NotFoundOr, RotateTokenError};

use time::OffsetDateTime;

use crate::account::token::TokenText;
use crate::kernel::ids::{TokenId, UserId};
use crate::kernel::values::{CareService, Email, Lang, PartnerId, ValueError};

/// What a partner's Care Services subscription grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CareServicesAccess {
    /// Whether the subscription is paid up.
    pub subscription_active: bool,
    /// Whether the operator granted access regardless of the subscription.
    pub manual_override: bool,
    /// Whether every service is granted (the yearly bundle).
    pub yearly_bundle: bool,
    /// Services granted individually (deduplicated, in the order given).
    pub services: Vec<CareService>,
}

/// The operator-managed settings of a partner account (`PUT /internal/v1/partners/{id}`).
///
/// Only [`PartnerSettings::parse`] makes one, so every value holds its invariant: a trimmed
/// display name of 1-200 characters without control characters, `defaultLang` among
/// `enabledLangs`, and no duplicate language or service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartnerSettings {
    name: String,
    email: Email,
    active: bool,
    dna_access: bool,
    headless_links: bool,
    default_lang: Lang,
    enabled_langs: Vec<Lang>,
    care_services: CareServicesAccess,
}

/// The fields of [`PartnerSettings`] as given, before the rules that span them are checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartnerSettingsInput {
    /// The display name.
    pub name: String,
    /// The contact e-mail.
    pub email: Email,
    /// Whether the account is active.
    pub active: bool,
    /// Whether the partner may use the DNA links endpoint.
    pub dna_access: bool,
    /// The partner-level switch for self-hosted intake links.
    pub headless_links: bool,
    /// The language used when none is asked for (one of `enabled_langs`).
    pub default_lang: Lang,
    /// The enabled languages.
    pub enabled_langs: Vec<Lang>,
    /// What the Care Services subscription grants.
    pub care_services: CareServicesAccess,
}

impl PartnerSettings {
    /// Checks the rules that span fields: a display name of 1-200 characters (trimmed),
    /// `defaultLang` among `enabledLangs`; lists are deduplicated, keeping the first of each.
    ///
    /// ```
    /// use partner_domain::account::{CareServicesAccess, PartnerSettings, PartnerSettingsInput};
    /// use partner_domain::kernel::values::{Email, Lang};
    ///
    /// let input = PartnerSettingsInput {
    ///     name: "  Acme Health ".into(),
    ///     email: Email::parse("ops@acme.test")?,
    ///     active: true,
    ///     dna_access: false,
    ///     headless_links: true,
    ///     default_lang: Lang::Es,
    ///     enabled_langs: vec![Lang::En, Lang::Es, Lang::En],
    ///     care_services: CareServicesAccess {
    ///         subscription_active: true,
    ///         manual_override: false,
    ///         yearly_bundle: true,
    ///         services: Vec::new(),
    ///     },
    /// };
    /// let settings = PartnerSettings::parse(input.clone())?;
    /// assert_eq!(settings.name(), "Acme Health");
    /// assert_eq!(settings.enabled_langs(), [Lang::En, Lang::Es]);
    /// // The default language must be enabled.
    /// let es_off = PartnerSettingsInput { enabled_langs: vec![Lang::En], ..input };
    /// assert!(PartnerSettings::parse(es_off).is_err());
    /// # Ok::<(), partner_domain::kernel::values::ValueError>(())
    /// ```
    pub fn parse(input: PartnerSettingsInput) -> Result<Self, ValueError> {
        let PartnerSettingsInput {
            name,
            email,
            active,
            dna_access,
            headless_links,
            default_lang,
            mut enabled_langs,
            mut care_services,
        } = input;
        let name = name.trim().to_owned();
        if name.is_empty() {
            return Err(ValueError::Missing("name"));
        }
        if name.chars().count() > 200 || name.chars().any(char::is_control) {
            return Err(ValueError::invalid(
                "name",
                "1-200 characters, no control characters",
            ));
        }
        dedup(&mut enabled_langs);
        dedup(&mut care_services.services);
        if !enabled_langs.contains(&default_lang) {
            return Err(ValueError::invalid(
                "defaultLang",
                "must be one of enabledLangs",
            ));
        }
        Ok(Self {
            name,
            email,
            active,
            dna_access,
            headless_links,
            default_lang,
            enabled_langs,
            care_services,
        })
    }

    /// The display name (trimmed, 1-200 characters).
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The partner's contact email.
    #[must_use]
    pub fn email(&self) -> &Email {
        &self.email
    }

    /// Whether the account is active (an inactive partner's tokens answer 403).
    #[must_use]
    pub fn active(&self) -> bool {
        self.active
    }

    /// Whether the partner may use the DNA links endpoint.
    #[must_use]
    pub fn dna_access(&self) -> bool {
        self.dna_access
    }

    /// The partner-level switch for self-hosted intake links.
    #[must_use]
    pub fn headless_links(&self) -> bool {
        self.headless_links
    }

    /// The language used when none is asked for; always one of [`Self::enabled_langs`].
    #[must_use]
    pub fn default_lang(&self) -> Lang {
        self.default_lang
    }

    /// The enabled languages, without duplicates, in the order given.
    #[must_use]
    pub fn enabled_langs(&self) -> &[Lang] {
        &self.enabled_langs
    }

    /// What the Care Services subscription grants (services without duplicates).
    #[must_use]
    pub fn care_services(&self) -> &CareServicesAccess {
        &self.care_services
    }
}

fn dedup<T: PartialEq + Copy>(v: &mut Vec<T>) {
    let mut seen = Vec::with_capacity(v.len());
    v.retain(|x| {
        let new = !seen.contains(x);
        seen.push(*x);
        new
    });
}

/// A partner account: its attribution code, its settings and when they were stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partner {
    partner_id: PartnerId,
    settings: PartnerSettings,
    created_at: OffsetDateTime,
    updated_at: OffsetDateTime,
}

impl Partner {
    /// A partner as stored.
    pub fn new(
        partner_id: PartnerId,
        settings: PartnerSettings,
        created_at: OffsetDateTime,
        updated_at: OffsetDateTime,
    ) -> Self {
        Self {
            partner_id,
            settings,
            created_at,
            updated_at,
        }
    }

    /// The partner's attribution code.
    #[must_use]
    pub fn partner_id(&self) -> &PartnerId {
        &self.partner_id
    }

    /// Its operator-managed settings.
    #[must_use]
    pub fn settings(&self) -> &PartnerSettings {
        &self.settings
    }

    /// When it was first stored.
    #[must_use]
    pub fn created_at(&self) -> OffsetDateTime {
        self.created_at
    }

    /// When its settings were last stored.
    #[must_use]
    pub fn updated_at(&self) -> OffsetDateTime {
        self.updated_at
    }
}

/// The global Care Services category switches; all start on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CareFlags([bool; 5]);

impl Default for CareFlags {
    fn default() -> Self {
        Self([true; 5])
    }
}

impl CareFlags {
    /// Whether the switch of `s` is on.
    pub fn get(&self, s: CareService) -> bool {
        self.0.get(Self::index(s)).copied().unwrap_or(true)
    }

    /// Turns the switch of `s` on or off.
    pub fn set(&mut self, s: CareService, on: bool) {
        if let Some(flag) = self.0.get_mut(Self::index(s)) {
            *flag = on;
        }
    }

    fn index(s: CareService) -> usize {
        CareService::ALL.iter().position(|c| *c == s).unwrap_or(0)
    }
}

/// A portal user; every API token belongs to exactly one. Its id and partner never change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortalUser {
    id: UserId,
    email: Email,
    partner_id: PartnerId,
    admin: bool,
    created_at: OffsetDateTime,
}

impl PortalUser {
    /// A user as stored ([`AccountService::create_user`] makes new ones).
    pub fn new(
        id: UserId,
        email: Email,
        partner_id: PartnerId,
        admin: bool,
        created_at: OffsetDateTime,
    ) -> Self {
        Self {
            id,
            email,
            partner_id,
            admin,
            created_at,
        }
    }

    /// The user's id.
    #[must_use]
    pub fn id(&self) -> UserId {
        self.id
    }

    /// The user's e-mail.
    #[must_use]
    pub fn email(&self) -> &Email {
        &self.email
    }

    /// The partner the user belongs to.
    #[must_use]
    pub fn partner_id(&self) -> &PartnerId {
        &self.partner_id
    }

    /// Whether the user's tokens may act for every partner (admin-only operations).
    #[must_use]
    pub fn admin(&self) -> bool {
        self.admin
    }

    /// When the user was created.
    #[must_use]
    pub fn created_at(&self) -> OffsetDateTime {
        self.created_at
    }
}

/// What is known of a token after creation: never its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiTokenInfo {
    /// The token's id.
    pub id: TokenId,
    /// The first characters of its text, to recognize it by.
    pub token_prefix: String,
    /// When it was created.
    pub created_at: OffsetDateTime,
    /// When it expires, if ever.
    pub expires_at: Option<OffsetDateTime>,
    /// When it was revoked, if it was.
    pub revoked_at: Option<OffsetDateTime>,
    /// When it was last used (recorded at most once a minute).
    pub last_used_at: Option<OffsetDateTime>,
}

/// A token just created or rotated: the only time its text is available. Only
/// [`AccountService`] makes one (from the token it minted and stored), so its text is always
/// the text whose keyed hash was stored under its id.
#[derive(Debug, Clone)]
pub struct IssuedToken {
    id: TokenId,
    token: TokenText,
    token_prefix: String,
    created_at: OffsetDateTime,
    expires_at: Option<OffsetDateTime>,
}

impl IssuedToken {
    /// The token's secret text: hand it to the user once, never log or store it.
    #[must_use]
    pub fn token(&self) -> &TokenText {
        &self.token
    }

    /// The token's id.
    #[must_use]
    pub fn id(&self) -> TokenId {
        self.id
    }

    /// The first characters of its text, to recognize it by.
    #[must_use]
    pub fn token_prefix(&self) -> &str {
        &self.token_prefix
    }

    /// When it was created.
    #[must_use]
    pub fn created_at(&self) -> OffsetDateTime {
        self.created_at
    }

    /// When it expires, if ever.
    #[must_use]
    pub fn expires_at(&self) -> Option<OffsetDateTime> {
        self.expires_at
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::account::ports::MockAccountRepo;
    use crate::account::token::TokenPepper;
    use crate::kernel::clock::FixedClock;
    use crate::kernel::random::SystemRandom;
    use futures_util::FutureExt;
    use std::sync::Arc;
    use time::macros::datetime;

    fn settings() -> PartnerSettingsInput {
        PartnerSettingsInput {
            name: " Acme ".into(),
            email: Email::parse("ops@acme.test").expect("email"),
            active: true,
            dna_access: false,
            headless_links: true,
            default_lang: Lang::Es,
            enabled_langs: vec![Lang::En, Lang::Es, Lang::En],
            care_services: CareServicesAccess {
                subscription_active: true,
                manual_override: false,
                yearly_bundle: false,
                services: vec![CareService::Dermatology, CareService::Dermatology],
            },
        }
    }

    #[test]
    fn settings_are_trimmed_and_deduplicated() {
        let s = PartnerSettings::parse(settings()).expect("valid");
        assert_eq!(s.name(), "Acme");
        assert_eq!(s.enabled_langs(), [Lang::En, Lang::Es]);
        assert_eq!(s.care_services().services, vec![CareService::Dermatology]);
    }

    #[test]
    fn names_must_be_1_to_200_characters_without_control_characters() {
        for bad in ["", "   ", "a\u{7}b", &"x".repeat(201)] {
            let mut s = settings();
            s.name = bad.to_owned();
            assert!(PartnerSettings::parse(s).is_err(), "{bad:?}");
        }
        let mut s = settings();
        s.name = format!("  {}  ", "é".repeat(200));
        let parsed = PartnerSettings::parse(s).expect("200 characters, trimmed");
        assert_eq!(parsed.name().chars().count(), 200);
    }

    #[test]
    fn default_lang_must_be_enabled() {
        let mut s = settings();
        s.enabled_langs = vec![Lang::En];
        assert!(PartnerSettings::parse(s).is_err());
    }

    fn service(repo: MockAccountRepo, pepper: bool) -> AccountService {
        AccountService::new(
            Arc::new(repo),
            pepper.then(|| TokenPepper::new(b"pepper")),
            Arc::new(FixedClock::new(datetime!(2026-11-21 10:00 UTC))),
            Arc::new(SystemRandom::new()),
        )
    }

    #[test]
    fn issuing_stores_only_the_hash_of_the_returned_token() {
        let mut repo = MockAccountRepo::new();
        let stored = Arc::new(std::sync::Mutex::new(None));
        let s2 = stored.clone();
        repo.expect_insert_token().returning(move |_, new| {
            *s2.lock().expect("lock") = Some(new.hash);
            Ok(true)
        });
        let svc = service(repo, true);
        let issued = svc
            .issue_token(UserId::from_uuid(uuid::Uuid::nil()), None)
            .now_or_never()
            .expect("ready")
            .expect("ok");
        let expected = TokenPepper::new(b"pepper").hash(issued.token());
        assert_eq!(*stored.lock().expect("lock"), Some(expected));
        assert_eq!(issued.token_prefix, issued.token().display_prefix());
    }

    #[test]
    fn issuing_without_pepper_or_with_past_expiry_fails_before_storage() {
        let svc = service(MockAccountRepo::new(), false);
        let r = svc
            .issue_token(UserId::from_uuid(uuid::Uuid::nil()), None)
            .now_or_never()
            .expect("ready");
        assert!(matches!(r, Err(IssueTokenError::KeysUnavailable)));
        let svc = service(MockAccountRepo::new(), true);
        let r = svc
            .issue_token(
                UserId::from_uuid(uuid::Uuid::nil()),
                Some(datetime!(2026-11-21 10:00 UTC)),
            )
            .now_or_never()
            .expect("ready");
        assert!(matches!(r, Err(IssueTokenError::ExpiryNotInFuture)));
    }

    #[test]
    fn flags_start_on_and_switch_one_at_a_time() {
        let mut f = CareFlags::default();
        f.set(CareService::Dermatology, false);
        for c in CareService::ALL {
            assert_eq!(f.get(c), c != CareService::Dermatology, "{c:?}");
        }
    }
}
