//! Leads: the row partners read, its consent rendering, the test-flag rules, progressive
//! enrichment, and keyset pagination.

pub mod ports;

mod service;

pub use crate::kernel::ids::LeadId;
pub use service::{IngestLeadError, LeadQuery, LeadService, ListLeadsError, PatchLeadError};

use serde::{Serialize, Serializer};
use time::OffsetDateTime;

use crate::events::{DomainEvent, Event};
use crate::kernel::values::{Email, PartnerId, SubId, ValueError};

/// What a lead without consent shows instead of its email or phone.
pub const NO_CONSENT: &str = "No Consent";
/// The origin of self-hosted elective-medication intakes.
pub const HEADLESS_INTAKE: &str = "headless_intake";

/// Why an elective-medication run is a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TestSource {
    /// The care provider's test mode (`provider_test_mode`).
    ProviderTestMode,
    /// A simulated run (`simulation`).
    Simulation,
}

impl TestSource {
    /// The source with this wire name, exactly.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "provider_test_mode" => Some(Self::ProviderTestMode),
            "simulation" => Some(Self::Simulation),
            _ => None,
        }
    }

    /// [`TestSource::parse`] of a request field: `{field} must be provider_test_mode or
    /// simulation` otherwise.
    pub fn parse_field(s: &str, field: &'static str) -> Result<Self, ValueError> {
        Self::parse(s).ok_or(ValueError::expected(
            field,
            "provider_test_mode or simulation",
        ))
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ProviderTestMode => "provider_test_mode",
            Self::Simulation => "simulation",
        }
    }
}

impl Serialize for TestSource {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// Where a lead came from: 1-64 of `a-z 0-9 _ -` (`managed-website`, `headless_intake`, …).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Origin(String);

impl Origin {
    /// An origin: 1-64 of `a-z 0-9 _ -`.
    pub fn parse(s: &str) -> Result<Self, ValueError> {
        if s.is_empty() {
            return Err(ValueError::Missing("origin"));
        }
        if s.len() > 64
            || !s
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
        {
            return Err(ValueError::invalid("origin", "1-64 of a-z, 0-9, _ and -"));
        }
        Ok(Self(s.to_owned()))
    }

    /// The origin's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Self-hosted elective-medication intake: the only origin that can carry test rows, and
    /// the only one whose progressive creation and enrichment dispatch no webhooks.
    pub fn is_headless_intake(&self) -> bool {
        self.0 == HEADLESS_INTAKE
    }

    /// Whether a lead of this origin causes `lead.created` and `lead.enriched` (every origin but
    /// `headless_intake`).
    pub fn is_webhook_enabled(&self) -> bool {
        !self.is_headless_intake()
    }
}

/// The test flag of a lead: `None` for real leads. Constructed only through [`TestFlag::parse`],
/// so `testSource` is set exactly when `isTest` is, and only on elective-medication intakes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TestFlag(Option<TestSource>);

impl TestFlag {
    /// A real lead's flag.
    pub const REAL: TestFlag = TestFlag(None);

    /// The flag of an ingested lead from its `isTest` and `testSource` fields: `testSource` exactly
    /// when `isTest` is true, and a test row only for a `headless_intake` origin.
    pub fn parse(
        is_test: Option<bool>,
        test_source: Option<&str>,
        origin: &Origin,
    ) -> Result<Self, ValueError> {
        match (is_test.unwrap_or(false), test_source) {
            (false, None) => Ok(Self::REAL),
            (false, Some(_)) => Err(ValueError::invalid(
                "testSource",
                "must be null unless isTest is true",
            )),
            (true, None) => Err(ValueError::invalid(
                "testSource",
                "required when isTest is true",
            )),
            (true, Some(s)) => {
                let source = TestSource::parse(s).ok_or(ValueError::invalid(
                    "testSource",
                    "must be provider_test_mode or simulation",
                ))?;
                if !origin.is_headless_intake() {
                    return Err(ValueError::invalid(
                        "isTest",
                        "only headless_intake leads can be test rows",
                    ));
                }
                Ok(Self(Some(source)))
            }
        }
    }

