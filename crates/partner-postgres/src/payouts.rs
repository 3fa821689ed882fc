//! Payouts.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Date, Text};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use partner_domain::RepoError;
use partner_domain::account::auth::{Sealed, TokenKey};
use partner_domain::kernel::ids::PayoutId;
use partner_domain::kernel::values::PartnerId;
use partner_domain::payout::ports::PayoutRepo;
use partner_domain::payout::{NewPayout, Payout, PayoutKey};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::models::payouts::Row;
use crate::schema::{partners, payouts};
use crate::tokens::{self, TokenPartner};
use crate::{PgStore, db};

// The listing's chunk statement stays raw on purpose: it is the statement measured in
// `docs/performance.md` (a streamed listing runs it once per chunk), prepared once per
// connection through [`crate::Prepared`]. It takes the same parameters with or without a cursor
// (`$2 = $2 …`), and its keyset condition is one row comparison in the order of
// `payouts_partner_idx`.

/// The first chunk: `$1` partner, `$2`-`$4` unused, `$5` limit.
const PAGE_FIRST_SQL: &str = "SELECT id, partner_id, email, created_on, payout_date, amount_cents, status, receipt_url, note \
     FROM payouts WHERE partner_id = $1 AND $2 = $2 AND $3 = $3 AND $4 = $4 \
     ORDER BY payout_date DESC, created_on DESC, id DESC LIMIT $5";

/// A chunk after the cursor `($2, $3, $4)`, in the order `payouts_partner_idx` holds.
const PAGE_AFTER_SQL: &str = "SELECT id, partner_id, email, created_on, payout_date, amount_cents, status, receipt_url, note \
     FROM payouts WHERE partner_id = $1 AND (payout_date, created_on, id) < ($2, $3, $4) \
     ORDER BY payout_date DESC, created_on DESC, id DESC LIMIT $5";

#[async_trait::async_trait]
impl PayoutRepo for PgStore {
    async fn payouts_page(
        &self,
        partner: &PartnerId,
        after: Option<PayoutKey>,
        limit: u16,
    ) -> Result<Vec<Payout>, RepoError> {
        let mut conn = self.conn().await?;
        let sql = if after.is_some() {
            PAGE_AFTER_SQL
        } else {
            PAGE_FIRST_SQL
        };
        // Unused on the first chunk; any date PostgreSQL accepts will do.
        let key = after.unwrap_or(PayoutKey {
            payout_date: time::macros::date!(2000 - 01 - 01),
            created_at: time::macros::date!(2000 - 01 - 01),
            id: PayoutId::from_uuid(Uuid::nil()),
        });
        // Prepared once per connection: a streamed listing runs this once per chunk.
        let rows: Vec<Row> = crate::Prepared(
            diesel::sql_query(sql)
                .bind::<Text, _>(partner.as_str())
                .bind::<Date, _>(key.payout_date)
                .bind::<Date, _>(key.created_at)
                .bind::<diesel::sql_types::Uuid, _>(key.id.as_uuid())
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

    async fn payout_for_token(
        &self,
        key: TokenKey,
        id: PayoutId,
    ) -> Result<Sealed<Option<Payout>>, RepoError> {
        let conn = self.conn().await?;
        let (token, payout) = futures_util::future::try_join(
            tokens::lookup(&conn, &key.hash),
            payout_for_token(&conn, TokenPartner::of(key), id),
        )
        .await?;
        Ok(Sealed::new(token, payout))
    }
}

/// The payout with this id of the token's partner (taken from the token in SQL), to be
/// pipelined with the token lookup.
async fn payout_for_token(
    mut conn: &AsyncPgConnection,
    partner: TokenPartner,
    id: PayoutId,
) -> Result<Option<Payout>, RepoError> {
    let row: Option<Row> = payouts::table
        .filter(payouts::id.eq(id.as_uuid()))
        .filter(payouts::partner_id.eq(partner))
        .select(Row::as_select())
        .get_result(&mut conn)
        .await
        .optional()
        .map_err(db)?;
    row.map(Row::into_domain).transpose()
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
            "SELECT id, partner_id, email, created_on, payout_date, amount_cents, status, receipt_url, note \
             FROM payouts WHERE partner_id = {} \
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
    mut conn: &diesel_async::AsyncPgConnection,
    ids: &[Uuid],
) -> Result<(Vec<Payout>, Vec<Uuid>), RepoError> {
    let rows: Vec<Row> = payouts::table
        .filter(payouts::id.eq_any(ids))
        .select(Row::as_select())
        .load(&mut conn)
        .await
        .map_err(db)?;
    Ok(crate::readable(rows, Row::id, Row::into_domain))
}

/// Inserts the payout with the partner's email, copied in the same statement that checks the
/// partner exists (`INSERT … SELECT … FROM partners`); `None` when it does not.
pub(crate) async fn insert(
    conn: &mut diesel_async::AsyncPgConnection,
    id: Uuid,
    new: &NewPayout,
    now: OffsetDateTime,
) -> Result<Option<Payout>, RepoError> {
    let from_partner = partners::table
        .filter(partners::partner_id.eq(new.partner_id.as_str()))
        .select((
            id.into_sql::<diesel::sql_types::Uuid>(),
            partners::partner_id,
            partners::email,
            now.date().into_sql::<Date>(),
            new.payout_date.into_sql::<Date>(),
            new.amount.cents().into_sql::<diesel::sql_types::BigInt>(),
            new.status.as_str().into_sql::<Text>(),
            new.receipt_url
                .as_deref()
                .into_sql::<diesel::sql_types::Nullable<Text>>(),
            new.note
                .as_deref()
                .into_sql::<diesel::sql_types::Nullable<Text>>(),
        ));
    let row: Option<Row> = diesel::insert_into(payouts::table)
        .values(from_partner)
        .into_columns((
            payouts::id,
            payouts::partner_id,
            payouts::email,
            payouts::created_on,
            payouts::payout_date,
            payouts::amount_cents,
            payouts::status,
            payouts::receipt_url,
            payouts::note,
        ))
        .returning(Row::as_returning())
        .get_result(conn)
        .await
        .optional()
        .map_err(db)?;
    row.map(Row::into_domain).transpose()
}
