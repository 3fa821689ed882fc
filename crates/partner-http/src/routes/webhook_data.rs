//! The `data` of a webhook delivery, written with the API's own answer types: a delivered lead,
//! order or payout is byte for byte what the listings show (an order as a non-admin sees it).
//! The delivery worker gets this through the domain's [`DataFormat`] port.

use partner_domain::kernel::ids::EndpointId;
use partner_domain::webhook::Payload;
use partner_domain::webhook::ports::DataFormat;
use serde::Serialize;

use super::leads::LeadOut;
use super::orders::OrderOut;
use super::payouts::PayoutOut;

/// The contract's webhook payloads, by kind of event.
#[derive(Serialize)]
#[serde(untagged, rename_all_fields = "camelCase")]
pub(crate) enum DataOut<'a> {
    LeadCreated {
        lead: LeadOut<'a>,
    },
    LeadEnriched {
        lead: LeadOut<'a>,
        previous_phone: &'a str,
        current_phone: &'a str,
    },
    OrderCreated {
        source: &'a str,
        order: OrderOut<'a>,
    },
    PayoutCreated {
        payout: PayoutOut<'a>,
    },
    Ping {
        endpoint_id: EndpointId,
    },
}

impl<'a> From<&Payload<'a>> for DataOut<'a> {
    fn from(p: &Payload<'a>) -> Self {
        match *p {
            Payload::LeadCreated { lead } => Self::LeadCreated {
                lead: LeadOut::from(lead),
            },
            Payload::LeadEnriched {
                lead,
                previous_phone,
                current_phone,
            } => Self::LeadEnriched {
                lead: LeadOut::from(lead),
                previous_phone,
                current_phone,
            },
            Payload::OrderCreated { source, order } => Self::OrderCreated {
                source,
                order: OrderOut::listed(order, false),
            },
            Payload::PayoutCreated { payout } => Self::PayoutCreated {
                payout: PayoutOut::from(payout),
            },
            Payload::Ping { endpoint_id } => Self::Ping { endpoint_id },
        }
    }
}

/// [`DataFormat`] with the API's answer types.
#[derive(Debug, Clone, Copy, Default)]
pub struct WebhookData;

impl DataFormat for WebhookData {
    fn data(&self, payload: &Payload<'_>) -> serde_json::Value {
        // Serializing these types cannot fail: every key is a string, every value plain data.
        serde_json::to_value(DataOut::from(payload)).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]

    use partner_domain::events::{Event, EventKind};
    use partner_domain::kernel::ids::{LeadId, PayoutId};
    use partner_domain::kernel::values::{Money, PartnerId};
    use partner_domain::lead::{Lead, LeadParts, Origin, TestFlag};
    use partner_domain::order::{Order, OrderListing, OrderParts};
    use partner_domain::payout::{NewPayout, Payout};
    use partner_domain::webhook::Subjects;
    use serde_json::json;
    use time::macros::{date, datetime};
    use uuid::Uuid;

    use super::*;

    fn acme() -> PartnerId {
        PartnerId::parse("acme").expect("id")
    }

    fn subjects() -> Subjects {
        let lead = Lead::new(LeadParts {
            id: LeadId::from_uuid(Uuid::from_u128(1)),
            partner_id: acme(),
            sub_id: None,
            first_name: "Ann".into(),
            last_name: "Lee".into(),
            email: "ann@x.co".into(),
            email_consent: true,
            phone: Some("555-1".into()),
            sms_consent: false,
            origin: Origin::parse("managed-website").expect("origin"),
            location: "Austin".into(),
            question_id: None,
            test: TestFlag::REAL,
            created_at: datetime!(2026-11-21 10:00 UTC),
            updated_at: datetime!(2026-11-21 10:05 UTC),
        })
        .expect("a valid lead");
        let order = OrderListing {
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
        };
        let payout = Payout::new(
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
        );
        Subjects {
            leads: [(lead.id(), lead)].into(),
            orders: [("o-1".to_owned(), order)].into(),
            payouts: [(payout.id(), payout)].into(),
            unreadable: Default::default(),
        }
    }

    /// The lead as the listing shows it (the phone masked: no SMS consent).
    fn lead_json() -> serde_json::Value {
        json!({ "id": Uuid::from_u128(1), "partnerId": "acme", "subId": "", "firstName": "Ann",
            "lastName": "Lee", "email": "ann@x.co", "phone": "No Consent", "origin": "managed-website",
            "location": "Austin", "questionId": null, "createdAt": "2026-11-21T10:00:00.000Z",
            "updatedAt": "2026-11-21T10:05:00.000Z", "isTest": false, "testSource": null })
    }

    #[test]
    fn every_kind_has_its_contract_payload() {
        let lead = LeadId::from_uuid(Uuid::from_u128(1));
        let cases = [
            (Event::LeadCreated { lead }, json!({ "lead": lead_json() })),
            (
                Event::LeadEnriched {
                    lead,
                    previous_phone: String::new(),
                    current_phone: "No Consent".into(),
                },
                json!({ "lead": lead_json(), "previousPhone": "", "currentPhone": "No Consent" }),
            ),
            (
                Event::OrderCreated {
                    order: "o-1".into(),
                    source: "shop".into(),
                },
                json!({ "source": "shop", "order": { "orderId": "o-1",
                    "createdDate": "2026-11-21T09:00:00.000Z", "subAccount": "Desk A",
                    "product": "Tirzepatide", "amount": 499, "commission": 1, "status": "shipped",
                    "isTest": false } }),
            ),
            (
                Event::PayoutCreated {
                    payout: PayoutId::from_uuid(Uuid::from_u128(3)),
                },
                json!({ "payout": { "recordId": Uuid::from_u128(3), "email": "ops@acme.test",
                    "createdAt": "2026-11-21", "payoutDate": "2026-11-30", "payoutAmount": 1234.5,
                    "status": "paid" } }),
            ),
            (
                Event::Ping {
                    endpoint: EndpointId::from_uuid(Uuid::from_u128(4)),
                },
                json!({ "endpointId": Uuid::from_u128(4) }),
            ),
        ];
        let kinds: Vec<EventKind> = cases.iter().map(|(e, _)| e.kind()).collect();
        assert_eq!(kinds, EventKind::DELIVERED, "every kind is covered");
        let subjects = subjects();
        for (event, expected) in cases {
            let payload = Payload::of(&event, &subjects).expect("its subject exists");
            let data = WebhookData.data(&payload);
            assert_eq!(data, expected, "{event:?}");
            assert_eq!(
                serde_json::to_string(&data).expect("json"),
                serde_json::to_string(&expected).expect("json"),
                "the same bytes, keys in the contract's order"
            );
        }
    }
}
