//! Domain events: what changed, recorded in the same transaction as the change (the outbox).
//!
//! This module is the one home of the event model. [`EventKind`] knows each kind's wire name,
//! which record it is about ([`SubjectKind`]) and how its webhook `data` is built from that record
//! ([`EventKind::payload`]); [`DomainEvent`] is what a service emits. Payloads are built when sent,
//! from the subject as it is then, so a delayed `lead.created` carries the phone supplied during
//! the delay. Adding a kind is an edit here (the compiler then points at every `match`) plus, for
//! a new kind of subject, one batch query in the store's `subjects`.

use serde::{Serialize, Serializer};
use serde_json::{Value, json};

use crate::kernel::ids::{EndpointId, PayoutId};
use crate::kernel::values::PartnerId;
use crate::lead::Lead;
use crate::order::OrderListing;
use crate::payout::Payout;

/// The contract's event kinds, and `ping`: a test delivery sent only when a partner asks for one
/// (extensions.md §1), which no endpoint subscribes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventKind {
    LeadCreated,
    LeadEnriched,
    OrderCreated,
    PayoutCreated,
    Ping,
}

/// The kind of record an event is about: how its subject id is looked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SubjectKind {
    Lead,
    Order,
    Payout,
    /// A `ping`'s subject: the endpoint it tests (nothing to look up).
    Endpoint,
}

/// A subject as read when its delivery is sent.
#[derive(Debug, Clone, PartialEq)]
pub enum Subject {
    Lead(Lead),
    Order(OrderListing),
    Payout(Payout),
    Endpoint(EndpointId),
}

impl EventKind {
    pub const ALL: [EventKind; 4] = [
        Self::LeadCreated,
        Self::LeadEnriched,
        Self::OrderCreated,
        Self::PayoutCreated,
    ];

    /// One of the four kinds an endpoint subscribes to (never `ping`).
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// Any kind a delivery may carry: the four, or `ping`.
    pub fn parse_delivered(s: &str) -> Option<Self> {
        if s == Self::Ping.as_str() {
            Some(Self::Ping)
        } else {
            Self::parse(s)
        }
    }

    /// The name on the wire (`X-Partner-Event`, the body's `event`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::LeadCreated => "lead.created",
            Self::LeadEnriched => "lead.enriched",
            Self::OrderCreated => "order.created",
            Self::PayoutCreated => "payout.created",
            Self::Ping => "ping",
        }
    }

    /// Whether a delivery of this kind waits for its endpoint's `leadCreatedDelaySeconds`
    /// before its first attempt (spec: the delay applies to `lead.created` only).
    pub fn honours_endpoint_delay(self) -> bool {
        matches!(self, Self::LeadCreated)
    }

    pub fn subject_kind(self) -> SubjectKind {
        match self {
            Self::LeadCreated | Self::LeadEnriched => SubjectKind::Lead,
            Self::OrderCreated => SubjectKind::Order,
            Self::PayoutCreated => SubjectKind::Payout,
            Self::Ping => SubjectKind::Endpoint,
        }
    }

    /// The delivery's `data`, from the subject as it is now and the event's `extra` (what the
    /// subject cannot tell later). `None` when the subject is of another kind than this event's.
    pub fn payload(self, subject: &Subject, extra: &Value) -> Option<Value> {
        let field = |k: &str| extra.get(k).cloned().unwrap_or(Value::Null);
        Some(match (self, subject) {
            (Self::LeadCreated, Subject::Lead(l)) => json!({ "lead": l.row() }),
            (Self::LeadEnriched, Subject::Lead(l)) => json!({
                "lead": l.row(),
                "previousPhone": field("previousPhone"),
                "currentPhone": field("currentPhone"),
            }),
            (Self::OrderCreated, Subject::Order(o)) => json!({
                "source": field("source"),
                "order": o.order.render(&o.sub_account, false),
            }),
            (Self::PayoutCreated, Subject::Payout(p)) => json!({ "payout": p.row() }),
            (Self::Ping, Subject::Endpoint(id)) => json!({ "endpointId": id }),
            _ => return None,
        })
    }
}

impl Serialize for EventKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// One event, as a service emits it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DomainEvent {
    LeadCreated {
        partner_id: PartnerId,
        lead_id: crate::kernel::ids::LeadId,
    },
    /// `previous_phone` / `current_phone` are already consent-rendered.
    LeadEnriched {
        partner_id: PartnerId,
        lead_id: crate::kernel::ids::LeadId,
        previous_phone: String,
        current_phone: String,
    },
    OrderCreated {
        partner_id: PartnerId,
        order_id: String,
        source: String,
    },
    PayoutCreated {
        partner_id: PartnerId,
        payout_id: PayoutId,
    },
}

impl DomainEvent {
    pub fn kind(&self) -> EventKind {
        match self {
            Self::LeadCreated { .. } => EventKind::LeadCreated,
            Self::LeadEnriched { .. } => EventKind::LeadEnriched,
            Self::OrderCreated { .. } => EventKind::OrderCreated,
            Self::PayoutCreated { .. } => EventKind::PayoutCreated,
        }
    }

    pub fn partner_id(&self) -> &PartnerId {
        match self {
            Self::LeadCreated { partner_id, .. }
            | Self::LeadEnriched { partner_id, .. }
            | Self::OrderCreated { partner_id, .. }
            | Self::PayoutCreated { partner_id, .. } => partner_id,
        }
    }

    /// The id of the record the event is about (looked up by [`EventKind::subject_kind`]).
    pub fn subject(&self) -> String {
        match self {
            Self::LeadCreated { lead_id, .. } | Self::LeadEnriched { lead_id, .. } => {
                lead_id.to_string()
            }
            Self::OrderCreated { order_id, .. } => order_id.clone(),
            Self::PayoutCreated { payout_id, .. } => payout_id.to_string(),
        }
    }

    /// What cannot be rebuilt from the subject later (the phone before enrichment, the order's
    /// source).
    pub fn extra(&self) -> Value {
        match self {
            Self::LeadEnriched {
                previous_phone,
                current_phone,
                ..
            } => {
                json!({ "previousPhone": previous_phone, "currentPhone": current_phone })
            }
            Self::OrderCreated { source, .. } => json!({ "source": source }),
            Self::LeadCreated { .. } | Self::PayoutCreated { .. } => json!({}),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_its_wire_name() {
        for k in EventKind::ALL {
            assert_eq!(EventKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(
            EventKind::parse("ping"),
            None,
            "no endpoint subscribes to ping"
        );
        assert_eq!(EventKind::parse_delivered("ping"), Some(EventKind::Ping));
        assert_eq!(
            EventKind::parse_delivered("order.created"),
            Some(EventKind::OrderCreated)
        );
        assert_eq!(EventKind::parse("Lead.Created"), None);
    }

    #[test]
    fn events_name_their_kind_and_subject() {
        let p = PartnerId::parse("acme").expect("id");
        let id = uuid::Uuid::nil();
        let e = DomainEvent::OrderCreated {
            partner_id: p.clone(),
            order_id: "o-1".into(),
            source: "shop".into(),
        };
        assert_eq!(e.kind(), EventKind::OrderCreated);
        assert_eq!(e.kind().subject_kind(), SubjectKind::Order);
        assert_eq!(e.subject(), "o-1");
        assert_eq!(e.extra(), json!({ "source": "shop" }));
        let l = DomainEvent::LeadCreated {
            partner_id: p,
            lead_id: crate::kernel::ids::LeadId::from_uuid(id),
        };
        assert_eq!(l.kind().subject_kind(), SubjectKind::Lead);
        assert_eq!(l.subject(), id.to_string());
    }
}
