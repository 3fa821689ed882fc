//! Orders and analytics events. Simulated orders are never stored: they are built from
//! `order_completed` events by the domain at read time.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Int2, Nullable, Text, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use partner_domain::RepoError;
use partner_domain::auth::{Sealed, TokenKey};
use partner_domain::lead::TestSource;
use partner_domain::order::{AnalyticsEvent, Order, OrderKey, OrderListing, SIMULATED_PREFIX};
use partner_domain::ports::OrderRepo;
use partner_domain::values::{Money, PartnerId};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::leads::sub_id;
use crate::tokens::{self, TokenPartner};
use crate::{PgStore, Prepared, corrupt, db, outbox};

#[derive(QueryableByName)]
struct OrderRow {
    #[diesel(sql_type = Text)]
    order_id: String,
    #[diesel(sql_type = Text)]
    partner_id: String,
    #[diesel(sql_type = Nullable<Int2>)]
    sub_id: Option<i16>,
    #[diesel(sql_type = Timestamptz)]
    created_date: OffsetDateTime,
    #[diesel(sql_type = Text)]
    product: String,
    #[diesel(sql_type = BigInt)]
    amount_cents: i64,
    #[diesel(sql_type = BigInt)]
    commission_cents: i64,
    #[diesel(sql_type = Text)]
    status: String,
    #[diesel(sql_type = Bool)]
    is_test: bool,
    #[diesel(sql_type = Text)]
    source: String,
    #[diesel(sql_type = Nullable<Text>)]
    customer_name: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    customer_email: Option<String>,
    #[diesel(sql_type = Text)]
    sub_account: String,
}

impl OrderRow {
    fn into_domain(self) -> Result<OrderListing, RepoError> {
        Ok(OrderListing {
            order: Order {
                order_id: self.order_id,
                partner_id: PartnerId::parse(&self.partner_id)
                    .map_err(|_| corrupt("partner id"))?,
                sub_id: sub_id(self.sub_id)?,
                created_date: self.created_date,
                product: self.product,
                amount: Money::from_cents(self.amount_cents),
                commission: Money::from_cents(self.commission_cents),
                status: self.status,
                is_test: self.is_test,
                source: self.source,
                customer_name: self.customer_name,
                customer_email: self.customer_email,
            },
            sub_account: self.sub_account,
        })
    }
}

#[derive(QueryableByName)]
struct EventRow {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    id: Uuid,
    #[diesel(sql_type = Text)]
    run_id: String,
    #[diesel(sql_type = Text)]
    partner_id: String,
    #[diesel(sql_type = Nullable<Int2>)]
    sub_id: Option<i16>,
    #[diesel(sql_type = Text)]
    event: String,
    #[diesel(sql_type = Nullable<Text>)]
    product: Option<String>,
    #[diesel(sql_type = Nullable<BigInt>)]
    amount_cents: Option<i64>,
    #[diesel(sql_type = Timestamptz)]
    occurred_at: OffsetDateTime,
    #[diesel(sql_type = Text)]
    test_source: String,
    #[diesel(sql_type = Text)]
    sub_account: String,
}

impl EventRow {
    fn into_listing(self) -> Result<OrderListing, RepoError> {
        let ev = AnalyticsEvent {
            id: self.id,
            run_id: self.run_id,
            partner_id: PartnerId::parse(&self.partner_id).map_err(|_| corrupt("partner id"))?,
            sub_id: sub_id(self.sub_id)?,
            event: self.event,
            product: self.product,
            amount: self.amount_cents.map(Money::from_cents),
            occurred_at: self.occurred_at,
            test_source: TestSource::parse(&self.test_source)
                .ok_or_else(|| corrupt("test source"))?,
        };
        Ok(OrderListing {
            order: Order::simulated(&ev),
            sub_account: self.sub_account,
        })
    }
}

const ORDER_SELECT: &str = "SELECT o.order_id, o.partner_id, o.sub_id, o.created_date, o.product, o.amount_cents, \
       o.commission_cents, o.status, o.is_test, o.source, o.customer_name, o.customer_email, \
       COALESCE(s.nickname, '') AS sub_account \
     FROM orders o LEFT JOIN sub_accounts s ON s.partner_id = o.partner_id AND s.sub_id = o.sub_id";

