//! Orders: stored orders, simulated orders synthesized at read time from a simulated run's
//! analytics event, their two renderings (partner and admin), idempotent ingest, and the
//! commission summary, where test and simulated orders never count.
//!
//! [`Order::new`] refuses what the contract rules out (a `TEST-SIM-` id on a stored order, which
//! would be a test order counted as real); amounts are [`Money`], never negative.
//! [`Order::counts_toward_commission`] is the one rule of what counts, and
//! [`CommissionSummary::of`] applies it.

pub mod ports;

mod service;

pub use service::{IngestOrderError, OrderIngest, OrderService, RecordEventError};

use time::OffsetDateTime;

use crate::kernel::ids::AnalyticsEventId;
use crate::kernel::values::{Money, PartnerId, SubId, ValueError};
use crate::lead::TestSource;

/// The prefix of simulated order ids; stored orders may not use it.
pub const SIMULATED_PREFIX: &str = "TEST-SIM-";
/// The status of simulated orders.
pub const SIMULATED_STATUS: &str = "Simulated";
/// The analytics event of a run that yields a simulated order.
pub const ORDER_COMPLETED: &str = "order_completed";

/// An order id as stored: 1-100 printable ASCII characters without spaces, not starting with
/// the simulated prefix.
pub fn parse_order_id(s: &str) -> Result<String, ValueError> {
    if s.is_empty() {
        return Err(ValueError::Missing("orderId"));
    }
    if s.len() > 100 || !s.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ValueError::invalid(
            "orderId",
            "1-100 printable ASCII characters without spaces",
        ));
    }
    if s.starts_with(SIMULATED_PREFIX) {
        return Err(ValueError::invalid(
            "orderId",
            "the TEST-SIM- prefix is reserved for simulated orders",
        ));
    }
    Ok(s.to_owned())
}

/// An id the orders listing can show: a stored order's id ([`parse_order_id`]) or a simulated
/// one, [`SIMULATED_PREFIX`] followed by a run id ([`parse_run_id`]).
pub fn parse_listed_order_id(s: &str) -> Result<String, ValueError> {
    match s.strip_prefix(SIMULATED_PREFIX) {
        Some(run) => parse_run_id(run)
            .map(|_| s.to_owned())
            .map_err(|_| ValueError::invalid("orderId", "TEST-SIM- followed by a run id")),
        None => parse_order_id(s),
    }
}

/// A simulated run's id: 1-64 of `A-Z a-z 0-9 _ -`.
pub fn parse_run_id(s: &str) -> Result<String, ValueError> {
    if s.is_empty() {
        return Err(ValueError::Missing("runId"));
    }
    if s.len() > 64
        || !s
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(ValueError::invalid(
            "runId",
            "1-64 of A-Z, a-z, 0-9, _ and -",
        ));
    }
    Ok(s.to_owned())
}

/// An order, stored or simulated: built by [`Order::new`] from [`OrderParts`] whose text the
/// caller parsed (the id by [`parse_order_id`], which refuses the `TEST-SIM-` prefix), or by
/// [`Order::simulated`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Order {
    order_id: String,
    partner_id: PartnerId,
    sub_id: Option<SubId>,
    created_date: OffsetDateTime,
    product: String,
    amount: Money,
    commission: Money,
    status: String,
    is_test: bool,
    source: String,
    customer_name: Option<String>,
    customer_email: Option<String>,
}

/// The fields of an [`Order`] that is not simulated, for [`Order::new`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderParts {
    /// The order's id ([`parse_order_id`]: never `TEST-SIM-`).
    pub order_id: String,
    /// The partner the order is attributed to.
    pub partner_id: PartnerId,
    /// The sub-account it is attributed to, if any.
    pub sub_id: Option<SubId>,
    /// When the order was placed.
    pub created_date: OffsetDateTime,
    /// What was bought.
    pub product: String,
    /// What the customer paid.
    pub amount: Money,
    /// The partner's commission on it.
    pub commission: Money,
    /// The fulfilment status as the pharmacy reports it (`shipped`, …).
    pub status: String,
    /// Whether it came from a test run (a test order never counts toward commission).
    pub is_test: bool,
    /// Where the order came from (`pharmacy`, …).
    pub source: String,
    /// The customer's name (shown to admin tokens only).
    pub customer_name: Option<String>,
    /// The customer's e-mail (shown to admin tokens only); an e-mail address when present.
    pub customer_email: Option<String>,
}

