//! Domain events: what changed, recorded in the same transaction as the change (the outbox) and
//! delivered as webhooks.
//!
//! This module is the one home of the event model, and it names no aggregate's entity (it sits
//! beside the kernel, below the aggregates that publish events):
//! - [`EventKind`], declared once (`kind.rs`): the wire names, [`EventKind::SUBSCRIBABLE`],
//!   [`EventKind::DELIVERED`] and every list of kinds come from that declaration;
//! - [`Event`]: what each kind says, typed: the record it is about, by id, and what that record
//!   cannot tell later (the phone before an enrichment, an order's source);
//! - [`DomainEvent`]: an event of a partner and who receives it, as a service publishes it
//!   through an [`Outbox`] in its transaction.
//!
//! A delivery's `data` is rendered when it is sent, from its record as it is then (so a delayed
//! `lead.created` carries the phone supplied during the delay): `webhook::payload`, above the
//! aggregates, does that with a full `match` over [`Event`].
//!
//! Adding a kind is a line in `event_kinds!` and a variant of [`Event`]; the compiler then points
//! at every `match` that must say what the kind means (its delay, its stored form, its subject
//! lookup and payload, and the store's query for a new kind of record); see `docs/architecture.md`.
//!
//! ```
//! use partner_domain::events::{Event, EventKind};
//! use partner_domain::kernel::ids::LeadId;
//! use partner_domain::uuid::Uuid;
//!
//! let event = Event::LeadCreated { lead: LeadId::from_uuid(Uuid::from_u128(7)) };
//! assert_eq!(event.kind(), EventKind::LeadCreated);
//! // The outbox's stored form reads back as the same event.
//! assert_eq!(Event::from_stored(&event.to_stored()), Some(event));
//! ```

mod kind;
mod outbox;

pub use kind::EventKind;
pub use outbox::{Outbox, Requeue, Requeued};

use serde_json::{Value, json};

use crate::kernel::ids::{DeliveryId, EndpointId, LeadId, PayoutId};
use crate::kernel::values::PartnerId;

/// What an event says, by kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A lead was created (`lead.created`).
    LeadCreated {
        /// The lead.
        lead: LeadId,
    },
    /// A lead's phone was supplied or changed (`lead.enriched`). The phones are already rendered
    /// with the lead's consent after the update.
    LeadEnriched {
        /// The lead.
        lead: LeadId,
        /// The phone before the update.
        previous_phone: String,
        /// The phone after it.
        current_phone: String,
    },
    /// An order was ingested (`order.created`).
    OrderCreated {
        /// The order's id.
        order: String,
        /// The order's `source`, as ingested.
        source: String,
    },
    /// A payout was recorded (`payout.created`).
    PayoutCreated {
        /// The payout.
        payout: PayoutId,
    },
    /// A test delivery (`ping`); its subject is the endpoint it tests.
    Ping {
        /// The endpoint tested.
        endpoint: EndpointId,
    },
}

/// An event as the outbox stores it: its kind, the id of its record as text, and what the record
/// cannot tell later as a JSON object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEvent {
    /// The event's kind.
    pub kind: EventKind,
    /// The id of the record it is about, as text.
    pub subject: String,
    /// What the record cannot tell later, a JSON object.
    pub extra: Value,
}

impl Event {
    /// The event's kind.
    pub fn kind(&self) -> EventKind {
        match self {
            Self::LeadCreated { .. } => EventKind::LeadCreated,
            Self::LeadEnriched { .. } => EventKind::LeadEnriched,
            Self::OrderCreated { .. } => EventKind::OrderCreated,
            Self::PayoutCreated { .. } => EventKind::PayoutCreated,
            Self::Ping { .. } => EventKind::Ping,
        }
    }

    /// The event as the outbox stores it.
    pub fn to_stored(&self) -> StoredEvent {
        let (subject, extra) = match self {
            Self::LeadCreated { lead } => (lead.to_string(), json!({})),
            Self::LeadEnriched {
                lead,
                previous_phone,
                current_phone,
            } => (
                lead.to_string(),
                json!({ "previousPhone": previous_phone, "currentPhone": current_phone }),
            ),
            Self::OrderCreated { order, source } => (order.clone(), json!({ "source": source })),
            Self::PayoutCreated { payout } => (payout.to_string(), json!({})),
            Self::Ping { endpoint } => (endpoint.to_string(), json!({})),
        };
        StoredEvent {
            kind: self.kind(),
            subject,
            extra,
        }
    }

