//! Payouts.

pub mod ports;

mod service;

pub use service::{PayoutService, RecordPayoutError};

use serde::{Serialize, Serializer};
use time::Date;

use crate::kernel::ids::PayoutId;
use crate::kernel::values::{Money, PartnerId};

/// Where a listing of payouts stands: the last payout listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PayoutKey {
    pub payout_date: Date,
    pub created_at: Date,
    pub id: PayoutId,
}

impl PayoutKey {
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

/// The spec's `Payout`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PayoutRow {
    pub record_id: PayoutId,
    pub email: String,
    #[serde(serialize_with = "date")]
    pub created_at: Date,
    #[serde(serialize_with = "date")]
    pub payout_date: Date,
    pub payout_amount: Money,
    pub status: String,
}

fn date<S: Serializer>(d: &Date, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_date(*d))
}

/// `YYYY-MM-DD`.
pub fn format_date(d: Date) -> String {
    format!("{:04}-{:02}-{:02}", d.year(), u8::from(d.month()), d.day())
}

/// Parses `YYYY-MM-DD` exactly.
pub fn parse_date(s: &str) -> Option<Date> {
    let fmt = time::macros::format_description!("[year]-[month]-[day]");
    (s.len() == 10).then(|| Date::parse(s, &fmt).ok()).flatten()
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

    #[must_use]
    pub fn id(&self) -> PayoutId {
        self.id
    }

    pub fn row(&self) -> PayoutRow {
        PayoutRow {
            record_id: self.id,
            email: self.email.clone(),
            created_at: self.created_at,
            payout_date: self.payout_date,
            payout_amount: self.amount,
            status: self.status.clone(),
        }
    }
}

/// A payout as the billing job reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPayout {
    pub partner_id: PartnerId,
    pub payout_date: Date,
    pub amount: Money,
    pub status: String,
    pub receipt_url: Option<String>,
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

    #[test]
    fn row_shape() {
        let p = Payout::new(
            PayoutId::from_uuid(uuid::Uuid::nil()),
            "ops@acme.test".into(),
            date!(2026 - 11 - 21),
            NewPayout {
                partner_id: PartnerId::parse("acme").expect("id"),
                payout_date: date!(2026 - 11 - 30),
                amount: Money::from_cents(123450),
                status: "paid".into(),
                receipt_url: Some("https://r".into()),
                note: Some("secret".into()),
            },
        );
        let v = serde_json::to_value(p.row()).expect("json");
        assert_eq!(
            v,
            serde_json::json!({ "recordId": uuid::Uuid::nil(), "email": "ops@acme.test", "createdAt": "2026-11-21",
                "payoutDate": "2026-11-30", "payoutAmount": 1234.5, "status": "paid" })
        );
    }
}
