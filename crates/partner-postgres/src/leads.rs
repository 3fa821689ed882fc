//! Leads: keyset pages, and the statements of the lead writes a [`crate::uow`] transaction runs.

use crate::tokens::TokenPartner;
use diesel::prelude::*;
use diesel::sql_types::{Bool, Int2, Nullable, Text, Timestamptz};
use diesel_async::RunQueryDsl;
use partner_domain::RepoError;
use partner_domain::account::auth::{Sealed, TokenKey};
use partner_domain::account::token::TokenHash;
use partner_domain::kernel::cursor::Position;
use partner_domain::kernel::values::PartnerId;
use partner_domain::lead::ports::LeadRepo;
use partner_domain::lead::{Lead, LeadId, TestSource};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::models::api_tokens as tokens;
use crate::models::leads::{Changes, Row};
use crate::schema::leads;
use crate::{PgStore, corrupt, db};

#[async_trait::async_trait]
impl LeadRepo for PgStore {
    async fn page_leads(
        &self,
        partner: &PartnerId,
        after: Option<Position>,
        include_test: bool,
        limit: u16,
    ) -> Result<Vec<Lead>, RepoError> {
        use leads::dsl as l;
        let mut conn = self.conn().await?;
        // Built with the DSL (not `sql_query`) so the statement is prepared once per connection
        // and cached. `NOT is_test` is rendered literally so the plan can use the partial index.
        let mut q = l::leads
            .filter(l::partner_id.eq(partner.as_str()))
            .into_boxed();
        if !include_test {
            q = q.filter(diesel::dsl::not(l::is_test));
        }
        if let Some(p) = after {
            q = q.filter(RowBefore(p));
        }
        let rows: Vec<Row> = q
            .order((l::created_at.desc(), l::id.desc()))
            .limit(i64::from(limit))
            .select((
                l::id,
                l::partner_id,
                l::sub_id,
                l::first_name,
                l::last_name,
                l::email,
                l::email_consent,
                l::phone,
                l::sms_consent,
                l::origin,
                l::location,
                l::question_id,
                l::test_source,
                l::created_at,
                l::updated_at,
            ))
            .load(&mut conn)
            .await
            .map_err(db)?;
        rows.into_iter().map(Row::into_domain).collect()
    }

    async fn page_leads_for_token(
        &self,
        hash: &TokenHash,
        now: OffsetDateTime,
        after: Option<Position>,
        include_test: bool,
        limit: u16,
    ) -> Result<Sealed<Vec<Lead>>, RepoError> {
        let mut conn = self.conn().await?;
        let rows: Vec<(Option<tokens::Row>, Option<Row>)> = LeadsForToken {
            hash: hash.as_bytes().to_vec(),
            now,
            after,
            include_test,
            rows: rows_to_read(limit),
        }
        .load(&mut conn)
        .await
        .map_err(db)?;
        let mut token = None;
        let mut leads = Vec::with_capacity(rows.len());
        for row in rows {
            match row {
                (Some(t), None) if token.is_none() => token = Some(tokens::record(t)?),
                (None, Some(l)) => leads.push(l.into_domain()?),
                _ => return Err(corrupt("token-and-page row")),
            }
        }
        // UNION ALL keeps each branch's order in practice, but SQL does not promise it: sort
        // (already sorted: one linear pass).
        leads.sort_by_key(|l: &Lead| std::cmp::Reverse((l.created_at(), l.id())));
        leads.truncate(usize::from(limit));
        Ok(Sealed::new(token, leads))
    }

    async fn lead_for_token(
        &self,
        key: TokenKey,
        id: LeadId,
    ) -> Result<Sealed<Option<Lead>>, RepoError> {
        let conn = self.conn().await?;
        let (token, lead) = futures_util::future::try_join(
            crate::tokens::lookup(&conn, &key.hash),
            lead_for_token(&conn, TokenPartner::of(key), id),
        )
        .await?;
        Ok(Sealed::new(token, lead))
    }
}

/// The lead with this id if the token's partner (taken from the token in SQL) owns it, test
/// leads included; to be pipelined with the token lookup.
async fn lead_for_token(
    mut conn: &diesel_async::AsyncPgConnection,
    partner: TokenPartner,
    id: LeadId,
) -> Result<Option<Lead>, RepoError> {
    let row: Option<Row> = leads::table
        .filter(leads::id.eq(id.as_uuid()))
        .filter(leads::partner_id.eq(partner))
        .select(Row::as_select())
        .get_result(&mut conn)
        .await
        .optional()
        .map_err(db)?;
    row.map(Row::into_domain).transpose()
}

/// The token lookup and the leads page in one statement: the CTE resolves the token (with its
/// user and partner); the first branch of the UNION ALL returns the token's columns once (lead
/// columns NULL), the second the page of that token's partner (token columns NULL), read only
/// when the token is live at `now`. No row at all: no token has that hash. Raw, because the DSL
/// cannot write a `UNION ALL` over a `CROSS JOIN LATERAL`. Rendered as SQL text with bind parameters but
/// without `sql_query`'s "do not cache" mark, so diesel-async prepares each of its four shapes
/// (with/without cursor, with/without test rows) once per connection, as pgbench `-M prepared`.
struct LeadsForToken {
    hash: Vec<u8>,
    now: OffsetDateTime,
    after: Option<Position>,
    include_test: bool,
    /// Rows to read: a literal of the statement, one of [`ROW_BUCKETS`].
    rows: u16,
}

