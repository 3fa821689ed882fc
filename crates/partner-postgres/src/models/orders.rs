//! `orders` rows.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Int2, Nullable, Text, Timestamptz};
use partner_domain::RepoError;
use partner_domain::kernel::values::{Money, PartnerId};
use partner_domain::order::{Order, OrderListing, OrderParts};
use time::OffsetDateTime;

use crate::corrupt;
use crate::models::leads::sub_id;
use crate::schema::orders;

/// A stored order with its sub-account's nickname (`''` without one), as listings show it; read
/// by position from the DSL's select and by name from the raw chunk statement.
#[derive(Queryable, QueryableByName)]
pub(crate) struct OrderRow {
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
    /// The order's id, readable whatever its other columns hold.
    pub(crate) fn order_id(&self) -> &str {
        &self.order_id
    }

    pub(crate) fn into_domain(self) -> Result<OrderListing, RepoError> {
        Ok(OrderListing {
            order: Order::new(OrderParts {
                order_id: self.order_id,
                partner_id: PartnerId::parse(&self.partner_id)
                    .map_err(|_| corrupt("partner id"))?,
                sub_id: sub_id(self.sub_id)?,
                created_date: self.created_date,
                product: self.product,
                amount: Money::try_from_cents(self.amount_cents).map_err(|_| corrupt("amount"))?,
                commission: Money::try_from_cents(self.commission_cents)
                    .map_err(|_| corrupt("commission"))?,
                status: self.status,
                is_test: self.is_test,
                source: self.source,
                customer_name: self.customer_name,
                customer_email: self.customer_email,
            })
            .map_err(|_| corrupt("order"))?,
            sub_account: self.sub_account,
        })
    }
}

/// An order as ingest stores it. `None` is written as NULL (not `DEFAULT`), so the statement
/// has one shape whatever is missing.
#[derive(Insertable)]
#[diesel(table_name = orders, treat_none_as_default_value = false)]
pub(crate) struct NewOrder<'a> {
    order_id: &'a str,
    partner_id: &'a str,
    sub_id: Option<i16>,
    created_date: OffsetDateTime,
    product: &'a str,
    amount_cents: i64,
    commission_cents: i64,
    status: &'a str,
    is_test: bool,
    source: &'a str,
    customer_name: Option<&'a str>,
    customer_email: Option<&'a str>,
    recorded_at: OffsetDateTime,
}

impl<'a> NewOrder<'a> {
    pub(crate) fn new(o: &'a Order, now: OffsetDateTime) -> Self {
        Self {
            order_id: o.order_id(),
            partner_id: o.partner_id().as_str(),
            sub_id: o.sub_id().map(|s| i16::from(s.get())),
            created_date: o.created_date(),
            product: o.product(),
            amount_cents: o.amount().cents(),
            commission_cents: o.commission().cents(),
            status: o.status(),
            is_test: o.is_test(),
            source: o.source(),
            customer_name: o.customer_name(),
            customer_email: o.customer_email(),
            recorded_at: now,
        }
    }
}
