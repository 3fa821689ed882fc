//! `api_tokens` rows (with the user and partner columns a token lookup reads with them).

use partner_domain::RepoError;
use partner_domain::account::ApiTokenInfo;
use partner_domain::account::ports::TokenRecord;
use partner_domain::account::token::TokenHash;
use partner_domain::kernel::ids::{TokenId, UserId};
use partner_domain::kernel::values::PartnerId;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::corrupt;

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
    bool,
);

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
        portal,
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
        portal,
    })
}

/// A token as operators list it.
pub(crate) type TokenRow = (
    Uuid,
    String,
    OffsetDateTime,
    Option<OffsetDateTime>,
    Option<OffsetDateTime>,
    Option<OffsetDateTime>,
);

pub(crate) fn token_info(
    (id, token_prefix, created_at, expires_at, revoked_at, last_used_at): TokenRow,
) -> ApiTokenInfo {
    ApiTokenInfo {
        id: TokenId::from_uuid(id),
        token_prefix,
        created_at,
        expires_at,
        revoked_at,
        last_used_at,
    }
}
