//! Value types parsed at the edge. Each has a private field and a `parse` returning a typed
//! error, so a value that exists is valid and the rest of the code never re-checks it.
//!
//! ```
//! use partner_domain::kernel::values::{Email, Money, PartnerId, SubId, ValueError};
//!
//! let partner = PartnerId::parse("acme_co-7")?;
//! assert_eq!(partner.as_str(), "acme_co-7");
//! assert_eq!(SubId::parse("7")?.get(), 7);
//! assert!(SubId::parse("07").is_err(), "no leading zeros");
//! // Messages name the field and never echo the input.
//! assert_eq!(
//!     Email::parse("not an email").unwrap_err().to_string(),
//!     "email is invalid: not an email address"
//! );
//! assert_eq!(Money::parse(19.99, "amount")?.cents(), 1999);
//! # Ok::<(), ValueError>(())
//! ```

use std::fmt;

use serde::{Serialize, Serializer};

/// Why a value was rejected. The text is safe to show to API clients: it never echoes input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// A required value is absent or empty; the field's name.
    #[error("{0} is required")]
    Missing(&'static str),
    /// The value breaks the field's rule; `reason` says which.
    #[error("{field} is invalid: {reason}")]
    Invalid {
        /// The field's name.
        field: &'static str,
        /// The rule it breaks.
        reason: &'static str,
    },
    /// The value is not one the field accepts; `expected` says which are (`en or es`).
    #[error("{field} must be {expected}")]
    Expected {
        /// The field's name.
        field: &'static str,
        /// The values it accepts.
        expected: &'static str,
    },
    /// A required value is absent or unreadable; `format` says how to write it (`YYYY-MM-DD`).
    #[error("{field} is required, as {format}")]
    RequiredAs {
        /// The field's name.
        field: &'static str,
        /// How to write it.
        format: &'static str,
    },
    /// The body or parameters break a rule over several fields; the text states the rule.
    #[error("{0}")]
    Rule(&'static str),
}

impl ValueError {
    pub(crate) fn invalid(field: &'static str, reason: &'static str) -> Self {
        Self::Invalid { field, reason }
    }

    pub(crate) fn expected(field: &'static str, expected: &'static str) -> Self {
        Self::Expected { field, expected }
    }

    /// The same failure for a value that arrived under another name (a query parameter `sub`
    /// holds a `subId`), so the message names what the caller sent and the reason is written once.
    #[must_use]
    pub fn named(self, field: &'static str) -> Self {
        match self {
            Self::Missing(_) => Self::Missing(field),
            Self::Invalid { reason, .. } => Self::Invalid { field, reason },
            Self::Expected { expected, .. } => Self::Expected { field, expected },
            Self::RequiredAs { format, .. } => Self::RequiredAs { field, format },
            rule @ Self::Rule(_) => rule,
        }
    }
}

macro_rules! string_value {
    ($name:ident) => {
        impl $name {
            /// The value's text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }
        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

/// A partner's attribution code: 1-64 of `A-Z a-z 0-9 _ -`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PartnerId(String);
string_value!(PartnerId);

impl PartnerId {
    /// The longest partnerId.
    pub const MAX_LEN: usize = 64;

    /// A partnerId: 1-64 of `A-Z a-z 0-9 _ -`.
    pub fn parse(s: &str) -> Result<Self, ValueError> {
        if s.is_empty() {
            return Err(ValueError::Missing("partnerId"));
        }
        if s.len() > Self::MAX_LEN {
            return Err(ValueError::invalid("partnerId", "at most 64 characters"));
        }
        if !s
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(ValueError::invalid(
                "partnerId",
                "only A-Z, a-z, 0-9, _ and - are allowed",
            ));
        }
        Ok(Self(s.to_owned()))
    }
}

/// A sub-account number: a decimal integer 1-250 written without leading zeros ("7").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SubId(u8);

impl SubId {
    /// The lowest sub-account number.
    pub const MIN: u8 = 1;
    /// The highest sub-account number.
    pub const MAX: u8 = 250;

    /// A sub-account number as written on the wire: `1`-`250`, no leading zeros.
    pub fn parse(s: &str) -> Result<Self, ValueError> {
        const REASON: &str = "must be an integer from 1 to 250 without leading zeros";
        if s.is_empty() {
            return Err(ValueError::Missing("subId"));
        }
        if s.len() > 3 || !s.bytes().all(|b| b.is_ascii_digit()) || s.starts_with('0') {
            return Err(ValueError::invalid("subId", REASON));
        }
        let n: u16 = s
            .parse()
            .map_err(|_| ValueError::invalid("subId", REASON))?;
        Self::new(n).ok_or(ValueError::invalid("subId", REASON))
    }

    /// The sub-account number `n` when it is within 1-250.
    pub fn new(n: u16) -> Option<Self> {
        u8::try_from(n)
            .ok()
            .filter(|n| (Self::MIN..=Self::MAX).contains(n))
            .map(Self)
    }

    /// The number.
    pub fn get(self) -> u8 {
        self.0
    }
}

impl fmt::Display for SubId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// On the wire a subId is a JSON string ("7").
impl Serialize for SubId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A sub-account nickname: 1-64 characters after trimming, no control characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nickname(String);
string_value!(Nickname);

impl Nickname {
    /// A nickname: trimmed, 1-64 characters, no control characters.
    pub fn parse(s: &str) -> Result<Self, ValueError> {
        let t = s.trim();
        if t.is_empty() {
            return Err(ValueError::Missing("nickname"));
        }
        if t.chars().count() > 64 {
            return Err(ValueError::invalid("nickname", "at most 64 characters"));
        }
        if t.chars().any(char::is_control) {
            return Err(ValueError::invalid(
                "nickname",
                "control characters are not allowed",
            ));
        }
        Ok(Self(t.to_owned()))
    }
}

/// An email address, checked for shape only (one `@`, a dotted domain, no spaces or control
/// characters, at most 254 characters). Deliverability is not this service's concern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Email(String);
string_value!(Email);

impl Email {
    /// An e-mail address, checked for shape only (trimmed).
    pub fn parse(s: &str) -> Result<Self, ValueError> {
        Self::parse_field(s, "email")
    }

    /// As [`Email::parse`], naming `field` in the error.
    pub fn parse_field(s: &str, field: &'static str) -> Result<Self, ValueError> {
        let t = s.trim();
        if t.is_empty() {
            return Err(ValueError::Missing(field));
        }
        let bad = ValueError::invalid(field, "not an email address");
        if t.len() > 254 || t.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad);
        }
        let Some((local, domain)) = t.split_once('@') else {
            return Err(bad);
        };
        if local.is_empty()
            || domain.contains('@')
            || !domain.contains('.')
            || domain.starts_with('.')
            || domain.ends_with('.')
        {
            return Err(bad);
        }
        Ok(Self(t.to_owned()))
    }
}

/// A language the intake and Care Services pages are offered in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Lang {
    /// English (`en`).
    En,
    /// Spanish (`es`).
    Es,
}

