//! Value types parsed at the edge. Each has a private field and a `parse` returning a typed
//! error, so a value that exists is valid and the rest of the code never re-checks it.

use std::fmt;

use serde::{Serialize, Serializer};

/// Why a value was rejected. The text is safe to show to API clients: it never echoes input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    #[error("{0} is required")]
    Missing(&'static str),
    #[error("{field} is invalid: {reason}")]
    Invalid {
        field: &'static str,
        reason: &'static str,
    },
}

impl ValueError {
    pub(crate) fn invalid(field: &'static str, reason: &'static str) -> Self {
        Self::Invalid { field, reason }
    }
}

macro_rules! string_value {
    ($name:ident) => {
        impl $name {
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
    pub const MAX_LEN: usize = 64;

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
    pub const MIN: u8 = 1;
    pub const MAX: u8 = 250;

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
    En,
    Es,
}

impl Lang {
    pub const ALL: [Lang; 2] = [Lang::En, Lang::Es];

    /// `en` or `es`, exactly.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "en" => Some(Self::En),
            "es" => Some(Self::Es),
            _ => None,
        }
    }

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
    PrimaryCare,
    UrgentCare,
    MentalHealth,
    Dermatology,
    VeterinaryCare,
}

impl CareService {
    pub const ALL: [CareService; 5] = [
        Self::PrimaryCare,
        Self::UrgentCare,
        Self::MentalHealth,
        Self::Dermatology,
        Self::VeterinaryCare,
    ];

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }

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

#[cfg(test)]
mod tests {
    use super::*;

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