/// Why [`Order::new`] refuses its parts: a state the contract rules out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OrderError {
    /// The id starts with [`SIMULATED_PREFIX`]: a `TEST-SIM-` order is a simulated one, a test
    /// order made only by [`Order::simulated`]; a stored order may not carry the prefix, with
    /// `is_test` or without it.
    #[error("the TEST-SIM- prefix is reserved for simulated orders")]
    SimulatedId,
}

impl Order {
    /// An order as ingested or stored; refuses a state the contract rules out ([`OrderError`]):
    /// an id with the `TEST-SIM-` prefix, whatever `is_test` says (simulated orders are test
    /// orders and come from [`Order::simulated`] only, so no order with that prefix can be
    /// real). Amounts are [`Money`], never negative. The text fields are not re-parsed: the
    /// ingest parsed them ([`parse_order_id`], …), and a stricter rule later must not make
    /// stored orders unreadable.
    ///
    /// ```
    /// use partner_domain::kernel::values::{Money, PartnerId};
    /// use partner_domain::order::{Order, OrderError, OrderParts};
    /// use time::macros::datetime;
    ///
    /// let parts = OrderParts {
    ///     order_id: "ORD-1".into(),
    ///     partner_id: PartnerId::parse("acme")?,
    ///     sub_id: None,
    ///     created_date: datetime!(2026-11-21 9:00 UTC),
    ///     product: "Semaglutide".into(),
    ///     amount: Money::from_cents(29_900),
    ///     commission: Money::from_cents(4_500),
    ///     status: "shipped".into(),
    ///     is_test: false,
    ///     source: "pharmacy".into(),
    ///     customer_name: None,
    ///     customer_email: None,
    /// };
    /// let order = Order::new(parts.clone())?;
    /// assert!(order.counts_toward_commission());
    /// // A simulated id cannot be stored as a real order (nor as a test one).
    /// let forged = OrderParts { order_id: "TEST-SIM-run1".into(), ..parts };
    /// assert_eq!(Order::new(forged), Err(OrderError::SimulatedId));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(parts: OrderParts) -> Result<Self, OrderError> {
        if parts.order_id.starts_with(SIMULATED_PREFIX) {
            return Err(OrderError::SimulatedId);
        }
        let OrderParts {
            order_id,
            partner_id,
            sub_id,
            created_date,
            product,
            amount,
            commission,
            status,
            is_test,
            source,
            customer_name,
            customer_email,
        } = parts;
        Ok(Self {
            order_id,
            partner_id,
            sub_id,
            created_date,
            product,
            amount,
            commission,
            status,
            is_test,
            source,
            customer_name,
            customer_email,
        })
    }

    /// The order's id (`TEST-SIM-<runId>` for a simulated order).
    #[must_use]
    pub fn order_id(&self) -> &str {
        &self.order_id
    }

    /// The partner the order is attributed to.
    #[must_use]
    pub fn partner_id(&self) -> &PartnerId {
        &self.partner_id
    }

    /// The sub-account it is attributed to, if any.
    #[must_use]
    pub fn sub_id(&self) -> Option<SubId> {
        self.sub_id
    }

    /// When the order was placed.
    #[must_use]
    pub fn created_date(&self) -> OffsetDateTime {
        self.created_date
    }

    /// What was bought.
    #[must_use]
    pub fn product(&self) -> &str {
        &self.product
    }

    /// What the customer paid.
    #[must_use]
    pub fn amount(&self) -> Money {
        self.amount
    }

    /// The partner's commission on it (zero for a simulated order).
    #[must_use]
    pub fn commission(&self) -> Money {
        self.commission
    }

    /// The fulfilment status (`Simulated` for a simulated order).
    #[must_use]
    pub fn status(&self) -> &str {
        &self.status
    }

    /// Whether it is a test order (always for a simulated one).
    #[must_use]
    pub fn is_test(&self) -> bool {
        self.is_test
    }

    /// Where the order came from (a simulated order: its run's test source).
    #[must_use]
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The customer's name, if known.
    #[must_use]
    pub fn customer_name(&self) -> Option<&str> {
        self.customer_name.as_deref()
    }

    /// The customer's e-mail, if known.
    #[must_use]
    pub fn customer_email(&self) -> Option<&str> {
        self.customer_email.as_deref()
    }

    /// Whether the order counts in commission totals: a real order, never a test one, and never
    /// a simulated one (`TEST-SIM-` ids are test orders whatever `is_test` says, so an adapter
    /// that built one with `is_test = false` cannot make it count).
    #[must_use]
    pub fn counts_toward_commission(&self) -> bool {
        !self.is_test && !self.order_id.starts_with(SIMULATED_PREFIX)
    }

    /// The order a simulated run's `order_completed` event stands for: `TEST-SIM-<runId>`,
    /// status `Simulated`, zero commission, a test order. It is never stored.
    #[must_use]
    pub fn simulated(ev: &AnalyticsEvent) -> Self {
        Self {
            order_id: format!("{SIMULATED_PREFIX}{}", ev.run_id),
            partner_id: ev.partner_id.clone(),
            sub_id: ev.sub_id,
            created_date: ev.occurred_at,
            product: ev.product.clone().unwrap_or_default(),
            amount: ev.amount.unwrap_or_default(),
            commission: Money::ZERO,
            status: SIMULATED_STATUS.to_owned(),
            is_test: true,
            source: ev.test_source.as_str().to_owned(),
            customer_name: None,
            customer_email: None,
        }
    }
}

