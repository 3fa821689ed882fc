//! Token lookups on the request path.

use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use partner_domain::RepoError;
use partner_domain::account::auth::{LAST_USED_RESOLUTION, TokenKey};
use partner_domain::account::ports::{TokenRecord, TokenRepo};
use partner_domain::account::token::TokenHash;
use partner_domain::kernel::ids::TokenId;
use partner_domain::kernel::values::PartnerId;
use time::OffsetDateTime;

use crate::models::api_tokens::{Row, record};
use crate::schema::{api_tokens, partners, portal_users};
use crate::{PgStore, db};

#[async_trait::async_trait]
impl TokenRepo for PgStore {
    async fn find_by_hash(&self, hash: &TokenHash) -> Result<Option<TokenRecord>, RepoError> {
        let conn = self.conn().await?;
        lookup(&conn, hash).await
    }

    async fn touch_last_used(
        &self,
        token_id: TokenId,
        now: OffsetDateTime,
    ) -> Result<(), RepoError> {
        let token_id = token_id.as_uuid();
        let mut conn = self.conn().await?;
        let stale = now - LAST_USED_RESOLUTION;
        // SKIP LOCKED: a touch whose row another instance is writing (and whose commit may be
        // waiting on the WAL) leaves it to that one instead of queueing behind it with a pooled
        // connection held; both record the same use to within the resolution.
        diesel::sql_query(
            "UPDATE api_tokens SET last_used_at = $2 WHERE id = (SELECT id FROM api_tokens \
             WHERE id = $1 AND (last_used_at IS NULL OR last_used_at <= $3) \
             FOR UPDATE SKIP LOCKED)",
        )
        .bind::<diesel::sql_types::Uuid, _>(token_id)
        .bind::<diesel::sql_types::Timestamptz, _>(now)
        .bind::<diesel::sql_types::Timestamptz, _>(stale)
        .execute(&mut conn)
        .await
        .map_err(db)?;
        Ok(())
    }
}

/// The token lookup: the token with this hash, with its user and partner. On a shared reference
/// to the connection, so it can be pipelined with a read for the same token (futures polled
/// together on one connection are sent before the first answer arrives: one round trip).
pub(crate) async fn lookup(
    mut conn: &AsyncPgConnection,
    hash: &TokenHash,
) -> Result<Option<TokenRecord>, RepoError> {
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
            api_tokens::portal_of.is_not_null(),
        ))
        .first(&mut conn)
        .await
        .optional()
        .map_err(db)?;
    row.map(record).transpose()
}

/// The partner of the token with this hash when that token is live at `now` (not revoked or
/// expired, user not deleted, partner active), else NULL: a sub-select standing where a read
/// filters by partner, so a read sent in the same round trip as the token lookup takes its
/// partner from the token and never from a guess, and reads nothing for a token that will not
/// authenticate. The liveness conditions are those of `LeadsForToken`; whether the request is
/// authenticated is still decided by the domain from the record the lookup read.
///
/// Usable in the DSL (`partner_id.eq(TokenPartner::of(key))`, prepared and cached like any DSL
/// statement: its text is fixed) and, through [`TokenPartner::sql`], in raw statements.
#[derive(Debug, Clone)]
pub(crate) struct TokenPartner {
    hash: Vec<u8>,
    now: OffsetDateTime,
}

impl TokenPartner {
    pub(crate) fn of(key: TokenKey) -> Self {
        Self {
            hash: key.hash.as_bytes().to_vec(),
            now: key.now,
        }
    }

    /// The hash and the instant, to bind (as `bytea` and `timestamptz`) at the parameter
    /// numbers given to [`Self::sql`].
    pub(crate) fn binds(&self) -> (&[u8], OffsetDateTime) {
        (&self.hash, self.now)
    }

    /// The sub-select as SQL text, with the hash at parameter `$hash` and the instant at `$now`.
    pub(crate) fn sql(hash: u8, now: u8) -> String {
        format!("(SELECT u.partner_id {FROM_TOKEN}${hash}{LIVE_AT}${now}))")
    }
}

