//! Payouts.

pub mod ports;

use std::sync::Arc;

use serde::{Serialize, Serializer};
use time::Date;

use crate::account::auth::{Sealed, TokenKey};
use crate::events::{DomainEvent, Event};
use crate::kernel::clock::Clock;
use crate::kernel::error::RepoError;
use crate::kernel::ids::PayoutId;
use crate::kernel::page::Chunk;
use crate::kernel::random::Random;
use crate::kernel::uow::UnitOfWork;
use crate::kernel::values::{Money, PartnerId};
use crate::payout::ports::{PayoutRepo, PayoutTransaction};

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

/// Errors of [`PayoutService::record`].
#[derive(Debug, thiserror::Error)]
pub enum RecordPayoutError {
    #[error("no partner with that partnerId")]
    UnknownPartner,
    #[error(transparent)]
    Repo(#[from] RepoError),
}

/// Payout recording and listing.
#[derive(Debug, Clone)]
pub struct PayoutService {
    repo: Arc<dyn PayoutRepo>,
    uow: Arc<dyn UnitOfWork<dyn PayoutTransaction>>,
    clock: Arc<dyn Clock>,
    rng: Arc<dyn Random>,
}

impl PayoutService {
    pub fn new(
        repo: Arc<dyn PayoutRepo>,
        uow: Arc<dyn UnitOfWork<dyn PayoutTransaction>>,
        clock: Arc<dyn Clock>,
        rng: Arc<dyn Random>,
    ) -> Self {
        Self {
            repo,
            uow,
            clock,
            rng,
        }
    }

    /// Stores a payout (its `email` is the partner's, `createdAt` today) and `payout.created`.
    pub async fn record(&self, new: NewPayout) -> Result<PayoutRow, RecordPayoutError> {
        let id = PayoutId::generate(self.rng.as_ref());
        let now = self.clock.now();
        let mut tx = self.uow.begin().await?;
        let payout = tx
            .insert_payout(id, &new, now)
            .await?
            .ok_or(RecordPayoutError::UnknownPartner)?;
        let created = DomainEvent::new(new.partner_id.clone(), Event::PayoutCreated { payout: id });
        tx.publish(&[created], now).await?;
        tx.commit().await?;
        Ok(payout.row())
    }

    /// One chunk of the partner's payouts, newest payout date first, after `after` (see
    /// [`crate::order::OrderService::chunk`]).
    pub async fn chunk(
        &self,
        partner: &PartnerId,
        after: Option<PayoutKey>,
        size: u16,
    ) -> Result<Chunk<PayoutRow, PayoutKey>, RepoError> {
        let payouts = self.repo.payouts_page(partner, after, size).await?;
        Ok(Self::chunk_of(payouts, size))
    }

    /// The first [`Self::chunk`] for the partner of the token of `key`, read with the token's
    /// record in one round trip and sealed until authentication passes; [`Self::chunk_of`]
    /// makes the chunk of what it opens to. The following chunks are read after
    /// authentication, with [`Self::chunk`].
    pub async fn first_chunk_for_token(
        &self,
        key: TokenKey,
        size: u16,
    ) -> Result<Sealed<Vec<Payout>>, RepoError> {
        self.repo.payouts_page_for_token(key, size).await
    }

    /// The chunk of `payouts`, read as at most `size` rows.
    pub fn chunk_of(payouts: Vec<Payout>, size: u16) -> Chunk<PayoutRow, PayoutKey> {
        let next = (payouts.len() == usize::from(size))
            .then(|| payouts.last().map(PayoutKey::of))
            .flatten();
        Chunk {
            rows: payouts.iter().map(Payout::row).collect(),
            next,
        }
    }
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