/// Where a listing of orders stands: the last order listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderKey {
    /// The last order's `createdDate`.
    pub created_date: OffsetDateTime,
    /// The last order's id.
    pub order_id: String,
}

impl OrderKey {
    /// The position right after `order`.
    #[must_use]
    pub fn of(order: &Order) -> Self {
        Self {
            created_date: order.created_date,
            order_id: order.order_id.clone(),
        }
    }
}

/// An order with the nickname of its sub-account, as listings read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderListing {
    /// The order.
    pub order: Order,
    /// Its sub-account's nickname (empty without one).
    pub sub_account: String,
}

impl OrderListing {
    /// Stored and simulated orders as one listing, in the listing's order: `createdDate`
    /// descending, then `orderId` descending byte-wise (the order ids' bytes, whatever a
    /// database's collation says).
    pub fn merge(stored: Vec<Self>, simulated: Vec<Self>) -> Vec<Self> {
        let mut all = stored;
        all.extend(simulated);
        all.sort_by(|a, b| {
            (b.order.created_date, b.order.order_id.as_bytes())
                .cmp(&(a.order.created_date, a.order.order_id.as_bytes()))
        });
        all
    }
}

/// An analytics event of an elective-medication run (every run reporting them is a test or a
/// simulation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnalyticsEvent {
    id: AnalyticsEventId,
    run_id: String,
    partner_id: PartnerId,
    sub_id: Option<SubId>,
    event: String,
    product: Option<String>,
    amount: Option<Money>,
    occurred_at: OffsetDateTime,
    test_source: TestSource,
}

impl AnalyticsEvent {
    /// An event as recorded: what the run reported, under the id the recording gave it; refuses
    /// an `order_completed` without its product or amount ([`NewAnalyticsEvent::checked`]), so
    /// every simulated order says what was "bought".
    pub fn new(id: AnalyticsEventId, reported: NewAnalyticsEvent) -> Result<Self, ValueError> {
        let NewAnalyticsEvent {
            run_id,
            partner_id,
            sub_id,
            event,
            product,
            amount,
            occurred_at,
            test_source,
        } = reported.checked()?;
        Ok(Self {
            id,
            run_id,
            partner_id,
            sub_id,
            event,
            product,
            amount,
            occurred_at,
            test_source,
        })
    }

    /// The id the recording gave the event.
    #[must_use]
    pub fn id(&self) -> AnalyticsEventId {
        self.id
    }

    /// The run that reported it.
    #[must_use]
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The partner the run is attributed to.
    #[must_use]
    pub fn partner_id(&self) -> &PartnerId {
        &self.partner_id
    }

    /// The sub-account the run is attributed to, if any.
    #[must_use]
    pub fn sub_id(&self) -> Option<SubId> {
        self.sub_id
    }

    /// The event's name (`order_completed`, …).
    #[must_use]
    pub fn event(&self) -> &str {
        &self.event
    }

    /// What was "bought" (set on `order_completed`).
    #[must_use]
    pub fn product(&self) -> Option<&str> {
        self.product.as_deref()
    }

    /// The amount (set on `order_completed`).
    #[must_use]
    pub fn amount(&self) -> Option<Money> {
        self.amount
    }

    /// When it happened.
    #[must_use]
    pub fn occurred_at(&self) -> OffsetDateTime {
        self.occurred_at
    }

    /// Why the run is a test (every run reporting events is one).
    #[must_use]
    pub fn test_source(&self) -> TestSource {
        self.test_source
    }
}

/// An event name: 1-64 of `a-z 0-9 _ . -`.
pub fn parse_event_name(s: &str) -> Result<String, ValueError> {
    if s.is_empty() {
        return Err(ValueError::Missing("event"));
    }
    if s.len() > 64
        || !s
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_.-".contains(&b))
    {
        return Err(ValueError::invalid("event", "1-64 of a-z, 0-9, _ . -"));
    }
    Ok(s.to_owned())
}

