//! Operator-side storage: partners, feature flags, portal users and tokens.

use diesel::prelude::*;
use diesel::sql_types::{Bool, Bytea, Nullable, Text, Timestamptz};
use diesel::upsert::excluded;
use diesel_async::{AsyncConnection, RunQueryDsl};
use partner_domain::RepoError;
use partner_domain::account::ports::{AccountRepo, NewToken, PartnerDirectory, RotateOutcome};
use partner_domain::account::{ApiTokenInfo, CareFlags, Partner, PartnerSettings, PortalUser};
use partner_domain::kernel::ids::{TokenId, UserId};
use partner_domain::kernel::values::{CareService, PartnerId, SubId};
use partner_domain::sub_account::ports::SubAccountRepo;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::dsl::{coalesce, fixed};
use crate::models::api_tokens::{TokenRow, token_info};
use crate::models::care_service_flags::{FlagRow, flags};
use crate::models::partners::{NewPartner, PartnerRow};
use crate::models::portal_users::{NewUser, UserRow, user};
use crate::schema::{api_tokens, care_service_flags, partners, portal_codes, portal_users};
use crate::{PgStore, db, is_violation};

/// Stores the token only if its user exists and is not deleted, in one statement
/// (`INSERT … SELECT … FROM portal_users`).
async fn insert_token(
    conn: &mut diesel_async::AsyncPgConnection,
    user_id: Uuid,
    t: &NewToken,
) -> QueryResult<usize> {
    let from_live_user = portal_users::table
        .filter(portal_users::id.eq(user_id))
        .filter(portal_users::deleted_at.is_null())
        .select((
            t.id.as_uuid().into_sql::<diesel::sql_types::Uuid>(),
            portal_users::id,
            t.hash.as_bytes().into_sql::<Bytea>(),
            t.prefix.as_str().into_sql::<Text>(),
            t.created_at.into_sql::<Timestamptz>(),
            t.expires_at.into_sql::<Nullable<Timestamptz>>(),
        ));
    diesel::insert_into(api_tokens::table)
        .values(from_live_user)
        .into_columns((
            api_tokens::id,
            api_tokens::user_id,
            api_tokens::token_hash,
            api_tokens::token_prefix,
            api_tokens::created_at,
            api_tokens::expires_at,
        ))
        .execute(conn)
        .await
}

#[async_trait::async_trait]
impl PartnerDirectory for PgStore {
    async fn partner_exists(&self, id: &PartnerId) -> Result<bool, RepoError> {
        let mut conn = self.conn().await?;
        diesel::select(diesel::dsl::exists(
            partners::table.filter(partners::partner_id.eq(id.as_str())),
        ))
        .get_result(&mut conn)
        .await
        .map_err(db)
    }

    async fn sub_account_exists(&self, id: &PartnerId, sub: SubId) -> Result<bool, RepoError> {
        SubAccountRepo::exists(self, id, sub).await
    }
}

#[async_trait::async_trait]
impl AccountRepo for PgStore {
    async fn upsert_partner(
        &self,
        id: &PartnerId,
        s: &PartnerSettings,
        now: OffsetDateTime,
    ) -> Result<(Partner, bool), RepoError> {
        let mut conn = self.conn().await?;
        // `xmax = 0` only on a row this statement inserted (an updated row carries the
        // updating transaction's id), which tells a created partner from an updated one.
        let inserted: bool = diesel::insert_into(partners::table)
            .values(NewPartner::new(id, s, now))
            .on_conflict(partners::partner_id)
            .do_update()
            .set((
                partners::name.eq(excluded(partners::name)),
                partners::email.eq(excluded(partners::email)),
                partners::active.eq(excluded(partners::active)),
                partners::dna_access.eq(excluded(partners::dna_access)),
                partners::headless_links.eq(excluded(partners::headless_links)),
                partners::default_lang.eq(excluded(partners::default_lang)),
                partners::enabled_langs.eq(excluded(partners::enabled_langs)),
                partners::cs_subscription_active.eq(excluded(partners::cs_subscription_active)),
                partners::cs_manual_override.eq(excluded(partners::cs_manual_override)),
                partners::cs_yearly_bundle.eq(excluded(partners::cs_yearly_bundle)),
                partners::cs_services.eq(excluded(partners::cs_services)),
                partners::updated_at.eq(excluded(partners::updated_at)),
            ))
            .returning(fixed::<Bool>("xmax = 0"))
            .get_result(&mut conn)
            .await
            .map_err(db)?;
        let row: PartnerRow = partners::table
            .find(id.as_str())
            .select(PartnerRow::as_select())
            .first(&mut conn)
            .await
            .map_err(db)?;
        Ok((row.into_domain()?, inserted))
    }

