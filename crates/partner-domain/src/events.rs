//! Domain events: what changed, recorded in the same transaction as the change (the outbox).
//! The webhook worker turns them into deliveries; payloads that must reflect the latest state
//! (a delayed `lead.created`) are built when sent, from the subject's id.

use serde_json::json;

use crate::values::PartnerId;

/// One event of the contract's four kinds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DomainEvent {
    LeadCreated {
        partner_id: PartnerId,
        lead_id: uuid::Uuid,
    },
    /// `previous_phone` / `current_phone` are already consent-rendered.
    LeadEnriched {
        partner_id: PartnerId,
        lead_id: uuid::Uuid,
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
        payout_id: uuid::Uuid,
    },
}

impl DomainEvent {
    /// The event name on the wire (`X-Partner-Event`).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::LeadCreated { .. } => "lead.created",
            Self::LeadEnriched { .. } => "lead.enriched",
            Self::OrderCreated { .. } => "order.created",
            Self::PayoutCreated { .. } => "payout.created",
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

    /// The id of the record the event is about.
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
    pub fn extra(&self) -> serde_json::Value {
        match self {
            Self::LeadEnriched {
                previous_phone,
                current_phone,
                ..
            } => {
                json!({ "previousPhone": previous_phone, "currentPhone": current_phone })
            }
            Self::OrderCreated { source, .. } => json!({ "source": source }),
            _ => json!({}),
        }
    }
}