    /// The flag of a row read back from storage, under the same origin rule as
    /// [`TestFlag::parse`]: a test row comes from a `headless_intake` intake only (the table's
    /// constraint says so too; a row that breaks it is refused, not trusted).
    pub fn from_stored(source: Option<TestSource>, origin: &Origin) -> Result<Self, LeadError> {
        match source {
            Some(_) if !origin.is_headless_intake() => Err(LeadError::TestOutsideHeadlessIntake),
            _ => Ok(Self(source)),
        }
    }

    /// Whether the lead is a test row.
    #[must_use]
    pub fn is_test(self) -> bool {
        self.0.is_some()
    }

    /// Why the lead is a test row (`None` for a real lead).
    #[must_use]
    pub fn source(self) -> Option<TestSource> {
        self.0
    }
}

/// A phone number as entered: 1-32 of digits, spaces and `+ - ( ) .`, with at least one digit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Phone(String);

impl Phone {
    /// A phone number as entered (trimmed).
    pub fn parse(s: &str) -> Result<Self, ValueError> {
        let t = s.trim();
        if t.is_empty() {
            return Err(ValueError::Missing("phone"));
        }
        let ok = t.len() <= 32
            && t.bytes().any(|b| b.is_ascii_digit())
            && t.bytes()
                .all(|b| b.is_ascii_digit() || b" +-().".contains(&b));
        if !ok {
            return Err(ValueError::invalid(
                "phone",
                "1-32 of digits, spaces and + - ( ) .",
            ));
        }
        Ok(Self(t.to_owned()))
    }

    /// The number as entered.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A stored lead. Made by [`LeadService::ingest`] from a parsed [`NewLead`], changed only by
/// [`LeadPatch::apply`], and read back by [`Lead::new`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lead {
    id: LeadId,
    partner_id: PartnerId,
    sub_id: Option<SubId>,
    first_name: String,
    last_name: String,
    email: String,
    email_consent: bool,
    phone: Option<String>,
    sms_consent: bool,
    origin: Origin,
    location: String,
    question_id: Option<String>,
    test: TestFlag,
    created_at: OffsetDateTime,
    updated_at: OffsetDateTime,
}

/// A stored lead's fields, for [`Lead::new`]. The email and phone are the stored text: they
/// were parsed when they were set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeadParts {
    /// The lead's id.
    pub id: LeadId,
    /// The partner it is attributed to.
    pub partner_id: PartnerId,
    /// The sub-account it is attributed to, if any.
    pub sub_id: Option<SubId>,
    /// The first name.
    pub first_name: String,
    /// The last name.
    pub last_name: String,
    /// The e-mail as stored.
    pub email: String,
    /// Whether the lead consented to e-mail.
    pub email_consent: bool,
    /// The phone as stored, if any.
    pub phone: Option<String>,
    /// Whether the lead consented to SMS.
    pub sms_consent: bool,
    /// Where the lead came from.
    pub origin: Origin,
    /// Where the lead is.
    pub location: String,
    /// The intake question it answered, if any.
    pub question_id: Option<String>,
    /// The test flag (a test flag needs a `headless_intake` origin).
    pub test: TestFlag,
    /// When it was created.
    pub created_at: OffsetDateTime,
    /// When it was last changed.
    pub updated_at: OffsetDateTime,
}

/// The phone as partners see it: `No Consent` without SMS consent, else the number (empty
/// while a progressive intake has not supplied one yet).
pub fn render_phone(phone: Option<&str>, sms_consent: bool) -> String {
    if sms_consent {
        phone.unwrap_or_default().to_owned()
    } else {
        NO_CONSENT.to_owned()
    }
}

/// The email as partners see it.
pub fn render_email(email: &str, email_consent: bool) -> String {
    if email_consent {
        email.to_owned()
    } else {
        NO_CONSENT.to_owned()
    }
}