impl Lang {
    /// Every language, in the order the pages offer them.
    pub const ALL: [Lang; 2] = [Lang::En, Lang::Es];

    /// `en` or `es`, exactly.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "en" => Some(Self::En),
            "es" => Some(Self::Es),
            _ => None,
        }
    }

    /// [`Lang::parse`] of a request field: `{field} must be en or es` otherwise.
    pub fn parse_field(s: &str, field: &'static str) -> Result<Self, ValueError> {
        Self::parse(s).ok_or(ValueError::expected(field, "en or es"))
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::En => "en",
            Self::Es => "es",
        }
    }
}

impl Serialize for Lang {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// The five Care Services categories.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CareService {
    /// `primary-care`.
    PrimaryCare,
    /// `urgent-care`.
    UrgentCare,
    /// `mental-health`.
    MentalHealth,
    /// `dermatology`.
    Dermatology,
    /// `veterinary-care`.
    VeterinaryCare,
}

impl CareService {
    /// Every service, in the contract's order.
    pub const ALL: [CareService; 5] = [
        Self::PrimaryCare,
        Self::UrgentCare,
        Self::MentalHealth,
        Self::Dermatology,
        Self::VeterinaryCare,
    ];

    /// The service with this key, exactly.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// The embedded view's `service` parameter: `service must be one of the five service keys`
    /// otherwise (its wording since it was published; the bodies list the five instead).
    pub fn parse_embed_param(s: &str) -> Result<Self, ValueError> {
        Self::parse(s).ok_or(ValueError::expected(
            "service",
            "one of the five service keys",
        ))
    }

