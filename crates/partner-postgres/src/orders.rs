//! Orders and analytics events. Simulated orders are never stored: they are built from
//! `order_completed` events by the domain at read time.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Text, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use partner_domain::RepoError;
use partner_domain::account::auth::{Sealed, TokenKey};
use partner_domain::kernel::values::PartnerId;
use partner_domain::order::ports::OrderRepo;
use partner_domain::order::{AnalyticsEvent, Order, OrderKey, OrderListing, SIMULATED_PREFIX};
use time::OffsetDateTime;

use crate::dsl::{coalesce, fixed};
use crate::models::analytics_events::{EventRow, NewEvent};
use crate::models::orders::{NewOrder, OrderRow};
use crate::schema::{analytics_events, orders, sub_accounts};
use crate::tokens::{self, TokenPartner};
use crate::{PgStore, Prepared, db, outbox};

/// `$t` left-joined to the sub-account its row names, if any (rows without a sub id, or naming
/// none the partner has, keep a NULL nickname).
macro_rules! with_nickname {
    ($t:ident) => {
        $t::table.left_join(
            sub_accounts::table.on(sub_accounts::partner_id
                .eq($t::partner_id)
                .and(sub_accounts::sub_id.nullable().eq($t::sub_id))),
        )
    };
}

/// Stored orders joined to their sub-account's nickname (`''` without one), selected as
/// [`OrderRow`] reads them. A macro: the query's type is not worth naming.
macro_rules! order_listings {
    () => {
        with_nickname!(orders).select((
            orders::order_id,
            orders::partner_id,
            orders::sub_id,
            orders::created_date,
            orders::product,
            orders::amount_cents,
            orders::commission_cents,
            orders::status,
            orders::is_test,
            orders::source,
            orders::customer_name,
            orders::customer_email,
            coalesce(sub_accounts::nickname.nullable(), ""),
        ))
    };
}

/// The partner's `order_completed` events joined to their sub-account's nickname, selected as
/// [`EventRow`] reads them. The event condition is a literal: it is the predicate of
/// `analytics_partner_orders_idx`, which a bind parameter would keep the generic plan from using.
macro_rules! completed_events {
    () => {
        with_nickname!(analytics_events)
            .filter(fixed::<Bool>("analytics_events.event = 'order_completed'"))
            .select((
                analytics_events::id,
                analytics_events::run_id,
                analytics_events::partner_id,
                analytics_events::sub_id,
                analytics_events::event,
                analytics_events::product,
                analytics_events::amount_cents,
                analytics_events::occurred_at,
                analytics_events::test_source,
                coalesce(sub_accounts::nickname.nullable(), ""),
            ))
    };
}

// The chunk statements of the streamed listing stay raw, prepared once per connection through
// [`Prepared`] (`docs/performance.md`): they compare and sort order ids byte-wise
// (`COLLATE "C"`, in a row comparison and in `ORDER BY`), which the DSL cannot write. Each takes
// the same parameters with or without a cursor (`$3 = $3`), and the first chunk starts at the
// last instant PostgreSQL can compare.

/// The columns [`OrderRow`] reads by name, and the join that gives the sub-account's nickname.
macro_rules! order_select {
    () => {
        "SELECT o.order_id, o.partner_id, o.sub_id, o.created_date, o.product, o.amount_cents, \
       o.commission_cents, o.status, o.is_test, o.source, o.customer_name, o.customer_email, \
       COALESCE(s.nickname, '') AS sub_account \
     FROM orders o LEFT JOIN sub_accounts s ON s.partner_id = o.partner_id AND s.sub_id = o.sub_id"
    };
}

/// The columns [`EventRow`] reads by name, and the join that gives the sub-account's nickname.
macro_rules! event_select {
    () => {
        "SELECT e.id, e.run_id, e.partner_id, e.sub_id, e.event, e.product, e.amount_cents, \
       e.occurred_at, e.test_source, COALESCE(s.nickname, '') AS sub_account \
     FROM analytics_events e LEFT JOIN sub_accounts s ON s.partner_id = e.partner_id AND s.sub_id = e.sub_id"
    };
}

/// Stored orders, first chunk: `$1` partner, `$2` the latest instant, `$3` unused, `$4` limit.
const STORED_FIRST_SQL: &str = concat!(
    order_select!(),
    " WHERE o.partner_id = $1 AND o.created_date <= $2 AND $3 = $3 \
     ORDER BY o.created_date DESC, o.order_id COLLATE \"C\" DESC LIMIT $4"
);

/// Stored orders after the cursor (`$2`, `$3`): `$1` partner, `$4` limit.
const STORED_AFTER_SQL: &str = concat!(
    order_select!(),
    " WHERE o.partner_id = $1 AND o.created_date <= $2 AND (o.created_date, o.order_id COLLATE \"C\") < ($2, $3 COLLATE \"C\") \
     ORDER BY o.created_date DESC, o.order_id COLLATE \"C\" DESC LIMIT $4"
);

/// Simulated orders, first chunk: as [`STORED_FIRST_SQL`], `$5` the simulated ids' prefix.
const SIMULATED_FIRST_SQL: &str = concat!(
    event_select!(),
    " WHERE e.partner_id = $1 AND e.event = 'order_completed' AND e.occurred_at <= $2 AND $3 = $3 AND $5 = $5 \
     ORDER BY e.occurred_at DESC, ($5 || e.run_id) COLLATE \"C\" DESC LIMIT $4"
);

/// Simulated orders after the cursor: their ids (`$5 || run_id`) compared as order ids are.
const SIMULATED_AFTER_SQL: &str = concat!(
    event_select!(),
    " WHERE e.partner_id = $1 AND e.event = 'order_completed' AND e.occurred_at <= $2 AND (e.occurred_at, ($5 || e.run_id) COLLATE \"C\") < ($2, $3 COLLATE \"C\") \
     ORDER BY e.occurred_at DESC, ($5 || e.run_id) COLLATE \"C\" DESC LIMIT $4"
);

