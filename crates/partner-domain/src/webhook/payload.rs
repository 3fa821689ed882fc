//! A delivery's `data`, built when it is sent from the record its event is about, as that record
//! is then (a delayed `lead.created` carries the phone supplied during the delay).
//!
//! Everything here is a full `match` over [`Event`]: a new kind of event does not compile until
//! it says which record it is about ([`SubjectIds::of`]), where that record is found
//! ([`Subjects`], filled by the store's [`crate::webhook::ports::DeliveryRepo::subjects`]) and
//! what its `data` is ([`payload`]).

use std::collections::HashMap;

use serde::Serialize;

use crate::events::Event;
use crate::kernel::ids::{EndpointId, LeadId, PayoutId};
use crate::lead::{Lead, LeadRow};
use crate::order::{OrderListing, OrderRow};
use crate::payout::{Payout, PayoutRow};

/// The records a batch of events is about, by kind of record (each id once): what the store
/// looks up, one query per kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubjectIds {
    pub leads: Vec<LeadId>,
    pub orders: Vec<String>,
    pub payouts: Vec<PayoutId>,
}

impl SubjectIds {
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

    pub fn is_empty(&self) -> bool {
        let Self {
            leads,
            orders,
            payouts,
        } = self;
        leads.is_empty() && orders.is_empty() && payouts.is_empty()
    }
}

/// The records found for a [`SubjectIds`], by id; a record deleted since its event is absent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Subjects {
    pub leads: HashMap<LeadId, Lead>,
    /// Stored orders with their sub-account's nickname as of now, by `orderId`.
    pub orders: HashMap<String, OrderListing>,
    pub payouts: HashMap<PayoutId, Payout>,
}

/// A delivery's `data`, by kind of event (the webhook payloads of the contract).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged, rename_all_fields = "camelCase")]
pub enum Payload<'a> {
    LeadCreated {
        lead: LeadRow,
    },
    LeadEnriched {
        lead: LeadRow,
        previous_phone: &'a str,
        current_phone: &'a str,
    },
    OrderCreated {
        source: &'a str,
        order: OrderRow,
    },
    PayoutCreated {
        payout: PayoutRow,
    },
    Ping {
        endpoint_id: EndpointId,
    },
}

impl<'a> Payload<'a> {
    /// The `data` of `event`, from its record in `subjects`; `None` when the record is gone
    /// (retrying cannot bring it back: the delivery fails).
    pub fn of(event: &'a Event, subjects: &Subjects) -> Option<Self> {
        Some(match event {
            Event::LeadCreated { lead } => Self::LeadCreated {
                lead: subjects.leads.get(lead)?.row(),
            },
            Event::LeadEnriched {
                lead,
                previous_phone,
                current_phone,
            } => Self::LeadEnriched {
                lead: subjects.leads.get(lead)?.row(),
                previous_phone,
                current_phone,
            },
            Event::OrderCreated { order, source } => {
                let listing = subjects.orders.get(order)?;
                Self::OrderCreated {
                    source,
                    order: listing.order.render(&listing.sub_account, false),
                }
            }
            Event::PayoutCreated { payout } => Self::PayoutCreated {
                payout: subjects.payouts.get(payout)?.row(),
            },
            Event::Ping { endpoint } => Self::Ping {
                endpoint_id: *endpoint,
            },
        })
    }
}

/// The delivery's `data` as JSON (see [`Payload::of`]).
pub fn payload(event: &Event, subjects: &Subjects) -> Option<serde_json::Value> {
    serde_json::to_value(Payload::of(event, subjects)?).ok()
}