    /// A key of the feature-flag switches: `feature flag keys must be Care Services service
    /// names` otherwise.
    pub fn parse_flag_key(s: &str) -> Result<Self, ValueError> {
        Self::parse(s).ok_or(ValueError::expected(
            "feature flag keys",
            "Care Services service names",
        ))
    }

    /// [`CareService::parse`] of a request field: `{field} must be primary-care, …` otherwise.
    pub fn parse_field(s: &str, field: &'static str) -> Result<Self, ValueError> {
        Self::parse(s).ok_or(ValueError::expected(
            field,
            "primary-care, urgent-care, mental-health, dermatology or veterinary-care",
        ))
    }

    /// The key on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PrimaryCare => "primary-care",
            Self::UrgentCare => "urgent-care",
            Self::MentalHealth => "mental-health",
            Self::Dermatology => "dermatology",
            Self::VeterinaryCare => "veterinary-care",
        }
    }
}

impl Serialize for CareService {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// Free text of at most `max` characters after trimming, with no control characters; empty is
/// allowed only when `min` is 0.
pub fn text(field: &'static str, s: &str, min: usize, max: usize) -> Result<String, ValueError> {
    let t = s.trim();
    if t.chars().count() < min {
        return Err(ValueError::Missing(field));
    }
    if t.chars().count() > max {
        return Err(ValueError::Invalid {
            field,
            reason: "too long",
        });
    }
    if t.chars().any(char::is_control) {
        return Err(ValueError::Invalid {
            field,
            reason: "control characters are not allowed",
        });
    }
    Ok(t.to_owned())
}

/// An amount of money, held exactly in cents; never negative (every amount of the contract is a
/// price, a commission or a payout). On the wire it is a JSON number with at most two decimals
/// (`199.5`, `40`).
///
/// ```
/// use partner_domain::kernel::values::{Money, MoneyError};
///
/// let price = Money::from_cents(19_950);
/// assert_eq!(price.to_string(), "199.50");
/// assert_eq!(Money::parse(199.5, "amount"), Ok(price));
/// // Amounts read back from storage go through the checked constructor.
/// assert_eq!(Money::try_from_cents(-500), Err(MoneyError::Negative));
/// assert!(Money::parse(-5.0, "amount").is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Money(i64);

/// Why [`Money::try_from_cents`] refuses an amount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MoneyError {
    /// The amount is below zero.
    #[error("an amount of money must not be negative")]
    Negative,
}

impl Money {
    /// The largest amount [`Money::parse`] accepts (ten billion), far above any real order or
    /// payout.
    pub const MAX_CENTS: i64 = 1_000_000_000_000;

    /// No money.
    pub const ZERO: Money = Money(0);

    /// An amount of `cents` (a `u32` holds up to 42,949,672.95, so any literal price fits and a
    /// negative one does not compile; larger or signed amounts go through
    /// [`Money::try_from_cents`]).
    #[must_use]
    pub const fn from_cents(cents: u32) -> Self {
        Self(cents as i64)
    }

    /// An amount of `cents` as stored (a `bigint` column), refused when negative.
    pub fn try_from_cents(cents: i64) -> Result<Self, MoneyError> {
        if cents < 0 {
            return Err(MoneyError::Negative);
        }
        Ok(Self(cents))
    }