async fn listing(
    conn: &mut AsyncPgConnection,
    order_id: &str,
) -> Result<Option<OrderRow>, diesel::result::Error> {
    order_listings!()
        .filter(orders::order_id.eq(order_id))
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
    let first = after.is_none();
    let key = after.unwrap_or(OrderKey {
        created_date: time::macros::datetime!(9999-12-31 23:59:59.999999 UTC),
        order_id: String::new(),
    });
    let stored: Vec<OrderRow> = Prepared(
        diesel::sql_query(if first {
            STORED_FIRST_SQL
        } else {
            STORED_AFTER_SQL
        })
        .bind::<Text, _>(partner.as_str())
        .bind::<Timestamptz, _>(key.created_date)
        .bind::<Text, _>(&key.order_id)
        .bind::<BigInt, _>(limit_sql),
    )
    .load(conn)
    .await
    .map_err(db)?;
    let simulated: Vec<EventRow> = Prepared(
        diesel::sql_query(if first {
            SIMULATED_FIRST_SQL
        } else {
            SIMULATED_AFTER_SQL
        })
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
            concat!(
                order_select!(),
                " WHERE o.partner_id = {} \
             ORDER BY o.created_date DESC, o.order_id COLLATE \"C\" DESC LIMIT $3"
            ),
            TokenPartner::sql(1, 2)
        ))
        .bind::<diesel::sql_types::Bytea, _>(hash)
        .bind::<Timestamptz, _>(now)
        .bind::<BigInt, _>(limit_sql),
    )
    .load::<OrderRow>(&mut conn);
    let simulated = Prepared(
        diesel::sql_query(format!(
            concat!(
                event_select!(),
                " WHERE e.partner_id = {} AND e.event = 'order_completed' \
             ORDER BY e.occurred_at DESC, ($4 || e.run_id) COLLATE \"C\" DESC LIMIT $3"
            ),
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

/// The order of the listing with this id of the token's partner (taken from the token in SQL):
/// a simulated one (`TEST-SIM-<runId>`) from its `order_completed` event, any other from the
/// stored orders; to be pipelined with the token lookup.
async fn order_for_token(
    mut conn: &AsyncPgConnection,
    partner: TokenPartner,
    order_id: &str,
) -> Result<Option<OrderListing>, RepoError> {
    if let Some(run_id) = order_id.strip_prefix(SIMULATED_PREFIX) {
        let row: Option<EventRow> = completed_events!()
            .filter(analytics_events::run_id.eq(run_id))
            .filter(analytics_events::partner_id.eq(partner))
            .get_result(&mut conn)
            .await
            .optional()
            .map_err(db)?;
        return row.map(EventRow::into_listing).transpose();
    }
    let row: Option<OrderRow> = order_listings!()
        .filter(orders::order_id.eq(order_id))
        .filter(orders::partner_id.eq(partner))
        .get_result(&mut conn)
        .await
        .optional()
        .map_err(db)?;
    row.map(OrderRow::into_domain).transpose()
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
    let stored: Vec<OrderRow> = order_listings!()
        .filter(orders::partner_id.eq(partner.as_str()))
        .filter(orders::created_date.ge(from))
        .filter(orders::created_date.lt(to))
        .load(conn)
        .await
        .map_err(db)?;
    let simulated: Vec<EventRow> = completed_events!()
        .filter(analytics_events::partner_id.eq(partner.as_str()))
        .filter(analytics_events::occurred_at.ge(from))
        .filter(analytics_events::occurred_at.lt(to))
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

    async fn order_for_token(
        &self,
        key: TokenKey,
        order_id: &str,
    ) -> Result<Sealed<Option<OrderListing>>, RepoError> {
        let conn = self.conn().await?;
        let (token, order) = futures_util::future::try_join(
            tokens::lookup(&conn, &key.hash),
            order_for_token(&conn, TokenPartner::of(key), order_id),
        )
        .await?;
        Ok(Sealed::new(token, order))
    }

    async fn insert_analytics_event(
        &self,
        ev: &AnalyticsEvent,
        now: OffsetDateTime,
    ) -> Result<bool, RepoError> {
        let mut conn = self.conn().await?;
        if !outbox::partner_exists(&mut conn, ev.partner_id().as_str())
            .await
            .map_err(db)?
        {
            return Ok(false);
        }
        // The conflict target names the partial unique index by its predicate, a literal so
        // that PostgreSQL can match it.
        diesel::insert_into(analytics_events::table)
            .values(NewEvent::new(ev, now))
            .on_conflict(analytics_events::run_id)
            .filter_target(fixed::<Bool>("event = 'order_completed'"))
            .do_nothing()
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
    mut conn: &AsyncPgConnection,
    order_ids: &[&str],
) -> Result<(Vec<OrderListing>, Vec<String>), RepoError> {
    let rows: Vec<OrderRow> = order_listings!()
        .filter(orders::order_id.eq_any(order_ids))
        .load(&mut conn)
        .await
        .map_err(db)?;
    Ok(crate::readable(
        rows,
        |r| r.order_id().to_owned(),
        OrderRow::into_domain,
    ))
}

/// Inserts the order unless one with its id exists; `true` when inserted.
pub(crate) async fn insert(
    conn: &mut AsyncPgConnection,
    o: &Order,
    now: OffsetDateTime,
) -> Result<bool, diesel::result::Error> {
    let n = diesel::insert_into(orders::table)
        .values(NewOrder::new(o, now))
        .on_conflict(orders::order_id)
        .do_nothing()
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
