//! Coupons: atomic bulk insert, conditional-update transitions, the listing for a token.

use diesel::pg::Pg;
use diesel::prelude::*;
use diesel::result::DatabaseErrorKind;
use diesel::sql_types::{Array, BigInt, Bool, Int2, Nullable, Text, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use partner_domain::RepoError;
use partner_domain::account::auth::{Sealed, TokenKey};
use partner_domain::coupon::ports::{CouponRepo, CouponWrite};
use partner_domain::coupon::{
    Coupon, CouponCode, CouponFilter, CouponStatus, ProductSlug, Redemption,
};
use partner_domain::kernel::ids::CouponId;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::models::coupons::Row;
use crate::schema::{coupon_blocks, coupons};
use crate::tokens::{self, TokenPartner, TokenScope};
use crate::{PgStore, db, is_violation};

/// A bulk order's coupons in one statement, so it inserts every row or none and a duplicate
/// code fails it whole. Raw: `INSERT … SELECT … FROM unnest($1, $2)`, which the DSL cannot
/// write; the multi-row `VALUES` it can write would be a different statement for every number
/// of codes, and at 14 parameters a row exceed PostgreSQL's 65,535 for a 10,000-code order.
const INSERT_BULK_SQL: &str = "\
INSERT INTO coupons (id, code, partner_id, sub_id, product_slug, months, status, expires_at, \
  bulk_order_id, purchaser_email, purchaser_source, unit_price_cents, notes, created_at) \
SELECT u.id, u.code, $3, $4, $5, $6, 'active', $7, $8, $9, $10, $11, $12, $13 \
FROM unnest($1::uuid[], $2::text[]) AS u (id, code)";

type Condition = Box<dyn BoxableExpression<coupons::table, Pg, SqlType = Nullable<Bool>>>;

/// Still active at `now`: not redeemed or voided, and not expired.
fn active_at(now: OffsetDateTime) -> Condition {
    Box::new(
        coupons::status.eq("active").nullable().and(
            coupons::expires_at
                .is_null()
                .nullable()
                .or(coupons::expires_at.gt(now)),
        ),
    )
}

impl PgStore {
    /// The one coupon `found` selects (by its code or its id), as it is now.
    async fn coupon_where(
        &self,
        found: coupons::BoxedQuery<'_, Pg>,
    ) -> Result<Option<Coupon>, RepoError> {
        let mut conn = self.conn().await?;
        let row: Option<Row> = found
            .select(Row::as_select())
            .get_result(&mut conn)
            .await
            .optional()
            .map_err(db)?;
        row.map(Row::into_domain).transpose()
    }
}

#[async_trait::async_trait]
impl CouponRepo for PgStore {
    async fn insert_bulk(&self, coupons: &[Coupon]) -> Result<CouponWrite, RepoError> {
        let Some(first) = coupons.first() else {
            return Ok(CouponWrite::Done);
        };
        if coupons
            .iter()
            .any(|c| c.bulk_order_id() != first.bulk_order_id())
        {
            return Err(RepoError::new(
                "insert_bulk takes the coupons of one bulk order",
            ));
        }
        let ids: Vec<Uuid> = coupons.iter().map(|c| c.id().as_uuid()).collect();
        let codes: Vec<&str> = coupons.iter().map(|c| c.code().as_str()).collect();
        let mut conn = self.conn().await?;
        // A code collision is answered by drawing again: it must not end a held transaction.
        let guarded = crate::guard_statement(&mut conn).await?;
        let r = diesel::sql_query(INSERT_BULK_SQL)
            .bind::<Array<diesel::sql_types::Uuid>, _>(&ids)
            .bind::<Array<Text>, _>(&codes)
            .bind::<Text, _>(first.partner_id().as_str())
            .bind::<Nullable<Int2>, _>(first.sub_id().map(|s| i16::from(s.get())))
            .bind::<Text, _>(first.product_slug().as_str())
            .bind::<Int2, _>(i16::from(first.months()))
            .bind::<Nullable<Timestamptz>, _>(first.expires_at())
            .bind::<diesel::sql_types::Uuid, _>(first.bulk_order_id().as_uuid())
            .bind::<Text, _>(first.purchaser_email())
            .bind::<Text, _>(first.purchaser_source())
            .bind::<BigInt, _>(first.unit_price_cents())
            .bind::<Nullable<Text>, _>(first.notes())
            .bind::<Timestamptz, _>(first.created_at())
            .execute(&mut conn)
            .await;
        crate::end_guard(&mut conn, guarded, r.is_ok()).await?;
        match r {
            Ok(_) => Ok(CouponWrite::Done),
            Err(e) if is_violation(&e, |k| matches!(k, DatabaseErrorKind::UniqueViolation)) => {
                Ok(CouponWrite::CodeCollision)
            }
            Err(e) => Err(db(e)),
        }
    }

    async fn redeem(
        &self,
        code: &CouponCode,
        slug: ProductSlug,
        months: u8,
        who: &Redemption,
    ) -> Result<Result<Coupon, Option<Coupon>>, RepoError> {
        let updated: Option<Row> = {
            let mut conn = self.conn().await?;
            // The whole transition is this one conditional update: of concurrent attempts,
            // exactly one finds the row still active.
            diesel::update(coupons::table)
                .filter(coupons::code.eq(code.as_str()))
                .filter(active_at(who.at))
                .filter(coupons::product_slug.eq(slug.as_str()))
                .filter(coupons::months.eq(i16::from(months)))
                .set((
                    coupons::status.eq("redeemed"),
                    coupons::redeemed_at.eq(who.at),
                    coupons::redeemed_email.eq(&who.email),
                    coupons::redeemed_provider_primary_external_id
                        .eq(&who.provider_primary_external_id),
                ))
                .returning(Row::as_returning())
                .get_result(&mut conn)
                .await
                .optional()
                .map_err(db)?
        };
        match updated {
            Some(r) => Ok(Ok(r.into_domain()?)),
            None => Ok(Err(self
                .coupon_where(
                    coupons::table
                        .filter(coupons::code.eq(code.as_str()))
                        .into_boxed(),
                )
                .await?)),
        }
    }

    async fn void(
        &self,
        id: CouponId,
        now: OffsetDateTime,
    ) -> Result<Result<Coupon, Option<Coupon>>, RepoError> {
        let id = id.as_uuid();
        let updated: Option<Row> = {
            let mut conn = self.conn().await?;
            diesel::update(coupons::table.find(id))
                .filter(active_at(now))
                .set((coupons::status.eq("void"), coupons::voided_at.eq(now)))
                .returning(Row::as_returning())
                .get_result(&mut conn)
                .await
                .optional()
                .map_err(db)?
        };
        match updated {
            Some(r) => Ok(Ok(r.into_domain()?)),
            None => Ok(Err(self
                .coupon_where(coupons::table.find(id).into_boxed())
                .await?)),
        }
    }

    async fn list_for_token(
        &self,
        key: TokenKey,
        filter: &CouponFilter,
    ) -> Result<Sealed<(Vec<Coupon>, u64)>, RepoError> {
        let conn = self.conn().await?;
        let (token, page) = futures_util::future::try_join(
            tokens::lookup(&conn, &key.hash),
            list_for_token(&conn, key, filter),
        )
        .await?;
        Ok(Sealed::new(token, page))
    }

    async fn find_for_token(
        &self,
        key: TokenKey,
        code: &CouponCode,
    ) -> Result<Sealed<Option<Coupon>>, RepoError> {
        let conn = self.conn().await?;
        let (token, coupon) = futures_util::future::try_join(
            tokens::lookup(&conn, &key.hash),
            find_for_token(&conn, TokenPartner::of(key), code),
        )
        .await?;
        Ok(Sealed::new(token, coupon))
    }
}

/// The coupon with this code of the token's own partner (taken from the token in SQL), to be
/// pipelined with the token lookup.
async fn find_for_token(
    mut conn: &AsyncPgConnection,
    partner: TokenPartner,
    code: &CouponCode,
) -> Result<Option<Coupon>, RepoError> {
    let row: Option<Row> = coupons::table
        .filter(coupons::code.eq(code.as_str()))
        .filter(coupons::partner_id.eq(partner))
        .select(Row::as_select())
        .get_result(&mut conn)
        .await
        .optional()
        .map_err(db)?;
    row.map(Row::into_domain).transpose()
}

/// Whether `q` selects every coupon of its partner: no product, and no status or all four.
fn unfiltered(q: &CouponFilter) -> bool {
    q.product_slug.is_none()
        && (q.statuses.is_empty()
            || [
                CouponStatus::Active,
                CouponStatus::Expired,
                CouponStatus::Redeemed,
                CouponStatus::Void,
            ]
            .iter()
            .all(|s| q.statuses.contains(s)))
}

/// [`CouponRepo::list_for_token`]'s two statements (the total, the page) with the partner
/// derived from the token in SQL ([`TokenScope`]), pipelined with each other and the token
/// lookup. Every coupon of the partner (the export's case): the total and the page's start from
/// `coupon_blocks`, whatever the offset ([`BlockPage`]). Filtered: the total from
/// `coupon_totals` ([`FilteredTotal`]) and the page's start from `coupon_counts`
/// ([`FilteredPage`]), whatever the offset and however the clock moved.
async fn list_for_token(
    mut conn: &AsyncPgConnection,
    key: TokenKey,
    q: &CouponFilter,
) -> Result<(Vec<Coupon>, u64), RepoError> {
    let scope = TokenScope::of(key, q.requested.as_ref());
    let limit = i64::from(q.limit);
    let offset = i64::try_from(q.offset).unwrap_or(i64::MAX);
    let (total, rows) = if unfiltered(q) {
        let total = coupon_blocks::table
            .filter(coupon_blocks::partner_id.eq(scope.clone()))
            .order(coupon_blocks::created_at.desc())
            .select(coupon_blocks::older + coupon_blocks::n)
            .first::<i64>(&mut conn);
        let rows = BlockPage {
            scope,
            columns: <Row as Selectable<Pg>>::construct_selection(),
            offset,
            limit,
        }
        .load::<Row>(&mut conn);
        let (total, rows) = futures_util::future::try_join(async { total.await.optional() }, rows)
            .await
            .map_err(db)?;
        (total.unwrap_or(0), rows)
    } else {
        let narrowing = Narrowing::of(q, scope.now());
        let total = FilteredTotal {
            scope: scope.clone(),
            narrowing: &narrowing,
        }
        .get_result::<i64>(&mut conn);
        let rows = FilteredPage {
            scope,
            narrowing: &narrowing,
            columns: <Row as Selectable<Pg>>::construct_selection(),
            offset,
            limit,
        }
        .load::<Row>(&mut conn);
        futures_util::future::try_join(total, rows)
            .await
            .map_err(db)?
    };
    let items = rows
        .into_iter()
        .map(Row::into_domain)
        .collect::<Result<_, _>>()?;
    Ok((items, u64::try_from(total).unwrap_or(0)))
}

/// The page of an unfiltered listing at any offset, in one probe of `coupon_blocks` (migration
/// 000019): with T the partner's coupons (the newest block's `older + n`), the row at offset N
/// is in the block with the largest `older <= T - 1 - N`, `older + n - T + N` rows into it; the
/// page starts there in `coupons_page_idx` and skips only within that one bulk order. Raw
/// because the DSL cannot write `CROSS JOIN LATERAL` with an `OFFSET` taken from the row it
/// joins. An offset at or past the end finds no block: an empty page.
struct BlockPage {
    scope: TokenScope,
    /// The columns of [`Row`], as its `SELECT` renders them.
    columns: <Row as Selectable<Pg>>::SelectExpression,
    offset: i64,
    limit: i64,
}

impl diesel::query_builder::QueryId for BlockPage {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl diesel::query_builder::Query for BlockPage {
    type SqlType = <diesel::dsl::AsSelect<Row, Pg> as Expression>::SqlType;
}

impl diesel::query_builder::QueryFragment<Pg> for BlockPage {
    fn walk_ast<'b>(
        &'b self,
        mut out: diesel::query_builder::AstPass<'_, 'b, Pg>,
    ) -> QueryResult<()> {
        out.push_sql("WITH p AS MATERIALIZED (SELECT ");
        self.scope.walk_ast(out.reborrow())?;
        out.push_sql(
            " AS id), \
             t AS (SELECT b.older + b.n AS total FROM coupon_blocks b \
               WHERE b.partner_id = (SELECT id FROM p) ORDER BY b.created_at DESC LIMIT 1) \
             SELECT ",
        );
        self.columns.walk_ast(out.reborrow())?;
        out.push_sql(" FROM t CROSS JOIN LATERAL (SELECT b.created_at, b.older + b.n - t.total + ");
        out.push_bind_param::<BigInt, _>(&self.offset)?;
        out.push_sql(
            " AS skip FROM coupon_blocks b WHERE b.partner_id = (SELECT id FROM p) \
               AND b.older <= t.total - 1 - ",
        );
        out.push_bind_param::<BigInt, _>(&self.offset)?;
        out.push_sql(
            " ORDER BY b.older DESC LIMIT 1) s \
             CROSS JOIN LATERAL (SELECT * FROM coupons \
               WHERE coupons.partner_id = (SELECT id FROM p) AND coupons.created_at <= s.created_at \
               ORDER BY coupons.created_at DESC, coupons.code OFFSET s.skip LIMIT ",
        );
        out.push_bind_param::<BigInt, _>(&self.limit)?;
        out.push_sql(") coupons ORDER BY coupons.created_at DESC, coupons.code");
        Ok(())
    }
}

/// A filtered listing's `status` and `product_slug`, rendered as a condition on `coupons` or on
/// the counts of migration 000021 (`coupon_counts`, `coupon_totals`), which key an active
/// coupon by its exact expiry (`infinity` for none) and every other by `infinity`: the same
/// coupons match both at `now`, so a count of the one is a plain `COUNT(*)` of the other.
struct Narrowing {
    slug: Option<&'static str>,
    /// Distinct; empty when every status is wanted.
    statuses: Vec<CouponStatus>,
    now: OffsetDateTime,
}

impl Narrowing {
    fn of(q: &CouponFilter, now: OffsetDateTime) -> Self {
        let mut statuses: Vec<CouponStatus> = Vec::new();
        for s in &q.statuses {
            if !statuses.contains(s) {
                statuses.push(*s);
            }
        }
        if statuses.len() == 4 {
            statuses.clear();
        }
        Self {
            slug: q.product_slug.map(ProductSlug::as_str),
            statuses,
            now,
        }
    }

    /// ` AND …` on the columns of `alias`; `counted`: a counts table (its `expires_at` is never
    /// NULL). The statuses are the domain's constants, written as literals.
    fn walk_ast<'b>(
        &'b self,
        alias: &str,
        counted: bool,
        mut out: diesel::query_builder::AstPass<'_, 'b, Pg>,
    ) -> QueryResult<()> {
        if let Some(slug) = self.slug {
            out.push_sql(&format!(" AND {alias}.product_slug = "));
            out.push_bind_param::<Text, str>(slug)?;
        }
        for (i, s) in self.statuses.iter().enumerate() {
            out.push_sql(if i == 0 { " AND (" } else { " OR " });
            match s {
                CouponStatus::Redeemed | CouponStatus::Void => {
                    out.push_sql(&format!("{alias}.status = '{}'", s.as_str()));
                }
                CouponStatus::Active => {
                    out.push_sql(&format!("({alias}.status = 'active' AND ("));
                    if !counted {
                        out.push_sql(&format!("{alias}.expires_at IS NULL OR "));
                    }
                    out.push_sql(&format!("{alias}.expires_at > "));
                    out.push_bind_param::<Timestamptz, _>(&self.now)?;
                    out.push_sql("))");
                }
                CouponStatus::Expired => {
                    out.push_sql(&format!(
                        "({alias}.status = 'active' AND {alias}.expires_at <= "
                    ));
                    out.push_bind_param::<Timestamptz, _>(&self.now)?;
                    out.push_sql(")");
                }
            }
        }
        if !self.statuses.is_empty() {
            out.push_sql(")");
        }
        Ok(())
    }
}