    /// The event an outbox row holds; `None` when the row is not one this model writes.
    pub fn from_stored(stored: &StoredEvent) -> Option<Self> {
        let StoredEvent {
            kind,
            subject,
            extra,
        } = stored;
        let text = |field: &str| extra.get(field)?.as_str().map(str::to_owned);
        Some(match kind {
            EventKind::LeadCreated => Self::LeadCreated {
                lead: LeadId::parse(subject).ok()?,
            },
            EventKind::LeadEnriched => Self::LeadEnriched {
                lead: LeadId::parse(subject).ok()?,
                previous_phone: text("previousPhone")?,
                current_phone: text("currentPhone")?,
            },
            EventKind::OrderCreated => Self::OrderCreated {
                order: subject.clone(),
                source: text("source")?,
            },
            EventKind::PayoutCreated => Self::PayoutCreated {
                payout: PayoutId::parse(subject).ok()?,
            },
            EventKind::Ping => Self::Ping {
                endpoint: EndpointId::parse(subject).ok()?,
            },
        })
    }
}

/// Who receives an event's deliveries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recipients {
    /// One delivery per enabled endpoint of the event's partner subscribed to its kind.
    Subscribers,
    /// One delivery, with this id, to this endpoint of the event's partner whatever it
    /// subscribes to (a `ping`).
    Endpoint {
        /// The endpoint.
        endpoint: EndpointId,
        /// The delivery's id.
        delivery: DeliveryId,
    },
}

/// An event of a partner, as a service publishes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainEvent {
    /// The partner whose event it is.
    pub partner_id: PartnerId,
    /// What it says.
    pub event: Event,
    /// Who receives its deliveries.
    pub to: Recipients,
}

impl DomainEvent {
    /// An event for the partner's endpoints subscribed to its kind.
    pub fn new(partner_id: PartnerId, event: Event) -> Self {
        Self {
            partner_id,
            event,
            to: Recipients::Subscribers,
        }
    }

    /// A `ping` of the partner's `endpoint`, delivered as `delivery`.
    pub fn ping(partner_id: PartnerId, endpoint: EndpointId, delivery: DeliveryId) -> Self {
        Self {
            partner_id,
            event: Event::Ping { endpoint },
            to: Recipients::Endpoint { endpoint, delivery },
        }
    }

    /// The event's kind.
    pub fn kind(&self) -> EventKind {
        self.event.kind()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn every_event() -> Vec<Event> {
        let id = Uuid::from_u128(7);
        vec![
            Event::LeadCreated {
                lead: LeadId::from_uuid(id),
            },
            Event::LeadEnriched {
                lead: LeadId::from_uuid(id),
                previous_phone: String::new(),
                current_phone: "555-1".into(),
            },
            Event::OrderCreated {
                order: "o-1".into(),
                source: "shop".into(),
            },
            Event::PayoutCreated {
                payout: PayoutId::from_uuid(id),
            },
            Event::Ping {
                endpoint: EndpointId::from_uuid(id),
            },
        ]
    }

    #[test]
    fn every_event_round_trips_its_stored_form() {
        let events = every_event();
        let kinds: Vec<EventKind> = events.iter().map(Event::kind).collect();
        assert_eq!(kinds, EventKind::DELIVERED, "one event of each kind");
        for e in events {
            assert_eq!(Event::from_stored(&e.to_stored()), Some(e.clone()), "{e:?}");
        }
    }

    #[test]
    fn stored_forms_are_those_of_the_outbox_rows() {
        let e = Event::OrderCreated {
            order: "o-1".into(),
            source: "shop".into(),
        };
        assert_eq!(
            e.to_stored(),
            StoredEvent {
                kind: EventKind::OrderCreated,
                subject: "o-1".into(),
                extra: json!({ "source": "shop" }),
            }
        );
        let enriched = Event::LeadEnriched {
            lead: LeadId::from_uuid(Uuid::nil()),
            previous_phone: "No Consent".into(),
            current_phone: "No Consent".into(),
        };
        assert_eq!(
            enriched.to_stored().extra,
            json!({ "previousPhone": "No Consent", "currentPhone": "No Consent" })
        );
        // A row this model does not write is refused, not guessed at.
        let mut bad = enriched.to_stored();
        bad.extra = json!({});
        assert_eq!(Event::from_stored(&bad), None);
        bad = e.to_stored();
        bad.kind = EventKind::PayoutCreated;
        assert_eq!(Event::from_stored(&bad), None);
    }

    #[test]
    fn a_ping_goes_to_its_endpoint_only() {
        let p = PartnerId::parse("acme").expect("id");
        let endpoint = EndpointId::from_uuid(Uuid::from_u128(1));
        let delivery = DeliveryId::from_uuid(Uuid::from_u128(2));
        let ping = DomainEvent::ping(p.clone(), endpoint, delivery);
        assert_eq!(ping.kind(), EventKind::Ping);
        assert_eq!(ping.to, Recipients::Endpoint { endpoint, delivery });
        let created = DomainEvent::new(
            p,
            Event::PayoutCreated {
                payout: PayoutId::from_uuid(Uuid::nil()),
            },
        );
        assert_eq!(created.to, Recipients::Subscribers);
    }
}