/// The row counts the statement is written with. The count is a literal, not a parameter:
/// with `LIMIT $n` PostgreSQL's generic plan assumes a tenth of the partner's rows, so it keeps
/// choosing a custom plan and plans this statement (about 1.4 ms) on every execution. Literals
/// from a short list keep the shapes per connection few (6 × 4) and let the generic plan win;
/// a request reads at most twice the rows it needs, and the default page (50 + 1) exactly.
const ROW_BUCKETS: [u16; 6] = [0, 11, 26, 51, 101, 201];

/// The smallest bucket holding `limit` rows (the largest for anything beyond it).
fn rows_to_read(limit: u16) -> u16 {
    ROW_BUCKETS.into_iter().find(|b| *b >= limit).unwrap_or(201)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_limit_reads_enough_rows_and_at_most_twice_as_many() {
        assert_eq!(rows_to_read(0), 0);
        assert_eq!(rows_to_read(51), 51);
        for limit in 1..=201u16 {
            let rows = rows_to_read(limit);
            assert!(rows >= limit && rows <= 2 * limit + 9, "{limit} -> {rows}");
        }
    }
}

type TokenSqlType = (
    diesel::sql_types::Uuid,
    diesel::sql_types::Bytea,
    diesel::sql_types::Uuid,
    Bool,
    Text,
    Bool,
    Bool,
    Bool,
    Nullable<Timestamptz>,
    Nullable<Timestamptz>,
    Nullable<Timestamptz>,
    Bool,
);

type LeadSqlType = (
    diesel::sql_types::Uuid,
    Text,
    Nullable<Int2>,
    Text,
    Text,
    Text,
    Bool,
    Nullable<Text>,
    Bool,
    Text,
    Text,
    Nullable<Text>,
    Nullable<Text>,
    Timestamptz,
    Timestamptz,
);

impl diesel::query_builder::QueryId for LeadsForToken {
    type QueryId = ();
    // Not a static id: the cache is keyed by the rendered SQL, one entry per shape.
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl diesel::query_builder::Query for LeadsForToken {
    type SqlType = (Nullable<TokenSqlType>, Nullable<LeadSqlType>);
}

impl diesel::query_builder::QueryFragment<diesel::pg::Pg> for LeadsForToken {
    fn walk_ast<'b>(
        &'b self,
        mut out: diesel::query_builder::AstPass<'_, 'b, diesel::pg::Pg>,
    ) -> QueryResult<()> {
        out.push_sql(
            "WITH t AS (SELECT t.id, t.token_hash, t.user_id, u.deleted_at IS NOT NULL AS user_deleted, \
               u.partner_id, p.active, p.dna_access, u.admin, t.expires_at, t.revoked_at, t.last_used_at, \
               t.portal_of IS NOT NULL AS portal \
             FROM api_tokens t JOIN portal_users u ON u.id = t.user_id \
               JOIN partners p ON p.partner_id = u.partner_id \
             WHERE t.token_hash = ",
        );
        out.push_bind_param::<diesel::sql_types::Bytea, _>(&self.hash)?;
        out.push_sql(
            " LIMIT 1) \
             SELECT t.id, t.token_hash, t.user_id, t.user_deleted, t.partner_id, t.active, \
               t.dna_access, t.admin, t.expires_at, t.revoked_at, t.last_used_at, t.portal, \
               NULL::uuid, NULL::text, NULL::int2, NULL::text, NULL::text, NULL::text, NULL::bool, \
               NULL::text, NULL::bool, NULL::text, NULL::text, NULL::text, NULL::text, \
               NULL::timestamptz, NULL::timestamptz \
             FROM t \
             UNION ALL \
             SELECT NULL::uuid, NULL::bytea, NULL::uuid, NULL::bool, NULL::text, NULL::bool, \
               NULL::bool, NULL::bool, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz, \
               NULL::bool, l.id, l.partner_id, l.sub_id, l.first_name, l.last_name, l.email, l.email_consent, \
               l.phone, l.sms_consent, l.origin, l.location, l.question_id, l.test_source, \
               l.created_at, l.updated_at \
             FROM t CROSS JOIN LATERAL (SELECT leads.* FROM leads \
               WHERE leads.partner_id = t.partner_id \
                 AND t.revoked_at IS NULL AND NOT t.user_deleted AND t.active \
                 AND (t.expires_at IS NULL OR t.expires_at > ",
        );
        out.push_bind_param::<Timestamptz, _>(&self.now)?;
        out.push_sql(")");
        if !self.include_test {
            // Literal, so the plan can use the partial index of real leads.
            out.push_sql(" AND NOT leads.is_test");
        }
        if let Some(p) = &self.after {
            out.push_sql(" AND (leads.created_at, leads.id) < (");
            out.push_bind_param::<Timestamptz, _>(&p.created_at)?;
            out.push_sql(", ");
            out.push_bind_param::<diesel::sql_types::Uuid, _>(&p.id)?;
            out.push_sql(")");
        }
        out.push_sql(" ORDER BY leads.created_at DESC, leads.id DESC LIMIT ");
        out.push_sql(&self.rows.to_string());
        out.push_sql(") l");
        Ok(())
    }
}

