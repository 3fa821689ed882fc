//! Token lookups on the request path.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use partner_domain::RepoError;
use partner_domain::auth::LAST_USED_RESOLUTION;
use partner_domain::ids::{TokenId, UserId};
use partner_domain::ports::{TokenRecord, TokenRepo};
use partner_domain::token::TokenHash;
use partner_domain::values::PartnerId;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::schema::{api_tokens, partners, portal_users};
use crate::{PgStore, corrupt, db};

/// The token record's columns, in the order of [`record`].
pub(crate) type Row = (
    Uuid,
    Vec<u8>,
    Uuid,
    bool,
    String,
    bool,
    bool,
    bool,
    Option<OffsetDateTime>,
    Option<OffsetDateTime>,
    Option<OffsetDateTime>,
);

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

/// The domain's record of a token row.
pub(crate) fn record(
    (
        token_id,
        h,
        user_id,
        user_deleted,
        partner,
        partner_active,
        partner_dna_access,
        admin,
        expires_at,
        revoked_at,
        last_used_at,
    ): Row,
) -> Result<TokenRecord, RepoError> {
    Ok(TokenRecord {
        token_id: TokenId::from_uuid(token_id),
        hash: TokenHash::from_bytes(&h).ok_or_else(|| corrupt("token hash"))?,
        user_id: UserId::from_uuid(user_id),
        user_deleted,
        partner_id: PartnerId::parse(&partner).map_err(|_| corrupt("partner id"))?,
        partner_active,
        partner_dna_access,
        admin,
        expires_at,
        revoked_at,
        last_used_at,
    })
}
