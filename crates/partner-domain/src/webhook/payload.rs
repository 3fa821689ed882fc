//! A delivery's `data`, built when it is sent from the record its event is about, as that record
//! is then (a delayed `lead.created` carries the phone supplied during the delay).
//!
//! Everything here is a full `match` over [`Event`]: a new kind of event does not compile until
//! it says which record it is about ([`SubjectIds::of`]), where that record is found
//! ([`Subjects`], filled by the store's [`crate::webhook::ports::DeliveryRepo::subjects`]) and
//! what its `data` is ([`payload`]).

use std::collections::HashMap;

use crate::events::Event;
use crate::kernel::ids::{EndpointId, LeadId, PayoutId};
use crate::lead::Lead;
use crate::order::OrderListing;
use crate::payout::Payout;

/// The records a batch of events is about, by kind of record (each id once): what the store
/// looks up, one query per kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubjectIds {
    /// Leads (of `lead.created` and `lead.enriched`).
    pub leads: Vec<LeadId>,
    /// Orders, by `orderId` (of `order.created`).
    pub orders: Vec<String>,
    /// Payouts (of `payout.created`).
    pub payouts: Vec<PayoutId>,
}

impl SubjectIds {
    /// The records `events` are about, each once, sorted.
    pub fn of<'a>(events: impl IntoIterator<Item = &'a Event>) -> Self {
        let mut ids = Self::default();
        for event in events {
            match event {
                Event::LeadCreated { lead } | Event::LeadEnriched { lead, .. } => {
                    ids.leads.push(*lead);
                }
                Event::OrderCreated { order, .. } => ids.orders.push(order.clone()),
                Event::PayoutCreated { payout } => ids.payouts.push(*payout),
                // A ping is about its endpoint, which the claim just read: nothing to look up.
                Event::Ping { .. } => {}
            }
        }
        ids.leads.sort_unstable();
        ids.leads.dedup();
        ids.orders.sort_unstable();
        ids.orders.dedup();
        ids.payouts.sort_unstable();
        ids.payouts.dedup();
        ids
    }

    /// Whether there is nothing to look up.
    pub fn is_empty(&self) -> bool {
        let Self {
            leads,
            orders,
            payouts,
        } = self;
        leads.is_empty() && orders.is_empty() && payouts.is_empty()
    }

    /// These ids less those in `done` (already looked up, found or not).
    pub fn without(mut self, done: &SubjectIds) -> Self {
        self.leads.retain(|l| !done.leads.contains(l));
        self.orders.retain(|o| !done.orders.contains(o));
        self.payouts.retain(|p| !done.payouts.contains(p));
        self
    }
}

/// The records found for a [`SubjectIds`], by id; a record deleted since its event is absent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Subjects {
    /// Leads, by id.
    pub leads: HashMap<LeadId, Lead>,
    /// Stored orders with their sub-account's nickname as of now, by `orderId`.
    pub orders: HashMap<String, OrderListing>,
    /// Payouts, by id.
    pub payouts: HashMap<PayoutId, Payout>,
    /// Records found but unreadable (a stored value that no longer parses): their deliveries
    /// fail alone (`subject unreadable`), the rest of the batch is sent.
    pub unreadable: SubjectIds,
}

impl Subjects {
    /// Adds the records of `other` (looked up for other ids) to these.
    pub fn merge(&mut self, other: Subjects) {
        let Subjects {
            leads,
            orders,
            payouts,
            unreadable,
        } = other;
        self.leads.extend(leads);
        self.orders.extend(orders);
        self.payouts.extend(payouts);
        self.unreadable.leads.extend(unreadable.leads);
        self.unreadable.orders.extend(unreadable.orders);
        self.unreadable.payouts.extend(unreadable.payouts);
    }

    /// Whether the record `event` is about was found unreadable.
    pub fn is_unreadable(&self, event: &Event) -> bool {
        let u = &self.unreadable;
        match event {
            Event::LeadCreated { lead } | Event::LeadEnriched { lead, .. } => {
                u.leads.contains(lead)
            }
            Event::OrderCreated { order, .. } => u.orders.contains(order),
            Event::PayoutCreated { payout } => u.payouts.contains(payout),
            Event::Ping { .. } => false,
        }
    }
}

/// A delivery's `data`, by kind of event: the records the contract's webhook payloads carry, as
/// they are now. How they are written on the wire is the answer types' business
/// ([`crate::webhook::ports::DataFormat`]), so a webhook's lead is byte for byte the listing's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Payload<'a> {
    /// `lead.created`: the lead.
    LeadCreated {
        /// The lead as it is now.
        lead: &'a Lead,
    },
    /// `lead.enriched`: the lead and its phones before and after.
    LeadEnriched {
        /// The lead as it is now.
        lead: &'a Lead,
        /// The phone before the update.
        previous_phone: &'a str,
        /// The phone after it.
        current_phone: &'a str,
    },
    /// A stored order as a non-admin listing shows it, with the `source` it was ingested with.
    OrderCreated {
        /// The order's `source`, as ingested.
        source: &'a str,
        /// The order with its sub-account's nickname.
        order: &'a OrderListing,
    },
    /// `payout.created`: the payout.
    PayoutCreated {
        /// The payout.
        payout: &'a Payout,
    },
    /// `ping`: the endpoint tested.
    Ping {
        /// The endpoint.
        endpoint_id: EndpointId,
    },
}