    async fn partner(&self, id: &PartnerId) -> Result<Option<Partner>, RepoError> {
        let mut conn = self.conn().await?;
        let row: Option<PartnerRow> = partners::table
            .find(id.as_str())
            .select(PartnerRow::as_select())
            .first(&mut conn)
            .await
            .optional()
            .map_err(db)?;
        row.map(PartnerRow::into_domain).transpose()
    }

    async fn care_flags(&self) -> Result<CareFlags, RepoError> {
        let mut conn = self.conn().await?;
        load_flags(&mut conn).await
    }

    async fn set_care_flags(
        &self,
        changes: &[(CareService, bool)],
    ) -> Result<CareFlags, RepoError> {
        let mut conn = self.conn().await?;
        let changes = changes.to_vec();
        conn.transaction(async |conn| {
            for (service, on) in changes {
                diesel::update(care_service_flags::table.find(service.as_str()))
                    .set(care_service_flags::enabled.eq(on))
                    .execute(conn)
                    .await?;
            }
            Ok::<_, diesel::result::Error>(())
        })
        .await
        .map_err(db)?;
        load_flags(&mut conn).await
    }

    async fn users_of(&self, partner: &PartnerId) -> Result<Vec<PortalUser>, RepoError> {
        let mut conn = self.conn().await?;
        let rows: Vec<UserRow> = portal_users::table
            .filter(portal_users::partner_id.eq(partner.as_str()))
            .filter(portal_users::deleted_at.is_null())
            .order((portal_users::created_at.asc(), portal_users::id.asc()))
            .select((
                portal_users::id,
                portal_users::partner_id,
                portal_users::email,
                portal_users::admin,
                portal_users::created_at,
            ))
            .load(&mut conn)
            .await
            .map_err(db)?;
        rows.into_iter().map(user).collect()
    }

    async fn insert_user(&self, u: &PortalUser) -> Result<bool, RepoError> {
        let mut conn = self.conn().await?;
        // A partner gone meanwhile is answered: it must not end a held transaction.
        let guarded = crate::guard_statement(&mut conn).await?;
        let r = diesel::insert_into(portal_users::table)
            .values(NewUser::new(u))
            .execute(&mut conn)
            .await;
        crate::end_guard(&mut conn, guarded, r.is_ok()).await?;
        match r {
            Ok(_) => Ok(true),
            Err(e)
                if is_violation(&e, |k| {
                    matches!(k, diesel::result::DatabaseErrorKind::ForeignKeyViolation)
                }) =>
            {
                Ok(false)
            }
            Err(e) => Err(db(e)),
        }
    }

    async fn delete_user(&self, id: UserId, now: OffsetDateTime) -> Result<bool, RepoError> {
        let id = id.as_uuid();
        let mut conn = self.conn().await?;
        let n = diesel::update(portal_users::table)
            .filter(portal_users::id.eq(id))
            .filter(portal_users::deleted_at.is_null())
            .set(portal_users::deleted_at.eq(now))
            .execute(&mut conn)
            .await
            .map_err(db)?;
        Ok(n == 1)
    }

    async fn insert_token(&self, user_id: UserId, t: &NewToken) -> Result<bool, RepoError> {
        let user_id = user_id.as_uuid();
        let mut conn = self.conn().await?;
        let n = insert_token(&mut conn, user_id, t).await.map_err(db)?;
        Ok(n == 1)
    }

    async fn tokens_of(&self, user_id: UserId) -> Result<Option<Vec<ApiTokenInfo>>, RepoError> {
        let user_id = user_id.as_uuid();
        let mut conn = self.conn().await?;
        let user_live: bool = diesel::select(diesel::dsl::exists(
            portal_users::table
                .filter(portal_users::id.eq(user_id))
                .filter(portal_users::deleted_at.is_null()),
        ))
        .get_result(&mut conn)
        .await
        .map_err(db)?;
        if !user_live {
            return Ok(None);
        }
        // Portal sessions are not the user's API tokens: they end with the token that opened
        // them and are never listed.
        let rows: Vec<TokenRow> = api_tokens::table
            .filter(api_tokens::user_id.eq(user_id))
            .filter(api_tokens::portal_of.is_null())
            .order((api_tokens::created_at.asc(), api_tokens::id.asc()))
            .select((
                api_tokens::id,
                api_tokens::token_prefix,
                api_tokens::created_at,
                api_tokens::expires_at,
                api_tokens::revoked_at,
                api_tokens::last_used_at,
            ))
            .load(&mut conn)
            .await
            .map_err(db)?;
        Ok(Some(rows.into_iter().map(token_info).collect()))
    }

