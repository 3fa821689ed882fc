//! Portal codes and the portal sessions they are exchanged for (extensions §10).

use diesel::prelude::*;
use diesel_async::{AsyncConnection, RunQueryDsl};
use partner_domain::RepoError;
use partner_domain::account::ports::{NewPortalCode, NewToken, PortalRepo};
use partner_domain::account::token::TokenHash;
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

use crate::schema::{api_tokens, partners, portal_codes, portal_users};
use crate::{PgStore, db};

/// Spent or expired codes are kept this long after their expiry, then deleted by the next mint.
const CODE_KEEP: Duration = Duration::DAY;

/// Portal sessions expired for a day ([`CODE_KEEP`]) are deleted too, at most this many at each
/// mint, oldest first (`api_tokens_portal_expires_idx`): a mint opens at most one session, so
/// this keeps up while reading only what it deletes. A session's id is referred to by nothing
/// (a session cannot mint a link, so no code or session names it as `portal_of`).
const SESSIONS_PER_MINT: i64 = 100;

#[async_trait::async_trait]
impl PortalRepo for PgStore {
    async fn insert_code(&self, code: &NewPortalCode) -> Result<(), RepoError> {
        let mut conn = self.conn().await?;
        diesel::delete(portal_codes::table)
            .filter(portal_codes::expires_at.lt(code.created_at - CODE_KEEP))
            .execute(&mut conn)
            .await
            .map_err(db)?;
        let t = diesel::alias!(api_tokens as t);
        let expired = t
            .filter(t.field(api_tokens::portal_of).is_not_null())
            .filter(
                t.field(api_tokens::expires_at)
                    .lt(code.created_at - CODE_KEEP),
            )
            .order(t.field(api_tokens::expires_at))
            .select(t.field(api_tokens::id))
            .limit(SESSIONS_PER_MINT);
        diesel::delete(api_tokens::table)
            .filter(api_tokens::id.eq_any(expired))
            .execute(&mut conn)
            .await
            .map_err(db)?;
        diesel::insert_into(portal_codes::table)
            .values((
                portal_codes::code_hash.eq(code.hash.as_bytes()),
                portal_codes::token_id.eq(code.minted_by.as_uuid()),
                portal_codes::created_at.eq(code.created_at),
                portal_codes::expires_at.eq(code.expires_at),
                portal_codes::used_at.eq(None::<OffsetDateTime>),
            ))
            .execute(&mut conn)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn exchange(
        &self,
        code: &TokenHash,
        session: &NewToken,
        now: OffsetDateTime,
    ) -> Result<Option<OffsetDateTime>, RepoError> {
        let mut conn = self.conn().await?;
        let hash = code.as_bytes().to_vec();
        let session = session.clone();
        conn.transaction(async |conn| {
            // Of concurrent exchanges one updates the row; the others wait for its lock, find
            // `used_at` set when they re-check, and update nothing.
            let minted_by: Option<Uuid> = diesel::update(portal_codes::table)
                .filter(portal_codes::code_hash.eq(&hash))
                .filter(portal_codes::used_at.is_null())
                .filter(portal_codes::expires_at.gt(now))
                .set(portal_codes::used_at.eq(now))
                .returning(portal_codes::token_id)
                .get_result(conn)
                .await
                .optional()?;
            let Some(minted_by) = minted_by else {
                return Ok(None);
            };
            // `FOR SHARE` waits for a revocation of the token in progress (which then revokes
            // the sessions committed before it; see `accounts::revoke_portal_sessions`).
            let parent: Option<(Uuid, Option<OffsetDateTime>)> = api_tokens::table
                .inner_join(portal_users::table.inner_join(partners::table))
                .filter(api_tokens::id.eq(minted_by))
                .filter(api_tokens::revoked_at.is_null())
                .filter(portal_users::deleted_at.is_null())
                .filter(partners::active)
                .select((api_tokens::user_id, api_tokens::expires_at))
                .for_share()
                .first(conn)
                .await
                .optional()?;
            let Some((user_id, parent_expires)) = parent else {
                return Ok(None);
            };
            if parent_expires.is_some_and(|e| e <= now) {
                return Ok(None);
            }
            // A session never outlives the token that opened it.
            let expires_at = match (session.expires_at, parent_expires) {
                (Some(s), Some(p)) => Some(s.min(p)),
                (s, p) => s.or(p),
            };
            diesel::insert_into(api_tokens::table)
                .values((
                    api_tokens::id.eq(session.id.as_uuid()),
                    api_tokens::user_id.eq(user_id),
                    api_tokens::token_hash.eq(session.hash.as_bytes()),
                    api_tokens::token_prefix.eq(&session.prefix),
                    api_tokens::created_at.eq(session.created_at),
                    api_tokens::expires_at.eq(expires_at),
                    api_tokens::portal_of.eq(Some(minted_by)),
                ))
                .execute(conn)
                .await?;
            Ok::<_, diesel::result::Error>(expires_at)
        })
        .await
        .map_err(db)
    }
}