/// Why [`Lead::new`] (or [`TestFlag::from_stored`]) refuses a lead: a state the contract rules
/// out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LeadError {
    /// A test flag on a lead whose origin is not `headless_intake`: only self-hosted
    /// elective-medication intakes carry test rows.
    #[error("only headless_intake leads can be test rows")]
    TestOutsideHeadlessIntake,
}

impl Lead {
    /// A lead as stored; refuses a test flag on an origin other than `headless_intake`
    /// ([`LeadError`]), whichever way the flag was made.
    ///
    /// ```
    /// use partner_domain::kernel::values::PartnerId;
    /// use partner_domain::lead::{
    ///     HEADLESS_INTAKE, Lead, LeadError, LeadId, LeadParts, NO_CONSENT, Origin, TestFlag,
    /// };
    /// use time::macros::datetime;
    ///
    /// let headless = Origin::parse(HEADLESS_INTAKE)?;
    /// let test = TestFlag::parse(Some(true), Some("simulation"), &headless)?;
    /// let parts = LeadParts {
    ///     id: LeadId::from_uuid(uuid::Uuid::nil()),
    ///     partner_id: PartnerId::parse("acme")?,
    ///     sub_id: None,
    ///     first_name: "Ann".into(),
    ///     last_name: "Lee".into(),
    ///     email: "ann@example.test".into(),
    ///     email_consent: false,
    ///     phone: None,
    ///     sms_consent: false,
    ///     origin: headless,
    ///     location: "Austin".into(),
    ///     question_id: None,
    ///     test,
    ///     created_at: datetime!(2026-11-21 10:00 UTC),
    ///     updated_at: datetime!(2026-11-21 10:00 UTC),
    /// };
    /// let lead = Lead::new(parts.clone())?;
    /// assert!(lead.test().is_test());
    /// assert_eq!(lead.visible_email(), NO_CONSENT);
    /// // The same flag on a lead from another origin is refused.
    /// let managed = Origin::parse("managed-website")?;
    /// assert_eq!(
    ///     Lead::new(LeadParts { origin: managed, ..parts }),
    ///     Err(LeadError::TestOutsideHeadlessIntake)
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(parts: LeadParts) -> Result<Self, LeadError> {
        if parts.test.is_test() && !parts.origin.is_headless_intake() {
            return Err(LeadError::TestOutsideHeadlessIntake);
        }
        let LeadParts {
            id,
            partner_id,
            sub_id,
            first_name,
            last_name,
            email,
            email_consent,
            phone,
            sms_consent,
            origin,
            location,
            question_id,
            test,
            created_at,
            updated_at,
        } = parts;
        Ok(Self {
            id,
            partner_id,
            sub_id,
            first_name,
            last_name,
            email,
            email_consent,
            phone,
            sms_consent,
            origin,
            location,
            question_id,
            test,
            created_at,
            updated_at,
        })
    }

    /// The lead's id.
    #[must_use]
    pub fn id(&self) -> LeadId {
        self.id
    }

    /// The partner it is attributed to.
    #[must_use]
    pub fn partner_id(&self) -> &PartnerId {
        &self.partner_id
    }

    /// The sub-account it is attributed to, if any.
    #[must_use]
    pub fn sub_id(&self) -> Option<SubId> {
        self.sub_id
    }

    /// The first name.
    #[must_use]
    pub fn first_name(&self) -> &str {
        &self.first_name
    }

    /// The last name.
    #[must_use]
    pub fn last_name(&self) -> &str {
        &self.last_name
    }

    /// The e-mail as stored (see [`Self::visible_email`] for what partners see).
    #[must_use]
    pub fn email(&self) -> &str {
        &self.email
    }

    /// Whether the lead consented to e-mail.
    #[must_use]
    pub fn email_consent(&self) -> bool {
        self.email_consent
    }

    /// The phone as stored (see [`Self::visible_phone`]).
    #[must_use]
    pub fn phone(&self) -> Option<&str> {
        self.phone.as_deref()
    }

    /// Whether the lead consented to SMS.
    #[must_use]
    pub fn sms_consent(&self) -> bool {
        self.sms_consent
    }