/// `(leads.created_at, leads.id) < ($1, $2)`: the keyset condition as one row comparison, which
/// PostgreSQL matches to the index order. Unlike `dsl::sql`, it leaves the statement cacheable.
#[derive(Debug, Clone, Copy)]
struct RowBefore(Position);

impl diesel::expression::Expression for RowBefore {
    type SqlType = Bool;
}

impl diesel::expression::ValidGrouping<()> for RowBefore {
    type IsAggregate = diesel::expression::is_aggregate::Never;
}

impl<QS> diesel::expression::AppearsOnTable<QS> for RowBefore {}

impl diesel::query_builder::QueryId for RowBefore {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl diesel::query_builder::QueryFragment<diesel::pg::Pg> for RowBefore {
    fn walk_ast<'b>(
        &'b self,
        mut out: diesel::query_builder::AstPass<'_, 'b, diesel::pg::Pg>,
    ) -> QueryResult<()> {
        out.push_sql("(leads.created_at, leads.id) < (");
        out.push_bind_param::<Timestamptz, _>(&self.0.created_at)?;
        out.push_sql(", ");
        out.push_bind_param::<diesel::sql_types::Uuid, _>(&self.0.id)?;
        out.push_sql(")");
        Ok(())
    }
}

/// One lead by id (for webhook payloads built at send time).
pub(crate) async fn leads_by_ids(
    mut conn: &diesel_async::AsyncPgConnection,
    ids: &[Uuid],
) -> Result<(Vec<Lead>, Vec<Uuid>), RepoError> {
    let rows: Vec<Row> = leads::table
        .filter(leads::id.eq_any(ids))
        .select(Row::as_select())
        .load(&mut conn)
        .await
        .map_err(db)?;
    Ok(crate::readable(rows, Row::id, Row::into_domain))
}

/// Raw, and prepared once per connection through [`crate::Prepared`]: ingest's hot path
/// (`docs/performance.md`). An `INSERT … SELECT … WHERE EXISTS`, which the DSL cannot write: it
/// inserts nothing when the partner does not exist, where a foreign-key violation would leave
/// the transaction unusable.
const INSERT_SQL: &str = "\
INSERT INTO leads (id, partner_id, sub_id, first_name, last_name, email, email_consent, \
  phone, sms_consent, origin, location, question_id, is_test, test_source, created_at, updated_at) \
SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $15 \
WHERE EXISTS (SELECT 1 FROM partners WHERE partner_id = $2)";

/// Inserts a lead unless its partner does not exist (then 0 rows, and the transaction stays
/// usable, which a foreign-key violation would not leave it).
pub(crate) async fn insert(
    conn: &mut diesel_async::AsyncPgConnection,
    lead: &Lead,
) -> Result<bool, diesel::result::Error> {
    let n = crate::Prepared(
        diesel::sql_query(INSERT_SQL)
            .bind::<diesel::sql_types::Uuid, _>(lead.id().as_uuid())
            .bind::<Text, _>(lead.partner_id().as_str())
            .bind::<Nullable<Int2>, _>(lead.sub_id().map(|s| i16::from(s.get())))
            .bind::<Text, _>(lead.first_name())
            .bind::<Text, _>(lead.last_name())
            .bind::<Text, _>(lead.email())
            .bind::<Bool, _>(lead.email_consent())
            .bind::<Nullable<Text>, _>(lead.phone())
            .bind::<Bool, _>(lead.sms_consent())
            .bind::<Text, _>(lead.origin().as_str())
            .bind::<Text, _>(lead.location())
            .bind::<Nullable<Text>, _>(lead.question_id())
            .bind::<Bool, _>(lead.test().is_test())
            .bind::<Nullable<Text>, _>(lead.test().source().map(TestSource::as_str))
            .bind::<Timestamptz, _>(lead.created_at()),
    )
    .execute(conn)
    .await?;
    Ok(n == 1)
}

/// The lead, locked `FOR UPDATE` until the transaction ends.
pub(crate) async fn lock(
    conn: &mut diesel_async::AsyncPgConnection,
    id: LeadId,
) -> Result<Option<Lead>, RepoError> {
    let row: Option<Row> = leads::table
        .find(id.as_uuid())
        .select(Row::as_select())
        .for_update()
        .get_result(conn)
        .await
        .optional()
        .map_err(db)?;
    row.map(Row::into_domain).transpose()
}

/// Stores what a patch may change.
pub(crate) async fn update(
    conn: &mut diesel_async::AsyncPgConnection,
    lead: &Lead,
) -> Result<(), diesel::result::Error> {
    diesel::update(leads::table.find(lead.id().as_uuid()))
        .set(Changes::of(lead))
        .execute(conn)
        .await?;
    Ok(())
}
