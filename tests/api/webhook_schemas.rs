//! The OpenAPI document's `webhooks` section (issue 28) against real deliveries: one of each
//! event and a `ping`, captured by a receiver, are checked by `tests/verify/webhook_bodies.py`
//! (JSON Schema 2020-12 with `.ci/venv`'s `jsonschema`): bodies, required headers, header values.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::lead_body;
use crate::receiver::{Received, Receiver};
use crate::standard_webhooks::run_python;
use crate::webhook_control::ping;

fn delivery(r: &Received) -> Value {
    let headers: serde_json::Map<String, Value> = r
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    json!({ "body": BASE64.encode(&r.body), "headers": headers })
}

#[tokio::test]
async fn real_deliveries_of_every_event_match_the_documents_webhooks_section() {
    let rx = Receiver::start().await;
    let app = rx.app(|_| {}).await;
    let s = app.seed("acme", false).await;
    let ep = app
        .create_webhook_endpoint(
            &s.token,
            &json!({ "url": rx.url, "secret": true,
                "events": ["lead.created", "lead.enriched", "order.created", "payout.created"] }),
        )
        .await;
    let lead = app
        .ingest_lead(&lead_body("acme", json!({ "phone": null })))
        .await;
    let id = lead["id"].as_str().expect("id");
    app.internal(Method::PATCH, &format!("/leads/{id}"))
        .json(&json!({ "phone": "+1 555 0101" }))
        .send()
        .await
        .expect("send");
    app.internal(Method::POST, "/orders")
        .json(&json!({ "orderId": "W-1", "partnerId": "acme", "createdDate": "2026-11-20T10:00:00.000Z",
            "product": "P", "amount": 10, "commission": 1.5, "status": "shipped", "isTest": false,
            "source": "pharmacy", "customerName": "Ann" }))
        .send()
        .await
        .expect("send");
    app.internal(Method::POST, "/payouts")
        .json(&json!({ "partnerId": "acme", "payoutDate": "2026-11-30", "payoutAmount": 99.5, "status": "paid" }))
        .send()
        .await
        .expect("send");
    rx.wait_for(4).await;
    ping(&app, &s.token, &rx, ep["id"].as_str().expect("id")).await;
    let got = rx.received();
    let mut events: Vec<&str> = got
        .iter()
        .filter_map(|r| r.header("x-partner-event"))
        .collect();
    events.sort_unstable();
    assert_eq!(
        events,
        [
            "lead.created",
            "lead.enriched",
            "order.created",
            "payout.created",
            "ping"
        ]
    );
    let document =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi/partner.json");
    run_python(
        "webhook_bodies.py",
        &json!({ "document": document, "deliveries": got.iter().map(delivery).collect::<Vec<_>>() }),
        "a delivery does not match the document's webhooks section",
    )
    .await;
}