    /// Where the lead came from.
    #[must_use]
    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// Where the lead is.
    #[must_use]
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The intake question it answered, if any.
    #[must_use]
    pub fn question_id(&self) -> Option<&str> {
        self.question_id.as_deref()
    }

    /// The test flag.
    #[must_use]
    pub fn test(&self) -> TestFlag {
        self.test
    }

    /// When it was created.
    #[must_use]
    pub fn created_at(&self) -> OffsetDateTime {
        self.created_at
    }

    /// When it was last changed.
    #[must_use]
    pub fn updated_at(&self) -> OffsetDateTime {
        self.updated_at
    }

    /// The email as partners see it: [`NO_CONSENT`] without e-mail consent.
    #[must_use]
    pub fn visible_email(&self) -> &str {
        if self.email_consent {
            &self.email
        } else {
            NO_CONSENT
        }
    }

    /// The phone as partners see it: [`NO_CONSENT`] without SMS consent, else the number (empty
    /// while a progressive intake has not supplied one yet).
    #[must_use]
    pub fn visible_phone(&self) -> &str {
        if self.sms_consent {
            self.phone.as_deref().unwrap_or_default()
        } else {
            NO_CONSENT
        }
    }
}

/// A lead as ingested, every field already parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewLead {
    /// The partner it is attributed to.
    pub partner_id: PartnerId,
    /// The sub-account it is attributed to, if any.
    pub sub_id: Option<SubId>,
    /// The first name.
    pub first_name: String,
    /// The last name.
    pub last_name: String,
    /// The e-mail.
    pub email: Email,
    /// Whether the lead consented to e-mail.
    pub email_consent: bool,
    /// The phone, if given.
    pub phone: Option<Phone>,
    /// Whether the lead consented to SMS.
    pub sms_consent: bool,
    /// Where the lead came from.
    pub origin: Origin,
    /// Where the lead is.
    pub location: String,
    /// The intake question it answered, if any.
    pub question_id: Option<String>,
    /// The test flag, parsed for `origin` ([`TestFlag::parse`]).
    pub test: TestFlag,
}

/// A partial update from a later intake step. `phone: Some(None)` clears the phone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeadPatch {
    /// `Some(Some(p))` sets the phone, `Some(None)` clears it.
    pub phone: Option<Option<Phone>>,
    /// A new SMS consent.
    pub sms_consent: Option<bool>,
    /// A new e-mail.
    pub email: Option<Email>,
    /// A new e-mail consent.
    pub email_consent: Option<bool>,
    /// A new first name.
    pub first_name: Option<String>,
    /// A new last name.
    pub last_name: Option<String>,
}

impl LeadPatch {
    /// The patch if it names a field; a patch that changes nothing is refused.
    pub fn non_empty(self) -> Result<Self, ValueError> {
        if self == Self::default() {
            return Err(ValueError::Rule(
                "name at least one of phone, smsConsent, email, emailConsent, firstName, lastName",
            ));
        }
        Ok(self)
    }

    /// The lead after the patch, with `updatedAt` moved to `now`.
    pub fn apply(&self, before: &Lead, now: OffsetDateTime) -> Lead {
        let mut after = before.clone();
        if let Some(p) = &self.phone {
            after.phone = p.as_ref().map(|p| p.as_str().to_owned());
        }
        if let Some(c) = self.sms_consent {
            after.sms_consent = c;
        }
        if let Some(e) = &self.email {
            after.email = e.as_str().to_owned();
        }
        if let Some(c) = self.email_consent {
            after.email_consent = c;
        }
        if let Some(n) = &self.first_name {
            after.first_name = n.clone();
        }
        if let Some(n) = &self.last_name {
            after.last_name = n.clone();
        }
        after.updated_at = now;
        after
    }
}

/// The events a new lead causes: `lead.created` for webhook-enabled origins only.
pub fn creation_events(lead: &Lead) -> Vec<DomainEvent> {
    if lead.origin.is_webhook_enabled() {
        vec![DomainEvent::new(
            lead.partner_id.clone(),
            Event::LeadCreated { lead: lead.id },
        )]
    } else {
        Vec::new()
    }
}