/// Real orders and their commission in a period; test and simulated orders are only counted
/// as excluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CommissionSummary {
    /// How many orders count ([`Order::counts_toward_commission`]).
    pub order_count: u64,
    /// The commission of the orders that count.
    pub commission_total: Money,
    /// How many test and simulated orders were left out.
    pub excluded_test_orders: u64,
}

impl CommissionSummary {
    /// The summary of `orders`: each counts exactly when [`Order::counts_toward_commission`]
    /// says so.
    pub fn of<'a>(orders: impl IntoIterator<Item = &'a Order>) -> Self {
        orders.into_iter().fold(Self::default(), |mut s, o| {
            if !o.counts_toward_commission() {
                s.excluded_test_orders = s.excluded_test_orders.saturating_add(1);
            } else {
                s.order_count = s.order_count.saturating_add(1);
                // Saturates rather than dropping an order's commission (it never gets near
                // i64 cents: each order is at most ten billion).
                s.commission_total = s.commission_total.saturating_add(o.commission);
            }
            s
        })
    }
}

/// An analytics event as ingested.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAnalyticsEvent {
    /// The run that reports it ([`parse_run_id`]).
    pub run_id: String,
    /// The partner the run is attributed to.
    pub partner_id: PartnerId,
    /// The sub-account the run is attributed to, if any.
    pub sub_id: Option<SubId>,
    /// The event's name ([`parse_event_name`]).
    pub event: String,
    /// What was "bought" (required on `order_completed`).
    pub product: Option<String>,
    /// The amount (required on `order_completed`).
    pub amount: Option<Money>,
    /// When it happened.
    pub occurred_at: OffsetDateTime,
    /// Why the run is a test.
    pub test_source: TestSource,
}

