//! Operator-side storage: partners, feature flags, portal users and tokens.

use diesel::prelude::*;
use diesel::sql_types::{Array, Bool, Bytea, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnection, RunQueryDsl};
use partner_domain::RepoError;
use partner_domain::account::{
    ApiTokenInfo, CareFlags, CareServicesAccess, Partner, PartnerSettings, PortalUser,
};
use partner_domain::ports::{AccountRepo, NewToken, RotateOutcome};
use partner_domain::values::{CareService, Email, Lang, PartnerId};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::schema::{api_tokens, care_service_flags, partners, portal_users};
use crate::{PgStore, corrupt, db, is_violation};

#[derive(Queryable, QueryableByName)]
#[diesel(table_name = partners)]
pub(crate) struct PartnerRow {
    partner_id: String,
    name: String,
    email: String,
    active: bool,
    dna_access: bool,
    headless_links: bool,
    default_lang: String,
    enabled_langs: Vec<String>,
    cs_subscription_active: bool,
    cs_manual_override: bool,
    cs_yearly_bundle: bool,
    cs_services: Vec<String>,
    created_at: OffsetDateTime,
    updated_at: OffsetDateTime,
}

impl PartnerRow {
    pub(crate) fn into_domain(self) -> Result<Partner, RepoError> {
        let lang = |s: &str| Lang::parse(s).ok_or_else(|| corrupt("language"));
        Ok(Partner {
            partner_id: PartnerId::parse(&self.partner_id).map_err(|_| corrupt("partner id"))?,
            settings: PartnerSettings {
                name: self.name,
                email: Email::parse(&self.email).map_err(|_| corrupt("email"))?,
                active: self.active,
                dna_access: self.dna_access,
                headless_links: self.headless_links,
                default_lang: lang(&self.default_lang)?,
                enabled_langs: self
                    .enabled_langs
                    .iter()
                    .map(|l| lang(l))
                    .collect::<Result<_, _>>()?,
                care_services: CareServicesAccess {
                    subscription_active: self.cs_subscription_active,
                    manual_override: self.cs_manual_override,
                    yearly_bundle: self.cs_yearly_bundle,
                    services: self
                        .cs_services
                        .iter()
                        .map(|s| CareService::parse(s).ok_or_else(|| corrupt("care service")))
                        .collect::<Result<_, _>>()?,
                },
            },
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

#[derive(QueryableByName)]
struct Upserted {
    #[diesel(sql_type = Bool)]
    inserted: bool,
}

type TokenRow = (
    Uuid,
    String,
    OffsetDateTime,
    Option<OffsetDateTime>,
    Option<OffsetDateTime>,
    Option<OffsetDateTime>,
);

fn token_info(
    (id, token_prefix, created_at, expires_at, revoked_at, last_used_at): TokenRow,
) -> ApiTokenInfo {
    ApiTokenInfo {
        id,
        token_prefix,
        created_at,
        expires_at,
        revoked_at,
        last_used_at,
    }
}

fn insert_token_query(
    user_id: Uuid,
    t: &NewToken,
) -> impl diesel::query_builder::QueryFragment<diesel::pg::Pg>
+ diesel_async::methods::ExecuteDsl<diesel_async::AsyncPgConnection>
+ Send
+ '_ {
    // One statement: the token is stored only if its user exists and is not deleted.
    diesel::sql_query(
        "INSERT INTO api_tokens (id, user_id, token_hash, token_prefix, created_at, expires_at) \
         SELECT $1, u.id, $3, $4, $5, $6 FROM portal_users u WHERE u.id = $2 AND u.deleted_at IS NULL",
    )
    .bind::<diesel::sql_types::Uuid, _>(t.id)
    .bind::<diesel::sql_types::Uuid, _>(user_id)
    .bind::<Bytea, _>(t.hash.as_bytes())
    .bind::<Text, _>(&t.prefix)
    .bind::<Timestamptz, _>(t.created_at)
    .bind::<Nullable<Timestamptz>, _>(t.expires_at)
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
        let langs: Vec<&str> = s.enabled_langs.iter().map(|l| l.as_str()).collect();
        let services: Vec<&str> = s
            .care_services
            .services
            .iter()
            .map(|c| c.as_str())
            .collect();
        let up: Upserted = diesel::sql_query(
            "INSERT INTO partners (partner_id, name, email, active, dna_access, headless_links, \
               default_lang, enabled_langs, cs_subscription_active, cs_manual_override, \
               cs_yearly_bundle, cs_services, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13) \
             ON CONFLICT (partner_id) DO UPDATE SET name = EXCLUDED.name, email = EXCLUDED.email, \
               active = EXCLUDED.active, dna_access = EXCLUDED.dna_access, \
               headless_links = EXCLUDED.headless_links, default_lang = EXCLUDED.default_lang, \
               enabled_langs = EXCLUDED.enabled_langs, \
               cs_subscription_active = EXCLUDED.cs_subscription_active, \
               cs_manual_override = EXCLUDED.cs_manual_override, \
               cs_yearly_bundle = EXCLUDED.cs_yearly_bundle, cs_services = EXCLUDED.cs_services, \
               updated_at = EXCLUDED.updated_at \
             RETURNING (xmax = 0) AS inserted",
        )
        .bind::<Text, _>(id.as_str())
        .bind::<Text, _>(&s.name)
        .bind::<Text, _>(s.email.as_str())
        .bind::<Bool, _>(s.active)
        .bind::<Bool, _>(s.dna_access)
        .bind::<Bool, _>(s.headless_links)
        .bind::<Text, _>(s.default_lang.as_str())
        .bind::<Array<Text>, _>(&langs)
        .bind::<Bool, _>(s.care_services.subscription_active)
        .bind::<Bool, _>(s.care_services.manual_override)
        .bind::<Bool, _>(s.care_services.yearly_bundle)
        .bind::<Array<Text>, _>(&services)
        .bind::<Timestamptz, _>(now)
        .get_result(&mut conn)
        .await
        .map_err(db)?;
        let row: PartnerRow = partners::table
            .find(id.as_str())
            .first(&mut conn)
            .await
            .map_err(db)?;
        Ok((row.into_domain()?, up.inserted))
    }

    async fn partner(&self, id: &PartnerId) -> Result<Option<Partner>, RepoError> {
        let mut conn = self.conn().await?;
        let row: Option<PartnerRow> = partners::table
            .find(id.as_str())
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
        let rows: Vec<(Uuid, String, String, bool, OffsetDateTime)> = portal_users::table
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
        rows.into_iter()
            .map(|(id, partner_id, email, admin, created_at)| {
                Ok(PortalUser {
                    id,
                    partner_id: PartnerId::parse(&partner_id).map_err(|_| corrupt("partner id"))?,
                    email: Email::parse(&email).map_err(|_| corrupt("email"))?,
                    admin,
                    created_at,
                })
            })
            .collect()
    }

    async fn insert_user(&self, u: &PortalUser) -> Result<bool, RepoError> {
        let mut conn = self.conn().await?;
        let r = diesel::insert_into(portal_users::table)
            .values((
                portal_users::id.eq(u.id),
                portal_users::partner_id.eq(u.partner_id.as_str()),
                portal_users::email.eq(u.email.as_str()),
                portal_users::admin.eq(u.admin),
                portal_users::created_at.eq(u.created_at),
            ))
            .execute(&mut conn)
            .await;
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

    async fn delete_user(&self, id: Uuid, now: OffsetDateTime) -> Result<bool, RepoError> {
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

    async fn insert_token(&self, user_id: Uuid, t: &NewToken) -> Result<bool, RepoError> {
        let mut conn = self.conn().await?;
        let n = insert_token_query(user_id, t)
            .execute(&mut conn)
            .await
            .map_err(db)?;
        Ok(n == 1)
    }

    async fn tokens_of(&self, user_id: Uuid) -> Result<Option<Vec<ApiTokenInfo>>, RepoError> {
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
        let rows: Vec<TokenRow> = api_tokens::table
            .filter(api_tokens::user_id.eq(user_id))
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
        old: Uuid,
        new: &NewToken,
        now: OffsetDateTime,
    ) -> Result<RotateOutcome, RepoError> {
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
            let new = NewToken { expires_at, ..new };
            insert_token_query(user_id, &new).execute(conn).await?;
            Ok::<_, diesel::result::Error>(RotateOutcome::Rotated { expires_at })
        })
        .await
        .map_err(db)
    }

    async fn revoke_token(&self, id: Uuid, now: OffsetDateTime) -> Result<bool, RepoError> {
        let mut conn = self.conn().await?;
        // Revoking twice keeps the first revocation time.
        let n = diesel::sql_query(
            "UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1",
        )
        .bind::<diesel::sql_types::Uuid, _>(id)
        .bind::<Timestamptz, _>(now)
        .execute(&mut conn)
        .await
        .map_err(db)?;
        Ok(n == 1)
    }
}

async fn load_flags(conn: &mut diesel_async::AsyncPgConnection) -> Result<CareFlags, RepoError> {
    let rows: Vec<(String, bool)> = care_service_flags::table
        .select((care_service_flags::service, care_service_flags::enabled))
        .load(conn)
        .await
        .map_err(db)?;
    let mut flags = CareFlags::default();
    for (service, on) in rows {
        if let Some(s) = CareService::parse(&service) {
            flags.set(s, on);
        }
    }
    Ok(flags)
}
