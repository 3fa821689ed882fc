//! Sub-account attribution codes.
//!
//! A medical intake link built for a sub-account carries, as its `partner_id`, the code
//! `<partnerId>.<subId>` (`acme.7`). The dot is outside the partnerId alphabet, so the code is
//! unambiguous; it is URL-safe, so it survives any link unencoded. Ingest (leads, orders,
//! analytics events) accepts either a plain partnerId or such a code and resolves it to
//! (partnerId, subId).
//!
//! ```
//! use partner_domain::links::attribution::Attribution;
//!
//! let a = Attribution::parse("acme.7")?;
//! assert_eq!(a.partner_id.as_str(), "acme");
//! assert_eq!(a.sub_id.map(|s| s.get()), Some(7));
//! assert!(Attribution::parse("acme").is_ok_and(|a| a.sub_id.is_none()));
//! assert!(Attribution::parse("acme.0").is_err(), "sub-accounts are numbered 1-250");
//! # Ok::<(), partner_domain::kernel::values::ValueError>(())
//! ```

use std::fmt;

use crate::kernel::values::{PartnerId, SubId, ValueError};

/// A partner, optionally narrowed to one of its sub-accounts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribution {
    /// The partner.
    pub partner_id: PartnerId,
    /// The sub-account, if the code names one.
    pub sub_id: Option<SubId>,
}

impl Attribution {
    /// Parses a plain partnerId or a `<partnerId>.<subId>` code.
    pub fn parse(s: &str) -> Result<Self, ValueError> {
        match s.split_once('.') {
            None => Ok(Self {
                partner_id: PartnerId::parse(s)?,
                sub_id: None,
            }),
            Some((partner, sub)) => {
                let partner_id = PartnerId::parse(partner)?;
                let sub_id = SubId::parse(sub).map_err(|_| {
                    ValueError::invalid("partnerId", "a sub-account code ends in .<subId 1-250>")
                })?;
                Ok(Self {
                    partner_id,
                    sub_id: Some(sub_id),
                })
            }
        }
    }

    /// Combines a parsed `partnerId` field with an explicit `subId` field: they must agree
    /// when both name a sub-account.
    pub fn with_explicit_sub(self, explicit: Option<SubId>) -> Result<Self, ValueError> {
        match (self.sub_id, explicit) {
            (Some(a), Some(b)) if a != b => Err(ValueError::invalid(
                "subId",
                "differs from the sub-account in the partnerId code",
            )),
            (a, b) => Ok(Self {
                sub_id: a.or(b),
                ..self
            }),
        }
    }
}

impl fmt::Display for Attribution {
    /// The code carried by links: `acme` or `acme.7`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.sub_id {
            None => write!(f, "{}", self.partner_id),
            Some(s) => write!(f, "{}.{}", self.partner_id, s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for code in ["acme", "acme.7", "a_b-c.250"] {
            assert_eq!(
                Attribution::parse(code).map(|a| a.to_string()),
                Ok(code.to_owned())
            );
        }
        let a = Attribution::parse("acme.7").expect("code");
        assert_eq!(a.partner_id.as_str(), "acme");
        assert_eq!(a.sub_id.map(SubId::get), Some(7));
    }

    #[test]
    fn rejects_bad_codes() {
        for bad in [
            "", ".7", "acme.", "acme.0", "acme.251", "acme.07", "acme.7.1", "ac me.7", "acme.x",
        ] {
            assert!(Attribution::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn explicit_sub_must_agree() {
        let s = |n| SubId::new(n);
        let a = Attribution::parse("acme.7").expect("code");
        assert!(a.clone().with_explicit_sub(s(7)).is_ok());
        assert!(a.clone().with_explicit_sub(s(8)).is_err());
        assert_eq!(a.with_explicit_sub(None).map(|a| a.sub_id), Ok(s(7)));
        let plain = Attribution::parse("acme").expect("plain");
        assert_eq!(plain.with_explicit_sub(s(3)).map(|a| a.sub_id), Ok(s(3)));
    }
}