    async fn rotate_token(
        &self,
        old: TokenId,
        new: &NewToken,
        now: OffsetDateTime,
    ) -> Result<RotateOutcome, RepoError> {
        let old = old.as_uuid();
        let mut conn = self.conn().await?;
        let new = new.clone();
        conn.transaction(async |conn| {
            // Lock the old token so two concurrent rotations cannot both succeed.
            let found: Option<(
                Uuid,
                Option<OffsetDateTime>,
                Option<OffsetDateTime>,
                Option<OffsetDateTime>,
            )> = api_tokens::table
                .inner_join(portal_users::table)
                .filter(api_tokens::id.eq(old))
                .select((
                    api_tokens::user_id,
                    api_tokens::expires_at,
                    api_tokens::revoked_at,
                    portal_users::deleted_at,
                ))
                .for_update()
                .first(conn)
                .await
                .optional()?;
            let Some((user_id, expires_at, revoked_at, deleted_at)) = found else {
                return Ok(RotateOutcome::NotFound);
            };
            if revoked_at.is_some() || deleted_at.is_some() || expires_at.is_some_and(|e| e <= now)
            {
                return Ok(RotateOutcome::NotLive);
            }
            diesel::update(api_tokens::table.find(old))
                .set(api_tokens::revoked_at.eq(now))
                .execute(conn)
                .await?;
            revoke_portal_sessions(conn, old, now).await?;
            let new = NewToken { expires_at, ..new };
            insert_token(conn, user_id, &new).await?;
            Ok::<_, diesel::result::Error>(RotateOutcome::Rotated { expires_at })
        })
        .await
        .map_err(db)
    }

    async fn revoke_token(&self, id: TokenId, now: OffsetDateTime) -> Result<bool, RepoError> {
        let id = id.as_uuid();
        let mut conn = self.conn().await?;
        conn.transaction(async |conn| {
            // Revoking twice keeps the first revocation time.
            let n = diesel::update(api_tokens::table.find(id))
                .set(api_tokens::revoked_at.eq(coalesce(api_tokens::revoked_at, now).nullable()))
                .execute(conn)
                .await?;
            revoke_portal_sessions(conn, id, now).await?;
            Ok::<_, diesel::result::Error>(n == 1)
        })
        .await
        .map_err(db)
    }
}

/// Revokes the portal sessions opened with `token` and spends its unused portal codes
/// (docs/decisions.md, "Portal sessions"). Run after the statement that revoked `token` in the
/// same transaction: that statement's row lock makes a concurrent exchange (which locks the
/// token `FOR SHARE`) wait, and in READ COMMITTED this statement sees a session that exchange
/// committed before the lock was taken.
async fn revoke_portal_sessions(
    conn: &mut diesel_async::AsyncPgConnection,
    token: Uuid,
    now: OffsetDateTime,
) -> QueryResult<()> {
    diesel::update(api_tokens::table)
        .filter(api_tokens::portal_of.eq(token))
        .filter(api_tokens::revoked_at.is_null())
        .set(api_tokens::revoked_at.eq(now))
        .execute(conn)
        .await?;
    diesel::update(portal_codes::table)
        .filter(portal_codes::token_id.eq(token))
        .filter(portal_codes::used_at.is_null())
        .set(portal_codes::used_at.eq(now))
        .execute(conn)
        .await?;
    Ok(())
}

async fn load_flags(conn: &mut diesel_async::AsyncPgConnection) -> Result<CareFlags, RepoError> {
    let rows: Vec<FlagRow> = care_service_flags::table
        .select((care_service_flags::service, care_service_flags::enabled))
        .load(conn)
        .await
        .map_err(db)?;
    Ok(flags(rows))
}

#[async_trait::async_trait]
impl partner_domain::links::ports::LinkPartners for PgStore {
    async fn partner(&self, id: &PartnerId) -> Result<Option<Partner>, RepoError> {
        <Self as AccountRepo>::partner(self, id).await
    }

    async fn care_flags(&self) -> Result<CareFlags, RepoError> {
        <Self as AccountRepo>::care_flags(self).await
    }
}
