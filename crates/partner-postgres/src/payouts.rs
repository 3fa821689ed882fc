//! Payouts.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Date, Nullable, Text};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use partner_domain::RepoError;
use partner_domain::auth::{Sealed, TokenKey};
use partner_domain::payout::{NewPayout, Payout, PayoutKey};
use partner_domain::ports::PayoutRepo;
use partner_domain::values::{Money, PartnerId};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::tokens::{self, TokenPartner};
use crate::{PgStore, corrupt, db};

#[derive(QueryableByName)]
struct Row {
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
    fn into_domain(self) -> Result<Payout, RepoError> {
        Ok(Payout {
            id: self.id,
            partner_id: PartnerId::parse(&self.partner_id).map_err(|_| corrupt("partner id"))?,
            email: self.email,
            created_at: self.created_on,
            payout_date: self.payout_date,
            amount: Money::from_cents(self.amount_cents),
            status: self.status,
            receipt_url: self.receipt_url,
            note: self.note,
        })
    }
}

const COLUMNS: &str =
    "id, partner_id, email, created_on, payout_date, amount_cents, status, receipt_url, note";

#[async_trait::async_trait]
impl PayoutRepo for PgStore {
    async fn payouts_page(
        &self,
        partner: &PartnerId,
        after: Option<PayoutKey>,
        limit: u16,
    ) -> Result<Vec<Payout>, RepoError> {
        let mut conn = self.conn().await?;
        // Keyset on the listing's order, which `payouts_partner_idx` holds.
        let after_sql = if after.is_some() {
            "AND (payout_date, created_on, id) < ($2, $3, $4)"
        } else {
            "AND $2 = $2 AND $3 = $3 AND $4 = $4"
        };
        // Unused on the first chunk; any date PostgreSQL accepts will do.
        let key = after.unwrap_or(PayoutKey {
            payout_date: time::macros::date!(2000 - 01 - 01),
            created_at: time::macros::date!(2000 - 01 - 01),
            id: Uuid::nil(),
        });
        // Prepared once per connection: a streamed listing runs this once per chunk.
        let rows: Vec<Row> = crate::Prepared(
            diesel::sql_query(format!(
                "SELECT {COLUMNS} FROM payouts WHERE partner_id = $1 {after_sql} \
                 ORDER BY payout_date DESC, created_on DESC, id DESC LIMIT $5"
            ))
            .bind::<Text, _>(partner.as_str())
            .bind::<Date, _>(key.payout_date)
            .bind::<Date, _>(key.created_at)
            .bind::<diesel::sql_types::Uuid, _>(key.id)
            .bind::<diesel::sql_types::BigInt, _>(i64::from(limit)),
        )
        .load(&mut conn)
        .await
        .map_err(db)?;
        rows.into_iter().map(Row::into_domain).collect()
    }

    async fn payouts_page_for_token(
        &self,
        key: TokenKey,
        limit: u16,
    ) -> Result<Sealed<Vec<Payout>>, RepoError> {
        let conn = self.conn().await?;
        let (token, payouts) = futures_util::future::try_join(
            tokens::lookup(&conn, &key.hash),
            first_page_for_token(&conn, &TokenPartner::of(key), limit),
        )
        .await?;
        Ok(Sealed::new(token, payouts))
    }
}

/// The first page of [`PayoutRepo::payouts_page`] with the partner taken from the token in SQL,
/// to be pipelined with the token lookup.
async fn first_page_for_token(
    mut conn: &AsyncPgConnection,
    partner: &TokenPartner,
    limit: u16,
) -> Result<Vec<Payout>, RepoError> {
    let (hash, now) = partner.binds();
    let rows: Vec<Row> = crate::Prepared(
        diesel::sql_query(format!(
            "SELECT {COLUMNS} FROM payouts WHERE partner_id = {} \
             ORDER BY payout_date DESC, created_on DESC, id DESC LIMIT $3",
            TokenPartner::sql(1, 2)
        ))
        .bind::<diesel::sql_types::Bytea, _>(hash)
        .bind::<diesel::sql_types::Timestamptz, _>(now)
        .bind::<BigInt, _>(i64::from(limit)),
    )
    .load(&mut conn)
    .await
    .map_err(db)?;
    rows.into_iter().map(Row::into_domain).collect()
}

/// One payout by id (for webhook payloads).
pub(crate) async fn payouts_by_ids(
    conn: &mut diesel_async::AsyncPgConnection,
    ids: &[Uuid],
) -> Result<Vec<Payout>, RepoError> {
    let rows: Vec<Row> =
        diesel::sql_query(format!("SELECT {COLUMNS} FROM payouts WHERE id = ANY($1)"))
            .bind::<diesel::sql_types::Array<diesel::sql_types::Uuid>, _>(ids)
            .load(conn)
            .await
            .map_err(db)?;
    rows.into_iter().map(Row::into_domain).collect()
}

/// Inserts the payout with the partner's email, copied in the same statement that checks the
/// partner exists; `None` when it does not.
pub(crate) async fn insert(
    conn: &mut diesel_async::AsyncPgConnection,
    id: Uuid,
    new: &NewPayout,
    now: OffsetDateTime,
) -> Result<Option<Payout>, RepoError> {
    let row: Option<Row> = diesel::sql_query(format!(
        "INSERT INTO payouts ({COLUMNS}) \
         SELECT $1, p.partner_id, p.email, $3, $4, $5, $6, $7, $8 FROM partners p WHERE p.partner_id = $2 \
         RETURNING {COLUMNS}"
    ))
    .bind::<diesel::sql_types::Uuid, _>(id)
    .bind::<Text, _>(new.partner_id.as_str())
    .bind::<Date, _>(now.date())
    .bind::<Date, _>(new.payout_date)
    .bind::<BigInt, _>(new.amount.cents())
    .bind::<Text, _>(&new.status)
    .bind::<Nullable<Text>, _>(new.receipt_url.as_deref())
    .bind::<Nullable<Text>, _>(new.note.as_deref())
    .get_result(conn)
    .await
    .optional()
    .map_err(db)?;
    row.map(Row::into_domain).transpose()
}
