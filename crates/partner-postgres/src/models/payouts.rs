//! `payouts` rows.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Date, Nullable, Text};
use partner_domain::RepoError;
use partner_domain::kernel::ids::PayoutId;
use partner_domain::kernel::values::{Money, PartnerId};
use partner_domain::payout::{NewPayout, Payout};
use uuid::Uuid;

use crate::corrupt;
use crate::schema::payouts;

/// A payout as the listing (by name, from its raw chunk statement), webhook payloads and the
/// insert's `RETURNING` read it.
#[derive(Queryable, QueryableByName, Selectable)]
#[diesel(table_name = payouts, check_for_backend(diesel::pg::Pg))]
pub(crate) struct Row {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    id: Uuid,
    #[diesel(sql_type = Text)]
    partner_id: String,
    #[diesel(sql_type = Text)]
    email: String,
    #[diesel(sql_type = Date)]
    created_on: time::Date,
    #[diesel(sql_type = Date)]
    payout_date: time::Date,
    #[diesel(sql_type = BigInt)]
    amount_cents: i64,
    #[diesel(sql_type = Text)]
    status: String,
    #[diesel(sql_type = Nullable<Text>)]
    receipt_url: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    note: Option<String>,
}

impl Row {
    /// The row's id, readable whatever its other columns hold.
    pub(crate) fn id(&self) -> Uuid {
        self.id
    }

    pub(crate) fn into_domain(self) -> Result<Payout, RepoError> {
        Ok(Payout::new(
            PayoutId::from_uuid(self.id),
            self.email,
            self.created_on,
            NewPayout {
                partner_id: PartnerId::parse(&self.partner_id)
                    .map_err(|_| corrupt("partner id"))?,
                payout_date: self.payout_date,
                amount: Money::try_from_cents(self.amount_cents).map_err(|_| corrupt("amount"))?,
                status: self.status,
                receipt_url: self.receipt_url,
                note: self.note,
            },
        ))
    }
}