/// A filtered listing's `total`: the sum of the partner's matching counts in `coupon_totals`
/// (migration 000021): a row per product for `redeemed` and `void`, a row per product and expiry
/// instant for `active` and `expired`, instead of the partner's matching coupons.
struct FilteredTotal<'a> {
    scope: TokenScope,
    narrowing: &'a Narrowing,
}

impl diesel::query_builder::QueryId for FilteredTotal<'_> {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl diesel::query_builder::Query for FilteredTotal<'_> {
    type SqlType = BigInt;
}

impl diesel::query_builder::QueryFragment<Pg> for FilteredTotal<'_> {
    fn walk_ast<'b>(
        &'b self,
        mut out: diesel::query_builder::AstPass<'_, 'b, Pg>,
    ) -> QueryResult<()> {
        out.push_sql(
            "SELECT coalesce(sum(c.n), 0)::bigint FROM coupon_totals c WHERE c.partner_id = ",
        );
        self.scope.walk_ast(out.reborrow())?;
        self.narrowing.walk_ast("c", true, out.reborrow())
    }
}

/// A filtered page at any offset (migration 000021): the partner's listing groups (a
/// `created_at`, shared by a bulk order's codes) with matching coupons, newest first, each with
/// its matching count `m` from `coupon_counts` and the matching coupons of the newer groups
/// `before`; a group shows its rows `[before, before + m)` of the listing, so the page
/// `[offset, offset + limit)` takes from each group it meets `take` rows after skipping `skip`.
/// The walk stops `limit` groups after the first the page meets (no more can meet it; the
/// groups past the page take 0 rows and read nothing), so a page reads a count row per group
/// before its offset and the index entries of the groups it shows: never the partner's other
/// coupons. Each group's rows come from `coupons_page_idx` (its columns carry the filters:
/// index-only once vacuum has marked the pages all-visible); then the page's rows by code. (A
/// `LIMIT` over the groups' rows sorted by group and code instead let the planner sort every
/// group's rows past the offset: 380 ms for a page of 1,000,000 coupons.)
struct FilteredPage<'a> {
    scope: TokenScope,
    narrowing: &'a Narrowing,
    /// The columns of [`Row`], as its `SELECT` renders them.
    columns: <Row as Selectable<Pg>>::SelectExpression,
    offset: i64,
    limit: i64,
}