impl<'a> Payload<'a> {
    /// The `data` of `event`, from its record in `subjects`; `None` when the record is gone
    /// (retrying cannot bring it back: the delivery fails).
    pub fn of(event: &'a Event, subjects: &'a Subjects) -> Option<Self> {
        Some(match event {
            Event::LeadCreated { lead } => Self::LeadCreated {
                lead: subjects.leads.get(lead)?,
            },
            Event::LeadEnriched {
                lead,
                previous_phone,
                current_phone,
            } => Self::LeadEnriched {
                lead: subjects.leads.get(lead)?,
                previous_phone,
                current_phone,
            },
            Event::OrderCreated { order, source } => Self::OrderCreated {
                source,
                order: subjects.orders.get(order)?,
            },
            Event::PayoutCreated { payout } => Self::PayoutCreated {
                payout: subjects.payouts.get(payout)?,
            },
            Event::Ping { endpoint } => Self::Ping {
                endpoint_id: *endpoint,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::values::{Money, PartnerId};
    use crate::lead::{LeadParts, Origin, TestFlag};
    use crate::order::{Order, OrderParts};
    use crate::payout::NewPayout;
    use time::macros::{date, datetime};
    use uuid::Uuid;

    fn acme() -> PartnerId {
        PartnerId::parse("acme").expect("id")
    }

    fn lead() -> Lead {
        Lead::new(LeadParts {
            id: LeadId::from_uuid(Uuid::from_u128(1)),
            partner_id: acme(),
            sub_id: None,
            first_name: "Ann".into(),
            last_name: "Lee".into(),
            email: "ann@x.co".into(),
            email_consent: true,
            phone: Some("555-1".into()),
            sms_consent: true,
            origin: Origin::parse("managed-website").expect("origin"),
            location: "Austin".into(),
            question_id: None,
            test: TestFlag::REAL,
            created_at: datetime!(2026-11-21 10:00 UTC),
            updated_at: datetime!(2026-11-21 10:05 UTC),
        })
        .expect("a valid lead")
    }

    fn listing() -> OrderListing {
        OrderListing {
            order: Order::new(OrderParts {
                order_id: "o-1".into(),
                partner_id: acme(),
                sub_id: None,
                created_date: datetime!(2026-11-21 9:00 UTC),
                product: "Tirzepatide".into(),
                amount: Money::from_cents(49_900),
                commission: Money::from_cents(100),
                status: "shipped".into(),
                is_test: false,
                source: "pharmacy".into(),
                customer_name: Some("Ann".into()),
                customer_email: None,
            })
            .expect("a valid order"),
            sub_account: "Desk A".into(),
        }
    }

    fn payout() -> Payout {
        Payout::new(
            PayoutId::from_uuid(Uuid::from_u128(3)),
            "ops@acme.test".into(),
            date!(2026 - 11 - 21),
            NewPayout {
                partner_id: acme(),
                payout_date: date!(2026 - 11 - 30),
                amount: Money::from_cents(123_450),
                status: "paid".into(),
                receipt_url: None,
                note: None,
            },
        )
    }

    fn subjects() -> Subjects {
        Subjects {
            leads: [(lead().id(), lead())].into(),
            orders: [("o-1".to_owned(), listing())].into(),
            payouts: [(payout().id(), payout())].into(),
            unreadable: SubjectIds::default(),
        }
    }

    /// One event of each kind.
    fn cases() -> Vec<Event> {
        let lead_id = LeadId::from_uuid(Uuid::from_u128(1));
        vec![
            Event::LeadCreated { lead: lead_id },
            Event::LeadEnriched {
                lead: lead_id,
                previous_phone: String::new(),
                current_phone: "555-1".into(),
            },
            Event::OrderCreated {
                order: "o-1".into(),
                source: "shop".into(),
            },
            Event::PayoutCreated {
                payout: PayoutId::from_uuid(Uuid::from_u128(3)),
            },
            Event::Ping {
                endpoint: EndpointId::from_uuid(Uuid::from_u128(4)),
            },
        ]
    }

    #[test]
    fn every_kind_has_a_payload_of_its_record() {
        let cases = cases();
        let kinds: Vec<_> = cases.iter().map(Event::kind).collect();
        assert_eq!(
            kinds,
            crate::events::EventKind::DELIVERED,
            "every kind is covered"
        );
        let subjects = subjects();
        let payloads: Vec<_> = cases
            .iter()
            .map(|e| Payload::of(e, &subjects).expect("its subject exists"))
            .collect();
        let lead = lead();
        let listing = listing();
        let payout = payout();
        assert_eq!(
            payloads,
            vec![
                Payload::LeadCreated { lead: &lead },
                Payload::LeadEnriched {
                    lead: &lead,
                    previous_phone: "",
                    current_phone: "555-1"
                },
                Payload::OrderCreated {
                    source: "shop",
                    order: &listing
                },
                Payload::PayoutCreated { payout: &payout },
                Payload::Ping {
                    endpoint_id: EndpointId::from_uuid(Uuid::from_u128(4))
                },
            ]
        );
    }

    #[test]
    fn a_deleted_subject_has_no_payload_and_a_ping_needs_none() {
        let none = Subjects::default();
        for event in cases() {
            let found = Payload::of(&event, &none);
            assert_eq!(
                found.is_some(),
                matches!(event, Event::Ping { .. }),
                "{event:?}"
            );
        }
    }

    #[test]
    fn each_record_is_looked_up_once_by_its_kind() {
        let events: Vec<Event> = cases().into_iter().chain(cases()).collect();
        let ids = SubjectIds::of(&events);
        assert_eq!(
            ids,
            SubjectIds {
                leads: vec![LeadId::from_uuid(Uuid::from_u128(1))],
                orders: vec!["o-1".into()],
                payouts: vec![PayoutId::from_uuid(Uuid::from_u128(3))],
            }
        );
        assert!(!ids.is_empty());
        let pings = [Event::Ping {
            endpoint: EndpointId::from_uuid(Uuid::nil()),
        }];
        assert!(SubjectIds::of(&pings).is_empty());
    }
}
