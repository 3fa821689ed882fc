//! The partner document's OpenAPI 3.1 `webhooks` section (issue 28): one entry per event a
//! delivery can carry (the four events and `ping`), each a `POST` to the partner's endpoint with
//! its headers and its body, so generated clients have types for delivery bodies.
//!
//! utoipa derives operations only from handlers, and these requests are ones the service sends,
//! so the section is written here as JSON (the document's own words) and parsed into utoipa's
//! types. The bodies' `data` reuse the answer schemas (`Lead`, `Order`, `Payout`): a delivery's
//! records are written by the same answer types (`webhook_data.rs`). Checked against real
//! deliveries by `tests/api/webhook_schemas.rs`.

use serde_json::{Value, json};
use utoipa::openapi::path::Paths;
use utoipa::openapi::{OpenApi as Document, RefOr, Schema};

/// The events: name, schema name, what fires it, and the schema of its `data`.
fn events() -> [(&'static str, &'static str, &'static str, Value); 5] {
    let lead = json!({ "$ref": "#/components/schemas/Lead" });
    [
        (
            "lead.created",
            "WebhookLeadCreated",
            "A lead was captured through a webhook-enabled source (every lead `origin` except \
             `headless_intake`). With `leadCreatedDelay`, sent that long after, built from the \
             lead as it is then.",
            json!({ "type": "object", "required": ["lead"], "properties": { "lead": lead } }),
        ),
        (
            "lead.enriched",
            "WebhookLeadEnriched",
            "Such a lead's phone was filled in or changed.",
            json!({
                "type": "object", "required": ["lead", "previousPhone", "currentPhone"],
                "properties": {
                    "lead": lead,
                    "previousPhone": { "type": "string", "description": "The phone before the change (`\"\"` when there was none)" },
                    "currentPhone": { "type": "string" }
                }
            }),
        ),
        (
            "order.created",
            "WebhookOrderCreated",
            "An order was attributed to the partner.",
            json!({
                "type": "object", "required": ["source", "order"],
                "properties": {
                    "source": { "type": "string", "description": "Where the order was placed (as ingested)" },
                    "order": { "$ref": "#/components/schemas/Order" }
                }
            }),
        ),
        (
            "payout.created",
            "WebhookPayoutCreated",
            "A payout was recorded for the partner.",
            json!({
                "type": "object", "required": ["payout"],
                "properties": { "payout": { "$ref": "#/components/schemas/Payout" } }
            }),
        ),
        (
            "ping",
            "WebhookPing",
            "Sent only when asked for: `POST /api/v1/webhook-endpoints/{id}/test`.",
            json!({
                "type": "object", "required": ["endpointId"],
                "properties": { "endpointId": { "type": "string", "format": "uuid" } }
            }),
        ),
    ]
}

/// The headers every delivery carries (`required`), and those a signing secret adds.
fn headers(event: &str) -> Value {
    let header = |name: &str, required: bool, schema: Value, description: &str| json!({ "name": name, "in": "header", "required": required, "schema": schema, "description": description });
    let string = json!({ "type": "string" });
    let uuid = json!({ "type": "string", "format": "uuid" });
    json!([
        header(
            "X-Partner-Event",
            true,
            json!({ "type": "string", "enum": [event] }),
            "The event's name"
        ),
        header(
            "X-Partner-Delivery",
            true,
            uuid.clone(),
            "The delivery's id, equal to the body's `id`: the same on every retry and resend (process each once)"
        ),
        header(
            "X-Partner-Event-Id",
            true,
            uuid.clone(),
            "The event's id: the same on every delivery of it, and its `id` in the events feed"
        ),
        header(
            "X-Partner-Signature",
            false,
            json!({ "type": "string", "pattern": "^t=[0-9]+(,v1=[0-9a-f]{64})+$" }),
            "With a secret: `t=<unix seconds>,v1=<hex HMAC-SHA256 of \"<t>.<raw body>\">` keyed with the whole \
             secret; two `v1` during a rotation's overlap (Stripe's scheme, docs/webhooks.md)"
        ),
        header(
            "webhook-id",
            false,
            uuid,
            "Standard Webhooks v1.0.0, with a `whsec_<base64>` secret: the delivery's id"
        ),
        header(
            "webhook-timestamp",
            false,
            json!({ "type": "string", "pattern": "^[0-9]+$" }),
            "Standard Webhooks: the same `t` as `X-Partner-Signature`"
        ),
        header(
            "webhook-signature",
            false,
            string,
            "Standard Webhooks: `v1,<base64 HMAC-SHA256 of \"<webhook-id>.<webhook-timestamp>.<raw body>\">`, \
             space-separated values during a rotation's overlap"
        ),
    ])
}

/// The body of the delivery of `event` whose `data` is `data`.
fn body(event: &str, description: &str, data: Value) -> Value {
    json!({
        "type": "object",
        "description": description,
        "required": ["id", "event", "created_at", "data"],
        "additionalProperties": false,
        "properties": {
            "id": { "type": "string", "format": "uuid", "description": "The delivery's id (`X-Partner-Delivery`)" },
            "event": { "type": "string", "enum": [event] },
            "created_at": { "type": "string", "format": "date-time", "example": "2026-11-23T10:00:00.000Z" },
            "data": data
        }
    })
}

fn webhook(event: &str, schema: &str, description: &str) -> Value {
    json!({
        "post": {
            "operationId": format!("webhook_{}", event.replace('.', "_")),
            "tags": ["webhooks"],
            "summary": format!("The `{event}` delivery"),
            "description": format!("{description} Sent to each enabled endpoint subscribed to it \
                (`ping`: to the endpoint asked), retried until a `2xx` (docs/webhooks.md)."),
            "security": [],
            "parameters": headers(event),
            "requestBody": {
                "required": true,
                "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{schema}") } } }
            },
            "responses": {
                "2XX": { "description": "Received: the delivery ends" },
                "410": { "description": "Gone: the endpoint is disabled at once" },
                "default": { "description": "Anything else (or no answer within 10 s): attempted again later" }
            }
        }
    })
}

/// Adds the `webhooks` section and its body schemas to `doc`. The JSON above is constant, so the
/// parses cannot fail at run time; a unit test checks them.
pub(super) fn add(doc: &mut Document) {
    let mut paths = serde_json::Map::new();
    let components = doc.components.get_or_insert_with(Default::default);
    for (event, schema, description, data) in events() {
        if let Ok(s) = serde_json::from_value::<Schema>(body(event, description, data)) {
            components.schemas.insert(schema.to_owned(), RefOr::T(s));
        }
        paths.insert(event.to_owned(), webhook(event, schema, description));
    }
    doc.webhooks = serde_json::from_value::<Paths>(Value::Object(paths)).ok();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// utoipa's types drop what they do not know (`const`, …): each part must come back whole.
    #[test]
    fn every_webhook_and_body_parses_and_keeps_every_word() {
        for (event, schema, description, data) in events() {
            let b = body(event, description, data);
            let parsed = serde_json::from_value::<Schema>(b.clone()).expect(schema);
            assert_eq!(serde_json::to_value(parsed).expect("json"), b, "{schema}");
            let w = webhook(event, schema, description);
            let parsed =
                serde_json::from_value::<utoipa::openapi::PathItem>(w.clone()).expect(event);
            assert_eq!(serde_json::to_value(parsed).expect("json"), w, "{event}");
        }
        let mut doc = Document::default();
        add(&mut doc);
        assert_eq!(doc.webhooks.map(|w| w.paths.len()), Some(5));
    }
}