    /// The amount in cents (never negative).
    #[must_use]
    pub fn cents(self) -> i64 {
        self.0
    }

    /// A non-negative JSON number with at most two decimals, at most [`Money::MAX_CENTS`].
    pub fn parse(v: f64, field: &'static str) -> Result<Self, ValueError> {
        let scaled = v * 100.0;
        let cents = scaled.round();
        if !v.is_finite() || v < 0.0 {
            return Err(ValueError::invalid(field, "must be a non-negative number"));
        }
        if (scaled - cents).abs() > 1e-6 {
            return Err(ValueError::invalid(field, "at most two decimals"));
        }
        if cents > Self::MAX_CENTS as f64 {
            return Err(ValueError::invalid(field, "too large"));
        }
        Ok(Self(cents as i64))
    }

    /// `self + other`, or `None` past the largest amount an `i64` of cents holds.
    #[must_use]
    pub fn checked_add(self, other: Money) -> Option<Money> {
        self.0.checked_add(other.0).map(Money)
    }

    /// `self + other`, stopping at the largest amount instead of overflowing.
    #[must_use]
    pub fn saturating_add(self, other: Money) -> Money {
        Money(self.0.saturating_add(other.0))
    }
}

impl Serialize for Money {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.0 % 100 == 0 {
            s.serialize_i64(self.0 / 100)
        } else {
            s.serialize_f64(self.0 as f64 / 100.0)
        }
    }
}

impl fmt::Display for Money {
    /// `1299.00`: two decimals, no thousands separator.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let abs = self.0.unsigned_abs();
        write!(f, "{sign}{}.{:02}", abs / 100, abs % 100)
    }
}

macro_rules! deserialize_via {
    ($t:ty, $parse:expr, $what:literal) => {
        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                $parse(&s).ok_or_else(|| serde::de::Error::custom(concat!("not ", $what)))
            }
        }
    };
}
deserialize_via!(Lang, Lang::parse, "a language (en, es)");
deserialize_via!(CareService, CareService::parse, "a Care Services service");

/// Money is read back from stored documents (JSON numbers, exact `numeric` in `jsonb`).
impl<'de> serde::Deserialize<'de> for Money {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = f64::deserialize(d)?;
        Money::parse(v, "amount").map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_parser_names_the_field_and_what_it_accepts() {
        let e = |r: Result<(), ValueError>| r.err().map(|e| e.to_string());
        assert_eq!(
            e(Lang::parse_field("fr", "defaultLang entries").map(drop)),
            Some("defaultLang entries must be en or es".into())
        );
        assert_eq!(
            e(CareService::parse_field("x", "service").map(drop)),
            Some(
                "service must be primary-care, urgent-care, mental-health, dermatology or veterinary-care"
                    .into()
            )
        );
        assert_eq!(
            e(Lang::parse_field("fr", "a")
                .map_err(|e| e.named("b"))
                .map(drop)),
            Some("b must be en or es".into())
        );
        assert_eq!(Lang::parse_field("es", "a").ok(), Some(Lang::Es));
    }

