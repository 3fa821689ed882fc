//! `analytics_events` rows. Simulated orders are never stored: an `order_completed` event is
//! turned into one by the domain when it is read.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Int2, Nullable, Text, Timestamptz};
use partner_domain::RepoError;
use partner_domain::kernel::ids::AnalyticsEventId;
use partner_domain::kernel::values::{Money, PartnerId};
use partner_domain::lead::TestSource;
use partner_domain::order::{AnalyticsEvent, NewAnalyticsEvent, Order, OrderListing};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::corrupt;
use crate::models::leads::sub_id;
use crate::schema::analytics_events;

/// An `order_completed` event with its sub-account's nickname, as order listings show it; read
/// by position from the DSL's select and by name from the raw chunk statement.
#[derive(Queryable, QueryableByName)]
pub(crate) struct EventRow {
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
    pub(crate) fn into_listing(self) -> Result<OrderListing, RepoError> {
        let ev = AnalyticsEvent::new(
            AnalyticsEventId::from_uuid(self.id),
            NewAnalyticsEvent {
                run_id: self.run_id,
                partner_id: PartnerId::parse(&self.partner_id)
                    .map_err(|_| corrupt("partner id"))?,
                sub_id: sub_id(self.sub_id)?,
                event: self.event,
                product: self.product,
                amount: self
                    .amount_cents
                    .map(Money::try_from_cents)
                    .transpose()
                    .map_err(|_| corrupt("amount"))?,
                occurred_at: self.occurred_at,
                test_source: TestSource::parse(&self.test_source)
                    .ok_or_else(|| corrupt("test source"))?,
            },
        )
        .map_err(|_| corrupt("analytics event"))?;
        Ok(OrderListing {
            order: Order::simulated(&ev),
            sub_account: self.sub_account,
        })
    }
}

/// An event as ingest stores it. `None` is written as NULL (not `DEFAULT`), so the statement has
/// one shape whatever is missing.
#[derive(Insertable)]
#[diesel(table_name = analytics_events, treat_none_as_default_value = false)]
pub(crate) struct NewEvent<'a> {
    id: Uuid,
    run_id: &'a str,
    partner_id: &'a str,
    sub_id: Option<i16>,
    event: &'a str,
    product: Option<&'a str>,
    amount_cents: Option<i64>,
    occurred_at: OffsetDateTime,
    test_source: &'a str,
    recorded_at: OffsetDateTime,
}

impl<'a> NewEvent<'a> {
    pub(crate) fn new(ev: &'a AnalyticsEvent, now: OffsetDateTime) -> Self {
        Self {
            id: ev.id().as_uuid(),
            run_id: ev.run_id(),
            partner_id: ev.partner_id().as_str(),
            sub_id: ev.sub_id().map(|s| i16::from(s.get())),
            event: ev.event(),
            product: ev.product(),
            amount_cents: ev.amount().map(Money::cents),
            occurred_at: ev.occurred_at(),
            test_source: ev.test_source().as_str(),
            recorded_at: now,
        }
    }
}