/// A listing's scope, decided in SQL from the token: the live token's partner when no partner is
/// requested; the requested partner when the token is an admin's or that is its own partner;
/// else NULL (the rule of `partner_domain::coupon::listing_scope`, which still decides the
/// answer). Usable in the DSL like [`TokenPartner`].
#[derive(Debug, Clone)]
pub(crate) struct TokenScope {
    partner: TokenPartner,
    requested: Option<String>,
}

impl TokenScope {
    pub(crate) fn of(key: TokenKey, requested: Option<&PartnerId>) -> Self {
        Self {
            partner: TokenPartner::of(key),
            requested: requested.map(|p| p.as_str().to_owned()),
        }
    }

    /// The instant the token must be live at.
    pub(crate) fn now(&self) -> OffsetDateTime {
        self.partner.now
    }
}

impl diesel::expression::Expression for TokenScope {
    type SqlType = diesel::sql_types::Text;
}

impl diesel::expression::ValidGrouping<()> for TokenScope {
    type IsAggregate = diesel::expression::is_aggregate::Never;
}

impl<QS> diesel::expression::AppearsOnTable<QS> for TokenScope {}
impl<QS> diesel::expression::SelectableExpression<QS> for TokenScope {}

impl diesel::query_builder::QueryId for TokenScope {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl diesel::query_builder::QueryFragment<diesel::pg::Pg> for TokenScope {
    fn walk_ast<'b>(
        &'b self,
        mut out: diesel::query_builder::AstPass<'_, 'b, diesel::pg::Pg>,
    ) -> QueryResult<()> {
        type Requested = diesel::sql_types::Nullable<diesel::sql_types::Text>;
        out.push_sql("(SELECT CASE WHEN ");
        out.push_bind_param::<Requested, _>(&self.requested)?;
        out.push_sql("::text IS NULL THEN u.partner_id WHEN u.admin OR u.partner_id = ");
        out.push_bind_param::<Requested, _>(&self.requested)?;
        out.push_sql(" THEN ");
        out.push_bind_param::<Requested, _>(&self.requested)?;
        out.push_sql(" END ");
        out.push_sql(FROM_TOKEN);
        out.push_bind_param::<diesel::sql_types::Bytea, _>(&self.partner.hash)?;
        out.push_sql(LIVE_AT);
        out.push_bind_param::<diesel::sql_types::Timestamptz, _>(&self.partner.now)?;
        out.push_sql("))");
        Ok(())
    }
}

const FROM_TOKEN: &str = "FROM api_tokens t \
       JOIN portal_users u ON u.id = t.user_id JOIN partners p ON p.partner_id = u.partner_id \
     WHERE t.token_hash = ";
const LIVE_AT: &str = " AND t.revoked_at IS NULL AND u.deleted_at IS NULL AND p.active \
       AND (t.expires_at IS NULL OR t.expires_at > ";

impl diesel::expression::Expression for TokenPartner {
    // NULL when no live token has the hash; `partner_id = NULL` then matches no row.
    type SqlType = diesel::sql_types::Text;
}

impl diesel::expression::ValidGrouping<()> for TokenPartner {
    type IsAggregate = diesel::expression::is_aggregate::Never;
}

impl<QS> diesel::expression::AppearsOnTable<QS> for TokenPartner {}
impl<QS> diesel::expression::SelectableExpression<QS> for TokenPartner {}

impl diesel::query_builder::QueryId for TokenPartner {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl diesel::query_builder::QueryFragment<diesel::pg::Pg> for TokenPartner {
    fn walk_ast<'b>(
        &'b self,
        mut out: diesel::query_builder::AstPass<'_, 'b, diesel::pg::Pg>,
    ) -> QueryResult<()> {
        out.push_sql("(SELECT u.partner_id ");
        out.push_sql(FROM_TOKEN);
        out.push_bind_param::<diesel::sql_types::Bytea, _>(&self.hash)?;
        out.push_sql(LIVE_AT);
        out.push_bind_param::<diesel::sql_types::Timestamptz, _>(&self.now)?;
        out.push_sql("))");
        Ok(())
    }
}