impl NewAnalyticsEvent {
    /// An `order_completed` event must say what was "bought".
    pub fn checked(self) -> Result<Self, ValueError> {
        if self.event == ORDER_COMPLETED {
            if self.product.as_deref().is_none_or(str::is_empty) {
                return Err(ValueError::Missing("product"));
            }
            if self.amount.is_none() {
                return Err(ValueError::Missing("amount"));
            }
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn event() -> AnalyticsEvent {
        AnalyticsEvent {
            id: AnalyticsEventId::from_uuid(uuid::Uuid::nil()),
            run_id: "run42".into(),
            partner_id: PartnerId::parse("acme").expect("id"),
            sub_id: SubId::new(3),
            event: ORDER_COMPLETED.into(),
            product: Some("Semaglutide".into()),
            amount: Some(Money::from_cents(29900)),
            occurred_at: datetime!(2026-11-21 10:00 UTC),
            test_source: TestSource::Simulation,
        }
    }

    fn parts() -> OrderParts {
        OrderParts {
            order_id: "A1".into(),
            partner_id: PartnerId::parse("acme").expect("id"),
            sub_id: None,
            created_date: datetime!(2026-11-21 9:00 UTC),
            product: "Tirzepatide".into(),
            amount: Money::from_cents(49900),
            commission: Money::from_cents(7000),
            status: "shipped".into(),
            is_test: false,
            source: "pharmacy".into(),
            customer_name: None,
            customer_email: Some("ann@x.co".into()),
        }
    }

    /// Issue 21, the bypass: `Order::new` took a `TEST-SIM-` id with `is_test = false`, and the
    /// commission summary counted it. Now no `TEST-SIM-` order can be built but a simulated one
    /// (a test order), so none counts.
    #[test]
    fn order_new_refuses_a_simulated_id_with_is_test_false() {
        for is_test in [false, true] {
            let forged = OrderParts {
                order_id: "TEST-SIM-run42".into(),
                is_test,
                ..parts()
            };
            assert_eq!(Order::new(forged), Err(OrderError::SimulatedId));
        }
        let real = Order::new(parts()).expect("a real order");
        let sim = Order::simulated(&event());
        assert_eq!(
            CommissionSummary::of([&real, &sim]),
            CommissionSummary {
                order_count: 1,
                commission_total: Money::from_cents(7000),
                excluded_test_orders: 1
            }
        );
    }

    /// Issue 21's kin: an `order_completed` event without its product used to become a
    /// simulated order of no product.
    #[test]
    fn analytics_event_new_refuses_an_order_completed_without_product() {
        let reported = NewAnalyticsEvent {
            run_id: "run42".into(),
            partner_id: PartnerId::parse("acme").expect("id"),
            sub_id: None,
            event: ORDER_COMPLETED.into(),
            product: None,
            amount: Some(Money::from_cents(100)),
            occurred_at: datetime!(2026-11-21 10:00 UTC),
            test_source: TestSource::Simulation,
        };
        let id = AnalyticsEventId::from_uuid(uuid::Uuid::nil());
        assert_eq!(
            AnalyticsEvent::new(id, reported.clone()),
            Err(ValueError::Missing("product"))
        );
        let no_amount = NewAnalyticsEvent {
            product: Some("Semaglutide".into()),
            amount: None,
            ..reported.clone()
        };
        assert_eq!(
            AnalyticsEvent::new(id, no_amount),
            Err(ValueError::Missing("amount"))
        );
        let ok = NewAnalyticsEvent {
            product: Some("Semaglutide".into()),
            ..reported
        };
        assert!(AnalyticsEvent::new(id, ok).is_ok());
    }

    fn real(commission: u32) -> Order {
        Order {
            order_id: "A1".into(),
            partner_id: PartnerId::parse("acme").expect("id"),
            sub_id: None,
            created_date: datetime!(2026-11-21 9:00 UTC),
            product: "Tirzepatide".into(),
            amount: Money::from_cents(49900),
            commission: Money::from_cents(commission),
            status: "shipped".into(),
            is_test: false,
            source: "pharmacy".into(),
            customer_name: Some("Ann".into()),
            customer_email: None,
        }
    }

    #[test]
    fn a_listing_is_newest_first_then_order_id_descending_bytewise() {
        let at = |id: &str, h: u8| OrderListing {
            order: Order {
                order_id: id.into(),
                created_date: datetime!(2026-11-21 0:00 UTC) + time::Duration::hours(h.into()),
                ..real(0)
            },
            sub_account: String::new(),
        };
        let sim = OrderListing {
            order: Order::simulated(&event()),
            sub_account: String::new(),
        };
        let merged = OrderListing::merge(
            vec![at("b", 10), at("B", 10), at("a", 12), at("z", 1)],
            vec![sim],
        );
        let ids: Vec<&str> = merged.iter().map(|l| l.order.order_id.as_str()).collect();
        // 12:00 first; at 10:00 "b" > "TEST-SIM-run42" > "B" byte-wise; 01:00 last.
        assert_eq!(ids, ["a", "b", "TEST-SIM-run42", "B", "z"]);
    }

    #[test]
    fn a_simulated_order_comes_from_the_event() {
        let o = Order::simulated(&event());
        assert_eq!(o.order_id, "TEST-SIM-run42");
        assert_eq!(o.status, "Simulated");
        assert_eq!(o.commission, Money::from_cents(0));
        assert!(o.is_test);
        assert_eq!(o.created_date, datetime!(2026-11-21 10:00 UTC));
        assert_eq!(
            (o.product.as_str(), o.amount),
            ("Semaglutide", Money::from_cents(29900))
        );
        assert_eq!(o.sub_id, SubId::new(3));
    }

    #[test]
    fn test_and_simulated_orders_never_count() {
        let mut test = real(5000);
        test.is_test = true;
        let sim = Order::simulated(&event());
        // A simulated id built with `is_test = false` (no adapter does; the rule must not rely
        // on it) is still a test order.
        let mut forged = Order::simulated(&event());
        forged.is_test = false;
        forged.commission = Money::from_cents(7000);
        assert!(!forged.counts_toward_commission());
        let s = CommissionSummary::of(&[real(1250), test, sim, forged, real(50)]);
        assert_eq!(
            s,
            CommissionSummary {
                order_count: 2,
                commission_total: Money::from_cents(1300),
                excluded_test_orders: 3
            }
        );
    }

    #[test]
    fn order_ids_and_events() {
        assert!(parse_order_id("ORD-1").is_ok());
        for bad in ["", "a b", "TEST-SIM-1", &"x".repeat(101), "é"] {
            assert!(parse_order_id(bad).is_err(), "{bad}");
        }
        let mut e = NewAnalyticsEvent {
            run_id: "r".into(),
            partner_id: PartnerId::parse("acme").expect("id"),
            sub_id: None,
            event: ORDER_COMPLETED.into(),
            product: None,
            amount: None,
            occurred_at: datetime!(2026-11-21 10:00 UTC),
            test_source: TestSource::Simulation,
        };
        assert!(e.clone().checked().is_err());
        e.event = "page_view".into();
        assert!(e.checked().is_ok());
    }
}
