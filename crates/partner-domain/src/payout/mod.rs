//! Payouts.
//!
//! ```
//! use partner_domain::payout::{format_date, parse_period};
//!
//! let (from, to) = parse_period(Some("2026-11-01"), Some("2026-11-30"))?;
//! assert_eq!((format_date(from), format_date(to)), ("2026-11-01".into(), "2026-11-30".into()));
//! assert!(parse_period(Some("2026-12-01"), Some("2026-11-30")).is_err()); // from after to
//! assert!(parse_period(Some("2026-11-01"), None).is_err());
//! # Ok::<(), partner_domain::kernel::values::ValueError>(())
//! ```

pub mod ports;

mod service;

pub use service::{PayoutService, RecordPayoutError};

use time::Date;

use crate::kernel::ids::PayoutId;
use crate::kernel::values::{Money, PartnerId, ValueError};

/// Where a listing of payouts stands: the last payout listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PayoutKey {
    /// The payout's date.
    pub payout_date: Date,
    /// The day it was recorded.
    pub created_at: Date,
    /// Its id.
    pub id: PayoutId,
}

impl PayoutKey {
    /// Where a listing stands after `p`.
    pub fn of(p: &Payout) -> Self {
        Self {
            payout_date: p.payout_date,
            created_at: p.created_at,
            id: p.id,
        }
    }
}

/// A stored payout. `receipt_url` and `note` are admin-only and never rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payout {
    id: PayoutId,
    partner_id: PartnerId,
    email: String,
    created_at: Date,
    payout_date: Date,
    amount: Money,
    status: String,
    receipt_url: Option<String>,
    note: Option<String>,
}

/// `YYYY-MM-DD`.
pub fn format_date(d: Date) -> String {
    format!("{:04}-{:02}-{:02}", d.year(), u8::from(d.month()), d.day())
}

/// Parses `YYYY-MM-DD` exactly.
pub(crate) fn parse_date(s: &str) -> Option<Date> {
    let fmt = time::macros::format_description!("[year]-[month]-[day]");
    (s.len() == 10).then(|| Date::parse(s, &fmt).ok()).flatten()
}

/// A period of days given as `from` and `to` (the commission summary's): both required as
/// YYYY-MM-DD, `from` not after `to`.
pub fn parse_period(from: Option<&str>, to: Option<&str>) -> Result<(Date, Date), ValueError> {
    let date = |raw: Option<&str>, field| {
        raw.and_then(parse_date).ok_or(ValueError::RequiredAs {
            field,
            format: "YYYY-MM-DD",
        })
    };
    let (from, to) = (date(from, "from")?, date(to, "to")?);
    if from > to {
        return Err(ValueError::Rule("from must not be after to"));
    }
    Ok((from, to))
}

/// A date of a request field, `YYYY-MM-DD` exactly: `{field} must be YYYY-MM-DD` otherwise.
pub fn parse_date_field(s: &str, field: &'static str) -> Result<Date, ValueError> {
    parse_date(s).ok_or(ValueError::expected(field, "YYYY-MM-DD"))
}

impl Payout {
    /// A payout as stored: what the billing job reported, under the id, contact email and
    /// recording date the store gave it.
    pub fn new(id: PayoutId, email: String, created_at: Date, reported: NewPayout) -> Self {
        let NewPayout {
            partner_id,
            payout_date,
            amount,
            status,
            receipt_url,
            note,
        } = reported;
        Self {
            id,
            partner_id,
            email,
            created_at,
            payout_date,
            amount,
            status,
            receipt_url,
            note,
        }
    }

    /// The payout's id.
    #[must_use]
    pub fn id(&self) -> PayoutId {
        self.id
    }

    /// The partner's contact e-mail when the payout was recorded.
    #[must_use]
    pub fn email(&self) -> &str {
        &self.email
    }

    /// The partner paid.
    #[must_use]
    pub fn partner_id(&self) -> &PartnerId {
        &self.partner_id
    }

    /// The day the payout was recorded.
    #[must_use]
    pub fn created_at(&self) -> Date {
        self.created_at
    }

    /// The day it was paid.
    #[must_use]
    pub fn payout_date(&self) -> Date {
        self.payout_date
    }

    /// The amount paid.
    #[must_use]
    pub fn amount(&self) -> Money {
        self.amount
    }

    /// Its status as the billing job reported it.
    #[must_use]
    pub fn status(&self) -> &str {
        &self.status
    }
}

/// A payout as the billing job reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPayout {
    /// The partner paid.
    pub partner_id: PartnerId,
    /// The day it was paid.
    pub payout_date: Date,
    /// The amount paid.
    pub amount: Money,
    /// Its status (free text of the billing job).
    pub status: String,
    /// The receipt, for the operator only.
    pub receipt_url: Option<String>,
    /// A note, for the operator only.
    pub note: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::date;

    #[test]
    fn dates() {
        assert_eq!(parse_date("2026-11-21"), Some(date!(2026 - 11 - 21)));
        for bad in [
            "2026-11-31",
            "2026-1-2",
            "21/11/2026",
            "",
            "2026-11-21T00:00:00Z",
        ] {
            assert_eq!(parse_date(bad), None, "{bad}");
        }
        assert_eq!(format_date(date!(0999 - 01 - 02)), "0999-01-02");
    }
}