const EVENT_SELECT: &str = "SELECT e.id, e.run_id, e.partner_id, e.sub_id, e.event, e.product, e.amount_cents, \
       e.occurred_at, e.test_source, COALESCE(s.nickname, '') AS sub_account \
     FROM analytics_events e LEFT JOIN sub_accounts s ON s.partner_id = e.partner_id AND s.sub_id = e.sub_id";

async fn listing(
    conn: &mut AsyncPgConnection,
    order_id: &str,
) -> Result<Option<OrderRow>, diesel::result::Error> {
    diesel::sql_query(format!("{ORDER_SELECT} WHERE o.order_id = $1"))
        .bind::<Text, _>(order_id)
        .get_result(conn)
        .await
        .optional()
}

/// One keyset chunk of the listing: at most `limit` stored and `limit` simulated orders after
/// `after`, each read in listing order (order ids compared byte-wise, `COLLATE "C"`, as the
/// listing sorts them whatever the database's collation), merged, and cut to `limit`.
async fn page(
    conn: &mut AsyncPgConnection,
    partner: &PartnerId,
    after: Option<OrderKey>,
    limit: u16,
) -> Result<Vec<OrderListing>, RepoError> {
    let limit_sql = i64::from(limit);
    // The first chunk starts at the last instant PostgreSQL can compare. Both statements take
    // the same parameters either way (`$3 = $3`), so each is prepared once per connection.
    let first = after.is_none();
    let key = after.unwrap_or(OrderKey {
        created_date: time::macros::datetime!(9999-12-31 23:59:59.999999 UTC),
        order_id: String::new(),
    });
    let stored_after = if first {
        "o.created_date <= $2 AND $3 = $3"
    } else {
        "o.created_date <= $2 AND (o.created_date, o.order_id COLLATE \"C\") < ($2, $3 COLLATE \"C\")"
    };
    let stored: Vec<OrderRow> = Prepared(
        diesel::sql_query(format!(
            "{ORDER_SELECT} WHERE o.partner_id = $1 AND {stored_after} \
             ORDER BY o.created_date DESC, o.order_id COLLATE \"C\" DESC LIMIT $4"
        ))
        .bind::<Text, _>(partner.as_str())
        .bind::<Timestamptz, _>(key.created_date)
        .bind::<Text, _>(&key.order_id)
        .bind::<BigInt, _>(limit_sql),
    )
    .load(conn)
    .await
    .map_err(db)?;
    let simulated_after = if first {
        "e.occurred_at <= $2 AND $3 = $3 AND $5 = $5"
    } else {
        "e.occurred_at <= $2 AND (e.occurred_at, ($5 || e.run_id) COLLATE \"C\") < ($2, $3 COLLATE \"C\")"
    };
    let simulated: Vec<EventRow> = Prepared(
        diesel::sql_query(format!(
            "{EVENT_SELECT} WHERE e.partner_id = $1 AND e.event = 'order_completed' AND {simulated_after} \
             ORDER BY e.occurred_at DESC, ($5 || e.run_id) COLLATE \"C\" DESC LIMIT $4"
        ))
        .bind::<Text, _>(partner.as_str())
        .bind::<Timestamptz, _>(key.created_date)
        .bind::<Text, _>(&key.order_id)
        .bind::<BigInt, _>(limit_sql)
        .bind::<Text, _>(SIMULATED_PREFIX),
    )
    .load(conn)
    .await
    .map_err(db)?;
    let mut all = merged(stored, simulated)?;
    all.truncate(usize::from(limit));
    Ok(all)
}