    #[test]
    fn partner_id_rules() {
        for ok in ["a", "ACME_co-7", &"x".repeat(64)] {
            assert!(PartnerId::parse(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a b", "a'b", "ü", &"x".repeat(65), "a\0b", "a/b"] {
            assert!(PartnerId::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn sub_id_rules() {
        assert_eq!(SubId::parse("7").map(SubId::get), Ok(7));
        assert_eq!(SubId::parse("250").map(SubId::get), Ok(250));
        assert_eq!(SubId::parse("1").map(SubId::get), Ok(1));
        for bad in [
            "", "0", "251", "07", "-1", "+1", "1.0", " 7", "abc", "1000", "٣",
        ] {
            assert!(SubId::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            serde_json::to_string(&SubId::new(7)).ok(),
            Some("\"7\"".into())
        );
        assert!(SubId::new(0).is_none() && SubId::new(251).is_none());
    }

    #[test]
    fn nickname_rules() {
        assert_eq!(
            Nickname::parse("  Ann  ").map(|n| n.to_string()),
            Ok("Ann".into())
        );
        assert!(Nickname::parse(&"é".repeat(64)).is_ok());
        for bad in ["", "   ", "a\u{0}b", "a\nb", &"x".repeat(65)] {
            assert!(Nickname::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn email_rules() {
        assert!(Email::parse("a@b.co").is_ok());
        for bad in [
            "", "ab.co", "a@b", "a@@b.co", "a b@c.co", "@b.co", "a@.co", "a@co.",
        ] {
            assert!(Email::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn enums_round_trip() {
        for c in CareService::ALL {
            assert_eq!(CareService::parse(c.as_str()), Some(c));
        }
        assert_eq!(Lang::parse("es"), Some(Lang::Es));
        assert_eq!(Lang::parse("ES"), None);
    }
}

#[cfg(test)]
mod money_tests {
    use super::*;

    #[test]
    fn money_parses_exactly_and_renders_minimal_json() {
        assert_eq!(Money::parse(19.99, "a"), Ok(Money(1999)));
        assert_eq!(Money::parse(0.1 + 0.2, "a"), Ok(Money(30)));
        assert_eq!(Money::parse(40.0, "a"), Ok(Money(4000)));
        assert!(Money::parse(0.001, "a").is_err());
        assert!(Money::parse(-1.0, "a").is_err());
        assert!(Money::parse(f64::NAN, "a").is_err());
        assert!(Money::parse(1e300, "a").is_err());
        let json = |c| serde_json::to_string(&Money(c)).expect("json");
        assert_eq!(json(4000), "40");
        assert_eq!(json(19950), "199.5");
        assert_eq!(json(1999), "19.99");
        assert_eq!(json(1), "0.01");
        assert_eq!(json(0), "0");
        assert_eq!(Money(129900).to_string(), "1299.00");
        assert_eq!(Money(5).to_string(), "0.05");
    }

    /// Issue 21: `Money::from_cents(-500)` went through. A negative literal no longer compiles
    /// (`from_cents` takes a `u32`), and an amount read back from storage is checked.
    #[test]
    fn money_from_cents_refuses_a_negative_amount() {
        assert_eq!(Money::try_from_cents(-500), Err(MoneyError::Negative));
        assert_eq!(Money::try_from_cents(i64::MIN), Err(MoneyError::Negative));
        assert_eq!(Money::try_from_cents(0), Ok(Money::ZERO));
        assert_eq!(Money::try_from_cents(500), Ok(Money::from_cents(500)));
        assert_eq!(
            Money::from_cents(u32::MAX).cents(),
            4_294_967_295,
            "every u32 is an amount"
        );
        assert!(
            Money::try_from_cents(i64::MAX)
                .expect("non-negative")
                .checked_add(Money::from_cents(1))
                .is_none(),
            "sums are checked"
        );
    }

    #[test]
    fn text_rules() {
        assert_eq!(text("f", "  a ", 1, 3), Ok("a".into()));
        assert!(text("f", "", 1, 3).is_err());
        assert_eq!(text("f", "", 0, 3), Ok(String::new()));
        assert!(text("f", "abcd", 0, 3).is_err());
        assert!(text("f", "a\u{0}", 0, 3).is_err());
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// `sub`/`subId`: never panics; accepted exactly when the text is the canonical decimal
        /// form of 1..=250.
        #[test]
        fn sub_id_accepts_exactly_the_canonical_1_to_250(s in prop_oneof![
            any::<String>(),
            "[0-9]{0,4}",
            "[-+ 0٣]{0,1}[0-9]{1,3}",
            (0u32..=1000).prop_map(|n| n.to_string()),
        ]) {
            let canonical = (1..=250u16).find(|n| n.to_string() == s);
            prop_assert_eq!(SubId::parse(&s).ok().map(|v| u16::from(v.get())), canonical, "{:?}", s);
        }
    }
}