impl diesel::query_builder::QueryId for FilteredPage<'_> {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl diesel::query_builder::Query for FilteredPage<'_> {
    type SqlType = <diesel::dsl::AsSelect<Row, Pg> as Expression>::SqlType;
}

impl diesel::query_builder::QueryFragment<Pg> for FilteredPage<'_> {
    fn walk_ast<'b>(
        &'b self,
        mut out: diesel::query_builder::AstPass<'_, 'b, Pg>,
    ) -> QueryResult<()> {
        out.push_sql("WITH p AS MATERIALIZED (SELECT ");
        self.scope.walk_ast(out.reborrow())?;
        out.push_sql(
            " AS id), \
             g AS (SELECT c.created_at, sum(c.n)::bigint AS m FROM coupon_counts c \
               WHERE c.partner_id = (SELECT id FROM p)",
        );
        self.narrowing.walk_ast("c", true, out.reborrow())?;
        out.push_sql(
            " GROUP BY c.created_at ORDER BY c.created_at DESC), \
             w AS (SELECT g.created_at, g.m, (sum(g.m) OVER (ORDER BY g.created_at DESC \
               ROWS UNBOUNDED PRECEDING))::bigint - g.m AS before FROM g), \
             s AS (SELECT w.created_at, greatest(",
        );
        out.push_bind_param::<BigInt, _>(&self.offset)?;
        out.push_sql(" - w.before, 0) AS skip, least(w.before + w.m, ");
        out.push_bind_param::<BigInt, _>(&self.offset)?;
        out.push_sql(" + ");
        out.push_bind_param::<BigInt, _>(&self.limit)?;
        out.push_sql(") - greatest(w.before, ");
        out.push_bind_param::<BigInt, _>(&self.offset)?;
        out.push_sql(") AS take FROM w WHERE w.before + w.m > ");
        out.push_bind_param::<BigInt, _>(&self.offset)?;
        out.push_sql(" ORDER BY w.created_at DESC LIMIT ");
        out.push_bind_param::<BigInt, _>(&self.limit)?;
        out.push_sql(") SELECT ");
        self.columns.walk_ast(out.reborrow())?;
        out.push_sql(
            " FROM coupons WHERE coupons.code IN (SELECT k.code FROM s CROSS JOIN LATERAL \
               (SELECT i.code FROM coupons i WHERE i.partner_id = (SELECT id FROM p) \
                 AND i.created_at = s.created_at",
        );
        self.narrowing.walk_ast("i", false, out.reborrow())?;
        out.push_sql(
            " ORDER BY i.code OFFSET s.skip LIMIT greatest(s.take, 0)) k) \
             ORDER BY coupons.created_at DESC, coupons.code",
        );
        Ok(())
    }
}