/// The first chunk of [`page`] with the partner taken from the token in SQL: both statements are
/// pipelined with the token lookup (one round trip for the three).
async fn first_page_for_token(
    mut conn: &AsyncPgConnection,
    partner: &TokenPartner,
    limit: u16,
) -> Result<Vec<OrderListing>, RepoError> {
    let (hash, now) = partner.binds();
    let limit_sql = i64::from(limit);
    let stored = Prepared(
        diesel::sql_query(format!(
            "{ORDER_SELECT} WHERE o.partner_id = {} \
             ORDER BY o.created_date DESC, o.order_id COLLATE \"C\" DESC LIMIT $3",
            TokenPartner::sql(1, 2)
        ))
        .bind::<diesel::sql_types::Bytea, _>(hash)
        .bind::<Timestamptz, _>(now)
        .bind::<BigInt, _>(limit_sql),
    )
    .load::<OrderRow>(&mut conn);
    let simulated = Prepared(
        diesel::sql_query(format!(
            "{EVENT_SELECT} WHERE e.partner_id = {} AND e.event = 'order_completed' \
             ORDER BY e.occurred_at DESC, ($4 || e.run_id) COLLATE \"C\" DESC LIMIT $3",
            TokenPartner::sql(1, 2)
        ))
        .bind::<diesel::sql_types::Bytea, _>(hash)
        .bind::<Timestamptz, _>(now)
        .bind::<BigInt, _>(limit_sql)
        .bind::<Text, _>(SIMULATED_PREFIX),
    )
    .load::<EventRow>(&mut conn);
    let (stored, simulated) = futures_util::future::try_join(stored, simulated)
        .await
        .map_err(db)?;
    let mut all = merged(stored, simulated)?;
    all.truncate(usize::from(limit));
    Ok(all)
}

/// The rows as domain listings, merged in the listing's order by the domain's rule.
fn merged(stored: Vec<OrderRow>, simulated: Vec<EventRow>) -> Result<Vec<OrderListing>, RepoError> {
    let stored = stored
        .into_iter()
        .map(OrderRow::into_domain)
        .collect::<Result<Vec<_>, _>>()?;
    let simulated = simulated
        .into_iter()
        .map(EventRow::into_listing)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(OrderListing::merge(stored, simulated))
}

/// Stored and simulated orders of `partner` with `from <= createdDate < to`, newest first.
async fn load(
    conn: &mut AsyncPgConnection,
    partner: &PartnerId,
    (from, to): (OffsetDateTime, OffsetDateTime),
) -> Result<Vec<OrderListing>, RepoError> {
    let stored: Vec<OrderRow> = diesel::sql_query(format!(
        "{ORDER_SELECT} WHERE o.partner_id = $1 AND o.created_date >= $2 AND o.created_date < $3"
    ))
    .bind::<Text, _>(partner.as_str())
    .bind::<Timestamptz, _>(from)
    .bind::<Timestamptz, _>(to)
    .load(conn)
    .await
    .map_err(db)?;
    let simulated: Vec<EventRow> = diesel::sql_query(format!(
        "{EVENT_SELECT} WHERE e.partner_id = $1 AND e.event = 'order_completed' \
         AND e.occurred_at >= $2 AND e.occurred_at < $3"
    ))
    .bind::<Text, _>(partner.as_str())
    .bind::<Timestamptz, _>(from)
    .bind::<Timestamptz, _>(to)
    .load(conn)
    .await
    .map_err(db)?;
    merged(stored, simulated)
}

#[async_trait::async_trait]
impl OrderRepo for PgStore {
    async fn orders_page_for_token(
        &self,
        key: TokenKey,
        limit: u16,
    ) -> Result<Sealed<Vec<OrderListing>>, RepoError> {
        let conn = self.conn().await?;
        let (token, orders) = futures_util::future::try_join(
            tokens::lookup(&conn, &key.hash),
            first_page_for_token(&conn, &TokenPartner::of(key), limit),
        )
        .await?;
        Ok(Sealed::new(token, orders))
    }

