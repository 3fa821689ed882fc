//! Token lookups on the request path.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use partner_domain::RepoError;
use partner_domain::auth::LAST_USED_RESOLUTION;
use partner_domain::ids::TokenId;
use partner_domain::ports::{TokenRecord, TokenRepo};
use partner_domain::token::TokenHash;
use time::OffsetDateTime;

use crate::models::api_tokens::{Row, record};
use crate::schema::{api_tokens, partners, portal_users};
use crate::{PgStore, db};

#[async_trait::async_trait]
impl TokenRepo for PgStore {
    async fn find_by_hash(&self, hash: &TokenHash) -> Result<Option<TokenRecord>, RepoError> {
        let mut conn = self.conn().await?;
        let row: Option<Row> = api_tokens::table
            .inner_join(portal_users::table.inner_join(partners::table))
            .filter(api_tokens::token_hash.eq(hash.as_bytes()))
            .select((
                api_tokens::id,
                api_tokens::token_hash,
                api_tokens::user_id,
                portal_users::deleted_at.is_not_null(),
                portal_users::partner_id,
                partners::active,
                partners::dna_access,
                portal_users::admin,
                api_tokens::expires_at,
                api_tokens::revoked_at,
                api_tokens::last_used_at,
            ))
            .first(&mut conn)
            .await
            .optional()
            .map_err(db)?;
        row.map(record).transpose()
    }

    async fn touch_last_used(
        &self,
        token_id: TokenId,
        now: OffsetDateTime,
    ) -> Result<(), RepoError> {
        let token_id = token_id.as_uuid();
        let mut conn = self.conn().await?;
        let stale = now - LAST_USED_RESOLUTION;
        diesel::update(api_tokens::table)
            .filter(api_tokens::id.eq(token_id))
            .filter(
                api_tokens::last_used_at
                    .is_null()
                    .or(api_tokens::last_used_at.le(stale)),
            )
            .set(api_tokens::last_used_at.eq(now))
            .execute(&mut conn)
            .await
            .map_err(db)?;
        Ok(())
    }
}
