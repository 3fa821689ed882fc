//! Coupons: atomic bulk insert, conditional-update transitions, filtered listing.

use diesel::prelude::*;
use diesel::result::DatabaseErrorKind;
use diesel::sql_types::{Array, BigInt, Bytea, Int2, Nullable, Text, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use partner_domain::RepoError;
use partner_domain::auth::{Sealed, TokenKey};
use partner_domain::coupon::{
    Coupon, CouponCode, CouponFilter, CouponQuery, CouponStatus, ProductSlug, Redemption,
    StoredStatus,
};
use partner_domain::ids::CouponId;
use partner_domain::ports::{CouponRepo, CouponWrite};
use partner_domain::values::PartnerId;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::leads::sub_id;
use crate::tokens::{self, TokenPartner};
use crate::{PgStore, corrupt, db, is_violation};

const COLUMNS: &str = "id, code, partner_id, sub_id, product_slug, months, status, expires_at, redeemed_at, \
    redeemed_email, redeemed_provider_primary_external_id, bulk_order_id, purchaser_email, purchaser_source, \
    unit_price_cents, notes, created_at";

#[derive(QueryableByName)]
struct Row {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    id: Uuid,
    #[diesel(sql_type = Text)]
    code: String,
    #[diesel(sql_type = Text)]
    partner_id: String,
    #[diesel(sql_type = Nullable<Int2>)]
    sub_id: Option<i16>,
    #[diesel(sql_type = Text)]
    product_slug: String,
    #[diesel(sql_type = Int2)]
    months: i16,
    #[diesel(sql_type = Text)]
    status: String,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    expires_at: Option<OffsetDateTime>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    redeemed_at: Option<OffsetDateTime>,
    #[diesel(sql_type = Nullable<Text>)]
    redeemed_email: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    redeemed_provider_primary_external_id: Option<String>,
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    bulk_order_id: Uuid,
    #[diesel(sql_type = Text)]
    purchaser_email: String,
    #[diesel(sql_type = Text)]
    purchaser_source: String,
    #[diesel(sql_type = BigInt)]
    unit_price_cents: i64,
    #[diesel(sql_type = Nullable<Text>)]
    notes: Option<String>,
    #[diesel(sql_type = Timestamptz)]
    created_at: OffsetDateTime,
}

impl Row {
    fn into_domain(self) -> Result<Coupon, RepoError> {
        Ok(Coupon {
            id: CouponId::from_uuid(self.id),
            code: CouponCode::normalize(&self.code).ok_or_else(|| corrupt("coupon code"))?,
            partner_id: PartnerId::parse(&self.partner_id).map_err(|_| corrupt("partner id"))?,
            sub_id: sub_id(self.sub_id)?,
            product_slug: ProductSlug::parse(&self.product_slug)
                .ok_or_else(|| corrupt("product slug"))?,
            months: u8::try_from(self.months).map_err(|_| corrupt("months"))?,
            status: StoredStatus::parse(&self.status).ok_or_else(|| corrupt("coupon status"))?,
            expires_at: self.expires_at,
            redemption: match self.redeemed_at {
                Some(at) => Some(Redemption {
                    at,
                    email: self.redeemed_email.unwrap_or_default(),
                    provider_primary_external_id: self
                        .redeemed_provider_primary_external_id
                        .unwrap_or_default(),
                }),
                None => None,
            },
            bulk_order_id: self.bulk_order_id,
            purchaser_email: self.purchaser_email,
            purchaser_source: self.purchaser_source,
            unit_price_cents: self.unit_price_cents,
            notes: self.notes,
            created_at: self.created_at,
        })
    }
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

impl PgStore {
    async fn coupon_where(
        &self,
        clause: &str,
        bind: CouponKey<'_>,
    ) -> Result<Option<Coupon>, RepoError> {
        let mut conn = self.conn().await?;
        let q = diesel::sql_query(format!("SELECT {COLUMNS} FROM coupons WHERE {clause}"));
        let row: Option<Row> = match bind {
            CouponKey::Code(c) => q.bind::<Text, _>(c.as_str()).get_result(&mut conn).await,
            CouponKey::Id(id) => {
                q.bind::<diesel::sql_types::Uuid, _>(id)
                    .get_result(&mut conn)
                    .await
            }
        }
        .optional()
        .map_err(db)?;
        row.map(Row::into_domain).transpose()
    }
}

enum CouponKey<'a> {
    Code(&'a CouponCode),
    Id(Uuid),
}

/// The SQL condition for an effective status; `now` is always bind `$2`.
fn status_condition(s: CouponStatus) -> &'static str {
    match s {
        CouponStatus::Active => "(status = 'active' AND (expires_at IS NULL OR expires_at > $2))",
        CouponStatus::Expired => "(status = 'active' AND expires_at <= $2)",
        CouponStatus::Redeemed => "status = 'redeemed'",
        CouponStatus::Void => "status = 'void'",
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
            .any(|c| c.bulk_order_id != first.bulk_order_id)
        {
            return Err(RepoError::new(
                "insert_bulk takes the coupons of one bulk order",
            ));
        }
        let ids: Vec<Uuid> = coupons.iter().map(|c| c.id.as_uuid()).collect();
        let codes: Vec<&str> = coupons.iter().map(|c| c.code.as_str()).collect();
        let mut conn = self.conn().await?;
        // One statement: it inserts every row or none, and a duplicate code fails it whole.
        let r = diesel::sql_query(
            "INSERT INTO coupons (id, code, partner_id, sub_id, product_slug, months, status, expires_at, \
               bulk_order_id, purchaser_email, purchaser_source, unit_price_cents, notes, created_at) \
             SELECT u.id, u.code, $3, $4, $5, $6, 'active', $7, $8, $9, $10, $11, $12, $13 \
             FROM unnest($1::uuid[], $2::text[]) AS u (id, code)",
        )
        .bind::<Array<diesel::sql_types::Uuid>, _>(&ids)
        .bind::<Array<Text>, _>(&codes)
        .bind::<Text, _>(first.partner_id.as_str())
        .bind::<Nullable<Int2>, _>(first.sub_id.map(|s| i16::from(s.get())))
        .bind::<Text, _>(first.product_slug.as_str())
        .bind::<Int2, _>(i16::from(first.months))
        .bind::<Nullable<Timestamptz>, _>(first.expires_at)
        .bind::<diesel::sql_types::Uuid, _>(first.bulk_order_id)
        .bind::<Text, _>(&first.purchaser_email)
        .bind::<Text, _>(&first.purchaser_source)
        .bind::<BigInt, _>(first.unit_price_cents)
        .bind::<Nullable<Text>, _>(first.notes.as_deref())
        .bind::<Timestamptz, _>(first.created_at)
        .execute(&mut conn)
        .await;
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
            diesel::sql_query(format!(
                "UPDATE coupons SET status = 'redeemed', redeemed_at = $4, redeemed_email = $5, \
                   redeemed_provider_primary_external_id = $6 \
                 WHERE code = $1 AND status = 'active' AND (expires_at IS NULL OR expires_at > $4) \
                   AND product_slug = $2 AND months = $3 \
                 RETURNING {COLUMNS}"
            ))
            .bind::<Text, _>(code.as_str())
            .bind::<Text, _>(slug.as_str())
            .bind::<Int2, _>(i16::from(months))
            .bind::<Timestamptz, _>(who.at)
            .bind::<Text, _>(&who.email)
            .bind::<Text, _>(&who.provider_primary_external_id)
            .get_result(&mut conn)
            .await
            .optional()
            .map_err(db)?
        };
        match updated {
            Some(r) => Ok(Ok(r.into_domain()?)),
            None => Ok(Err(self
                .coupon_where("code = $1", CouponKey::Code(code))
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
            diesel::sql_query(format!(
                "UPDATE coupons SET status = 'void', voided_at = $2 \
                 WHERE id = $1 AND status = 'active' AND (expires_at IS NULL OR expires_at > $2) \
                 RETURNING {COLUMNS}"
            ))
            .bind::<diesel::sql_types::Uuid, _>(id)
            .bind::<Timestamptz, _>(now)
            .get_result(&mut conn)
            .await
            .optional()
            .map_err(db)?
        };
        match updated {
            Some(r) => Ok(Ok(r.into_domain()?)),
            None => Ok(Err(self.coupon_where("id = $1", CouponKey::Id(id)).await?)),
        }
    }

    async fn list(
        &self,
        q: &CouponQuery,
        now: OffsetDateTime,
    ) -> Result<(Vec<Coupon>, u64), RepoError> {
        // $1 partner, $2 now, $3 product slug (or NULL for any).
        let mut filter =
            String::from("partner_id = $1 AND ($3::text IS NULL OR product_slug = $3)");
        if !q.statuses.is_empty() {
            let any: Vec<&str> = q.statuses.iter().map(|s| status_condition(*s)).collect();
            filter.push_str(&format!(" AND ({})", any.join(" OR ")));
        } else {
            // Keeps `$2` referenced, so its type is known whatever the filter.
            filter.push_str(" AND $2::timestamptz IS NOT NULL");
        }
        let slug = q.product_slug.map(ProductSlug::as_str);
        let mut conn = self.conn().await?;
        let total: Count =
            diesel::sql_query(format!("SELECT count(*) AS n FROM coupons WHERE {filter}"))
                .bind::<Text, _>(q.partner.as_str())
                .bind::<Timestamptz, _>(now)
                .bind::<Nullable<Text>, _>(slug)
                .get_result(&mut conn)
                .await
                .map_err(db)?;
        let rows: Vec<Row> = diesel::sql_query(format!(
            "SELECT {COLUMNS} FROM coupons WHERE {filter} ORDER BY created_at DESC, code ASC LIMIT $4 OFFSET $5"
        ))
        .bind::<Text, _>(q.partner.as_str())
        .bind::<Timestamptz, _>(now)
        .bind::<Nullable<Text>, _>(slug)
        .bind::<BigInt, _>(i64::from(q.limit))
        .bind::<BigInt, _>(i64::try_from(q.offset).unwrap_or(i64::MAX))
        .load(&mut conn)
        .await
        .map_err(db)?;
        let items = rows
            .into_iter()
            .map(Row::into_domain)
            .collect::<Result<_, _>>()?;
        Ok((items, u64::try_from(total.n).unwrap_or(0)))
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
}

/// [`CouponRepo::list`]'s two statements with the partner derived from the token in SQL
/// ([`TokenPartner::scope_sql`]), pipelined with each other and the token lookup.
async fn list_for_token(
    mut conn: &AsyncPgConnection,
    key: TokenKey,
    q: &CouponFilter,
) -> Result<(Vec<Coupon>, u64), RepoError> {
    // $1 token hash, $2 now, $3 product slug (or NULL for any), $4 requested partner (or NULL).
    let mut filter = format!(
        "partner_id = {} AND ($3::text IS NULL OR product_slug = $3)",
        TokenPartner::scope_sql(1, 2, 4)
    );
    if !q.statuses.is_empty() {
        let any: Vec<&str> = q.statuses.iter().map(|s| status_condition(*s)).collect();
        filter.push_str(&format!(" AND ({})", any.join(" OR ")));
    }
    let slug = q.product_slug.map(ProductSlug::as_str);
    let requested = q.requested.as_ref().map(PartnerId::as_str);
    let hash = key.hash.as_bytes();
    let total = crate::Prepared(
        diesel::sql_query(format!("SELECT count(*) AS n FROM coupons WHERE {filter}"))
            .bind::<Bytea, _>(hash)
            .bind::<Timestamptz, _>(key.now)
            .bind::<Nullable<Text>, _>(slug)
            .bind::<Nullable<Text>, _>(requested),
    )
    .get_result::<Count>(&mut conn);
    let rows = crate::Prepared(
        diesel::sql_query(format!(
            "SELECT {COLUMNS} FROM coupons WHERE {filter} ORDER BY created_at DESC, code ASC LIMIT $5 OFFSET $6"
        ))
        .bind::<Bytea, _>(hash)
        .bind::<Timestamptz, _>(key.now)
        .bind::<Nullable<Text>, _>(slug)
        .bind::<Nullable<Text>, _>(requested)
        .bind::<BigInt, _>(i64::from(q.limit))
        .bind::<BigInt, _>(i64::try_from(q.offset).unwrap_or(i64::MAX)),
    )
    .load::<Row>(&mut conn);
    let (total, rows) = futures_util::future::try_join(total, rows)
        .await
        .map_err(db)?;
    let items = rows
        .into_iter()
        .map(Row::into_domain)
        .collect::<Result<_, _>>()?;
    Ok((items, u64::try_from(total.n).unwrap_or(0)))
}