    async fn insert_analytics_event(
        &self,
        ev: &AnalyticsEvent,
        now: OffsetDateTime,
    ) -> Result<bool, RepoError> {
        let mut conn = self.conn().await?;
        if !outbox::partner_exists(&mut conn, ev.partner_id.as_str())
            .await
            .map_err(db)?
        {
            return Ok(false);
        }
        diesel::sql_query(
            "INSERT INTO analytics_events (id, run_id, partner_id, sub_id, event, product, amount_cents, \
               occurred_at, test_source, recorded_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
             ON CONFLICT (run_id) WHERE event = 'order_completed' DO NOTHING",
        )
        .bind::<diesel::sql_types::Uuid, _>(ev.id)
        .bind::<Text, _>(&ev.run_id)
        .bind::<Text, _>(ev.partner_id.as_str())
        .bind::<Nullable<Int2>, _>(ev.sub_id.map(|s| i16::from(s.get())))
        .bind::<Text, _>(&ev.event)
        .bind::<Nullable<Text>, _>(ev.product.as_deref())
        .bind::<Nullable<BigInt>, _>(ev.amount.map(Money::cents))
        .bind::<Timestamptz, _>(ev.occurred_at)
        .bind::<Text, _>(ev.test_source.as_str())
        .bind::<Timestamptz, _>(now)
        .execute(&mut conn)
        .await
        .map_err(db)?;
        Ok(true)
    }

    async fn orders_page(
        &self,
        partner: &PartnerId,
        after: Option<OrderKey>,
        limit: u16,
    ) -> Result<Vec<OrderListing>, RepoError> {
        let mut conn = self.conn().await?;
        page(&mut conn, partner, after, limit).await
    }

    async fn orders_between(
        &self,
        partner: &PartnerId,
        from: OffsetDateTime,
        to: OffsetDateTime,
    ) -> Result<Vec<Order>, RepoError> {
        let mut conn = self.conn().await?;
        Ok(load(&mut conn, partner, (from, to))
            .await?
            .into_iter()
            .map(|l| l.order)
            .collect())
    }
}

/// Stored orders by id, with their sub-account nicknames (for webhook payloads).
pub(crate) async fn orders_by_ids(
    conn: &mut AsyncPgConnection,
    order_ids: &[&str],
) -> Result<Vec<OrderListing>, RepoError> {
    let rows: Vec<OrderRow> =
        diesel::sql_query(format!("{ORDER_SELECT} WHERE o.order_id = ANY($1)"))
            .bind::<diesel::sql_types::Array<Text>, _>(order_ids)
            .load(conn)
            .await
            .map_err(db)?;
    rows.into_iter().map(OrderRow::into_domain).collect()
}

/// Inserts the order unless one with its id exists; `true` when inserted.
pub(crate) async fn insert(
    conn: &mut AsyncPgConnection,
    o: &Order,
    now: OffsetDateTime,
) -> Result<bool, diesel::result::Error> {
    let n = diesel::sql_query(
        "INSERT INTO orders (order_id, partner_id, sub_id, created_date, product, amount_cents, \
           commission_cents, status, is_test, source, customer_name, customer_email, recorded_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) \
         ON CONFLICT (order_id) DO NOTHING",
    )
    .bind::<Text, _>(&o.order_id)
    .bind::<Text, _>(o.partner_id.as_str())
    .bind::<Nullable<Int2>, _>(o.sub_id.map(|s| i16::from(s.get())))
    .bind::<Timestamptz, _>(o.created_date)
    .bind::<Text, _>(&o.product)
    .bind::<BigInt, _>(o.amount.cents())
    .bind::<BigInt, _>(o.commission.cents())
    .bind::<Text, _>(&o.status)
    .bind::<Bool, _>(o.is_test)
    .bind::<Text, _>(&o.source)
    .bind::<Nullable<Text>, _>(o.customer_name.as_deref())
    .bind::<Nullable<Text>, _>(o.customer_email.as_deref())
    .bind::<Timestamptz, _>(now)
    .execute(conn)
    .await?;
    Ok(n == 1)
}

/// The stored order with this id, as listings show it.
pub(crate) async fn stored_listing(
    conn: &mut AsyncPgConnection,
    order_id: &str,
) -> Result<Option<OrderListing>, RepoError> {
    listing(conn, order_id)
        .await
        .map_err(db)?
        .map(OrderRow::into_domain)
        .transpose()
}