/// The events an update causes: `lead.enriched` when the phone was filled in or changed (not
/// when set to the same value or cleared), for webhook-enabled origins only. Both phones are
/// rendered with the lead's consent after the update.
pub fn update_events(before: &Lead, after: &Lead) -> Vec<DomainEvent> {
    let filled_or_changed = after.phone.is_some() && after.phone != before.phone;
    if !after.origin.is_webhook_enabled() || !filled_or_changed {
        return Vec::new();
    }
    vec![DomainEvent::new(
        after.partner_id.clone(),
        Event::LeadEnriched {
            lead: after.id,
            previous_phone: render_phone(before.phone.as_deref(), after.sms_consent),
            current_phone: render_phone(after.phone.as_deref(), after.sms_consent),
        },
    )]
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;
    use uuid::Uuid;

    fn origin(s: &str) -> Origin {
        Origin::parse(s).expect("origin")
    }

    pub(super) fn lead(origin_: &str, phone: Option<&str>, sms: bool) -> Lead {
        Lead {
            id: LeadId::from_uuid(Uuid::from_u128(1)),
            partner_id: PartnerId::parse("acme").expect("id"),
            sub_id: None,
            first_name: "Ann".into(),
            last_name: "Lee".into(),
            email: "ann@x.co".into(),
            email_consent: true,
            phone: phone.map(str::to_owned),
            sms_consent: sms,
            origin: origin(origin_),
            location: "Austin".into(),
            question_id: None,
            test: TestFlag::REAL,
            created_at: datetime!(2026-11-21 10:00 UTC),
            updated_at: datetime!(2026-11-21 10:00 UTC),
        }
    }

    #[test]
    fn only_headless_intake_can_be_a_test_row() {
        let h = origin(HEADLESS_INTAKE);
        let m = origin("managed-website");
        assert_eq!(
            TestFlag::parse(Some(true), Some("simulation"), &h).map(TestFlag::source),
            Ok(Some(TestSource::Simulation))
        );
        assert_eq!(
            TestFlag::parse(Some(true), Some("provider_test_mode"), &h).map(TestFlag::source),
            Ok(Some(TestSource::ProviderTestMode))
        );
        assert!(TestFlag::parse(Some(true), Some("simulation"), &m).is_err());
        assert_eq!(TestFlag::parse(None, None, &m), Ok(TestFlag::REAL));
        assert_eq!(TestFlag::parse(Some(false), None, &h), Ok(TestFlag::REAL));
    }

    /// Issue 21: `TestFlag::from_stored` skipped the origin rule, so a stored row could make a
    /// `managed-website` lead a test row; `Lead::new` took any flag with any origin.
    #[test]
    fn test_flag_from_stored_applies_the_origin_rule() {
        let h = origin(HEADLESS_INTAKE);
        let m = origin("managed-website");
        let sim = Some(TestSource::Simulation);
        assert_eq!(
            TestFlag::from_stored(sim, &m),
            Err(LeadError::TestOutsideHeadlessIntake)
        );
        assert_eq!(
            TestFlag::from_stored(sim, &h).map(TestFlag::source),
            Ok(sim)
        );
        assert_eq!(TestFlag::from_stored(None, &m), Ok(TestFlag::REAL));
        // A flag made for a headless intake, paired with another origin.
        let flag = TestFlag::parse(Some(true), Some("simulation"), &h).expect("flag");
        let l = lead("managed-website", None, true);
        let parts = LeadParts {
            id: l.id,
            partner_id: l.partner_id.clone(),
            sub_id: None,
            first_name: l.first_name.clone(),
            last_name: l.last_name.clone(),
            email: l.email.clone(),
            email_consent: true,
            phone: None,
            sms_consent: true,
            origin: m,
            location: l.location.clone(),
            question_id: None,
            test: flag,
            created_at: l.created_at,
            updated_at: l.updated_at,
        };
        assert_eq!(
            Lead::new(parts.clone()),
            Err(LeadError::TestOutsideHeadlessIntake)
        );
        assert!(Lead::new(LeadParts { origin: h, ..parts }).is_ok());
    }

    #[test]
    fn test_source_is_set_exactly_when_is_test() {
        let h = origin(HEADLESS_INTAKE);
        assert!(TestFlag::parse(Some(true), None, &h).is_err());
        assert!(TestFlag::parse(Some(false), Some("simulation"), &h).is_err());
        assert!(TestFlag::parse(None, Some("simulation"), &h).is_err());
        assert!(TestFlag::parse(Some(true), Some("demo"), &h).is_err());
        let mut l = lead(HEADLESS_INTAKE, None, true);
        l.test = TestFlag::parse(Some(true), Some("simulation"), &h).expect("flag");
        assert_eq!(
            (l.test().is_test(), l.test().source()),
            (true, Some(TestSource::Simulation))
        );
        let real = lead("managed-website", None, true);
        assert_eq!((real.test().is_test(), real.test().source()), (false, None));
    }

    #[test]
    fn consent_rendering() {
        let mut l = lead("managed-website", Some("+1 555"), false);
        l.email_consent = false;
        assert_eq!(
            (l.visible_email(), l.visible_phone()),
            (NO_CONSENT, NO_CONSENT)
        );
        let r = lead("managed-website", Some("+1 555"), true);
        assert_eq!(
            (r.visible_email(), r.visible_phone()),
            ("ann@x.co", "+1 555")
        );
        assert_eq!(lead("managed-website", None, true).visible_phone(), "");
    }

    #[test]
    fn enrichment_fires_on_fill_or_change_only_for_webhook_origins() {
        let now = datetime!(2026-11-21 11:00 UTC);
        let set = |p: &str| LeadPatch {
            phone: Some(Some(Phone::parse(p).expect("phone"))),
            ..LeadPatch::default()
        };
        let before = lead("managed-website", None, true);
        let after = set("555-1").apply(&before, now);
        assert_eq!(after.updated_at, now);
        let ev = update_events(&before, &after);
        assert!(
            matches!(&ev[..], [DomainEvent { event: Event::LeadEnriched { previous_phone, current_phone, .. }, .. }]
            if previous_phone.is_empty() && current_phone == "555-1")
        );
        // Same value: nothing. Changed: fires. Cleared: nothing.
        assert!(update_events(&after, &set("555-1").apply(&after, now)).is_empty());
        assert_eq!(
            update_events(&after, &set("555-2").apply(&after, now)).len(),
            1
        );
        let cleared = LeadPatch {
            phone: Some(None),
            ..LeadPatch::default()
        }
        .apply(&after, now);
        assert!(update_events(&after, &cleared).is_empty());
        // Headless intake never dispatches.
        let h = lead(HEADLESS_INTAKE, None, true);
        assert!(update_events(&h, &set("555-1").apply(&h, now)).is_empty());
        assert!(creation_events(&h).is_empty());
        assert_eq!(creation_events(&before).len(), 1);
        // Consent rendering applies to both phones.
        let no = lead("managed-website", Some("1"), false);
        let ev = update_events(&no, &set("2").apply(&no, now));
        assert!(
            matches!(&ev[..], [DomainEvent { event: Event::LeadEnriched { previous_phone, current_phone, .. }, .. }]
            if previous_phone == NO_CONSENT && current_phone == NO_CONSENT)
        );
    }

    #[test]
    fn phone_and_origin_shapes() {
        assert!(Phone::parse("+1 (555) 010-9999").is_ok());
        for bad in ["", "abc", "555\n1", &"1".repeat(33), "+-"] {
            assert!(Phone::parse(bad).is_err(), "{bad}");
        }
        assert!(Origin::parse("public-link").is_ok());
        for bad in ["", "Managed", "a b", &"a".repeat(65)] {
            assert!(Origin::parse(bad).is_err(), "{bad}");
        }
    }
}
