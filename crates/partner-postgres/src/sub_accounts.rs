//! A partner's sub-accounts. Every statement filters by the caller's partner.

use diesel::prelude::*;
use diesel::sql_types::{SmallInt, Text, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use partner_domain::RepoError;
use partner_domain::account::auth::{Sealed, TokenKey};
use partner_domain::kernel::ids::SubAccountId;
use partner_domain::kernel::values::{PartnerId, SubId};
use partner_domain::sub_account::SubAccount;
use partner_domain::sub_account::ports::{InsertSubAccount, NewSubAccount, SubAccountRepo};

use crate::models::sub_accounts::Row;
use crate::schema::{partners, sub_accounts};
use crate::tokens::{self, TokenPartner};
use crate::{PgStore, db};

/// Inserts unless the partner already has that sub id, and returns the row with the partner's
/// email, in one round trip. Raw: a data-modifying CTE joined to `partners`, which the DSL
/// cannot write.
const INSERT_SQL: &str = "\
WITH ins AS ( \
  INSERT INTO sub_accounts (id, partner_id, sub_id, nickname, created_at, updated_at) \
  VALUES ($1, $2, $3, $4, $5, $5) \
  ON CONFLICT (partner_id, sub_id) DO NOTHING \
  RETURNING * ) \
SELECT ins.id, p.email, ins.sub_id, ins.nickname, ins.created_at, ins.updated_at \
FROM ins JOIN partners p USING (partner_id)";

#[async_trait::async_trait]
impl SubAccountRepo for PgStore {
    async fn list(&self, partner: &PartnerId) -> Result<Vec<SubAccount>, RepoError> {
        let mut conn = self.conn().await?;
        let rows: Vec<Row> = sub_accounts::table
            .inner_join(partners::table)
            .filter(sub_accounts::partner_id.eq(partner.as_str()))
            .order(sub_accounts::sub_id.asc())
            .select((
                sub_accounts::id,
                partners::email,
                sub_accounts::sub_id,
                sub_accounts::nickname,
                sub_accounts::created_at,
                sub_accounts::updated_at,
            ))
            .load(&mut conn)
            .await
            .map_err(db)?;
        rows.into_iter().map(Row::into_domain).collect()
    }

    async fn list_for_token(&self, key: TokenKey) -> Result<Sealed<Vec<SubAccount>>, RepoError> {
        let conn = self.conn().await?;
        let (token, subs) = futures_util::future::try_join(
            tokens::lookup(&conn, &key.hash),
            list_for_token(&conn, TokenPartner::of(key)),
        )
        .await?;
        Ok(Sealed::new(token, subs))
    }

    async fn find_for_token(
        &self,
        key: TokenKey,
        id: SubAccountId,
    ) -> Result<Sealed<Option<SubAccount>>, RepoError> {
        let conn = self.conn().await?;
        let (token, sub) = futures_util::future::try_join(
            tokens::lookup(&conn, &key.hash),
            find_for_token(&conn, TokenPartner::of(key), id),
        )
        .await?;
        Ok(Sealed::new(token, sub))
    }

    async fn insert(
        &self,
        partner: &PartnerId,
        new: &NewSubAccount,
    ) -> Result<InsertSubAccount, RepoError> {
        let mut conn = self.conn().await?;
        let row: Option<Row> = diesel::sql_query(INSERT_SQL)
            .bind::<diesel::sql_types::Uuid, _>(new.id.as_uuid())
            .bind::<Text, _>(partner.as_str())
            .bind::<SmallInt, _>(i16::from(new.sub_id.get()))
            .bind::<Text, _>(new.nickname.as_str())
            .bind::<Timestamptz, _>(new.now)
            .get_result(&mut conn)
            .await
            .optional()
            .map_err(db)?;
        match row {
            Some(r) => Ok(InsertSubAccount::Inserted(r.into_domain()?)),
            None => Ok(InsertSubAccount::DuplicateSubId),
        }
    }

    async fn delete(&self, partner: &PartnerId, id: SubAccountId) -> Result<bool, RepoError> {
        let mut conn = self.conn().await?;
        let n = diesel::delete(sub_accounts::table)
            .filter(sub_accounts::partner_id.eq(partner.as_str()))
            .filter(sub_accounts::id.eq(id.as_uuid()))
            .execute(&mut conn)
            .await
            .map_err(db)?;
        Ok(n == 1)
    }

    async fn exists(&self, partner: &PartnerId, sub_id: SubId) -> Result<bool, RepoError> {
        let mut conn = self.conn().await?;
        diesel::select(diesel::dsl::exists(
            sub_accounts::table
                .filter(sub_accounts::partner_id.eq(partner.as_str()))
                .filter(sub_accounts::sub_id.eq(i16::from(sub_id.get()))),
        ))
        .get_result(&mut conn)
        .await
        .map_err(db)
    }
}

/// [`SubAccountRepo::list`]'s statement with the partner taken from the token in SQL, to be
/// pipelined with the token lookup.
async fn list_for_token(
    mut conn: &AsyncPgConnection,
    partner: TokenPartner,
) -> Result<Vec<SubAccount>, RepoError> {
    let rows: Vec<Row> = sub_accounts::table
        .inner_join(partners::table)
        .filter(sub_accounts::partner_id.eq(partner))
        .order(sub_accounts::sub_id.asc())
        .select((
            sub_accounts::id,
            partners::email,
            sub_accounts::sub_id,
            sub_accounts::nickname,
            sub_accounts::created_at,
            sub_accounts::updated_at,
        ))
        .load(&mut conn)
        .await
        .map_err(db)?;
    rows.into_iter().map(Row::into_domain).collect()
}

/// The sub-account with this id of the token's partner (taken from the token in SQL), to be
/// pipelined with the token lookup.
async fn find_for_token(
    mut conn: &AsyncPgConnection,
    partner: TokenPartner,
    id: SubAccountId,
) -> Result<Option<SubAccount>, RepoError> {
    let row: Option<Row> = sub_accounts::table
        .inner_join(partners::table)
        .filter(sub_accounts::partner_id.eq(partner))
        .filter(sub_accounts::id.eq(id.as_uuid()))
        .select((
            sub_accounts::id,
            partners::email,
            sub_accounts::sub_id,
            sub_accounts::nickname,
            sub_accounts::created_at,
            sub_accounts::updated_at,
        ))
        .get_result(&mut conn)
        .await
        .optional()
        .map_err(db)?;
    row.map(Row::into_domain).transpose()
}
