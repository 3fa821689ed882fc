//! The exact schemas of the query and path parameters whose rules the `params(...)` attributes
//! cannot state (an enum of integers, a comma-separated subset, a normalized code), so that every
//! rule the handlers enforce is in both documents and a fuzzer that trusts them is never refused
//! valid input (issue 26). Rules no schema can express (a cursor's integrity, a time window, a
//! sub-account that must exist) stay in the descriptions.

use serde_json::{Value, json};
use utoipa::openapi::{OpenApi as Document, RefOr, Schema, path::Operation};

/// Event names as the feed and the delivery filters spell them (the domain's `EventKind`).
const EVENT_NAMES: [&str; 4] = [
    "lead.created",
    "lead.enriched",
    "order.created",
    "payout.created",
];

/// A comma-separated list of `names` (duplicates are ignored by the handlers): `^(a|b)(,(a|b))*$`,
/// with `\s*` around each name where the handler trims them, and also empty where the handler
/// reads an empty value as absent.
fn subset(names: &[&str], trimmed: bool, empty: bool) -> Value {
    let one = names
        .iter()
        .map(|n| n.replace('.', "\\."))
        .collect::<Vec<_>>()
        .join("|");
    let ws = if trimmed { "\\s*" } else { "" };
    let list = format!("{ws}({one}){ws}(,{ws}({one}){ws})*");
    let pattern = if empty {
        format!("^({list})?$")
    } else {
        format!("^{list}$")
    };
    json!({ "type": "string", "pattern": pattern })
}

/// A partner id (`PartnerId`): 1-64 of A-Z, a-z, 0-9, `_` and `-`.
const PARTNER_ID: &str = "[A-Za-z0-9_-]{1,64}";
/// A sub-account number (`SubId`): 1-250 without leading zeros.
const SUB_ID: &str = "([1-9]|[1-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|250)";

/// The schema of parameter `name` on `path` (both documents), when the attribute's is too loose;
/// with a new description when the old one would mislead.
fn exact(path: &str, name: &str) -> Option<(Value, Option<&'static str>)> {
    let months = json!({ "type": "integer", "enum": [1, 3, 6, 12] });
    let uuid = json!({ "type": "string", "format": "uuid" });
    Some(match (name, path) {
        ("duration" | "m", _) => (months, None),
        ("status", p) if p.ends_with("care-services-coupons") => (
            subset(&["active", "redeemed", "void", "expired"], true, true),
            None,
        ),
        ("status", p) if p.contains("webhook-deliveries") => (
            subset(&["pending", "delivered", "failed"], false, false),
            None,
        ),
        ("types", _) => (subset(&EVENT_NAMES, true, false), None),
        ("event", _) => {
            let mut all = EVENT_NAMES.to_vec();
            all.push("ping");
            (json!({ "type": "string", "enum": all }), None)
        }
        ("endpointId", _) => (uuid, None),
        ("since", _) => (json!({ "type": "string", "format": "date-time" }), None),
        // The contract's reading (issue 26): only `true` includes test leads; any other value,
        // or none, lists real leads only. The server does not refuse other values.
        ("includeTest", _) => (
            json!({ "type": "string" }),
            Some(
                "`true` includes test leads; any other value (`false`, empty, anything else), \
                 or none, lists real leads only",
            ),
        ),
        ("orderId", _) => (
            json!({ "type": "string", "pattern": "^[!-~]{1,100}$", "minLength": 1, "maxLength": 100 }),
            None,
        ),
        ("code", p) if p.contains("care-services-coupons") => (
            json!({ "type": "string", "pattern": "^\\s*[- ]*([A-Za-z0-9][- ]*){12}\\s*$" }),
            None,
        ),
        // The catalog also takes a sub-account's code, `<partner>.<subId>`.
        ("partner_id", p) if p.starts_with("/api/{") => (
            json!({ "type": "string", "pattern": format!("^{PARTNER_ID}(\\.{SUB_ID})?$") }),
            None,
        ),
        ("partner_id", p)
            if p.starts_with("/embed/")
                || p.ends_with("care-services-coupons")
                || p.starts_with("/internal/v1/partners/{partner_id}") =>
        {
            (
                json!({ "type": "string", "pattern": format!("^{PARTNER_ID}$") }),
                None,
            )
        }
        _ => return None,
    })
}

fn tighten_operation(path: &str, op: &mut Operation) {
    for param in op.parameters.iter_mut().flatten() {
        let RefOr::T(param) = param else { continue };
        let Some((schema, description)) = exact(path, &param.name) else {
            continue;
        };
        if let Ok(schema) = serde_json::from_value::<Schema>(schema) {
            param.schema = Some(RefOr::T(schema));
        }
        if let Some(d) = description {
            param.description = Some(d.to_owned());
        }
    }
}

/// Applies [`exact`] to every operation of `doc`.
pub(super) fn tighten(doc: &mut Document) {
    for (path, item) in doc.paths.paths.iter_mut() {
        for op in [
            item.get.as_mut(),
            item.put.as_mut(),
            item.post.as_mut(),
            item.delete.as_mut(),
            item.patch.as_mut(),
        ]
        .into_iter()
        .flatten()
        {
            tighten_operation(path, op);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_schema_is_a_schema() {
        for (path, name) in [
            ("/api/v1/care-service-links", "duration"),
            ("/api/v1/care-services-coupons", "status"),
            ("/api/v1/webhook-deliveries", "status"),
            ("/api/v1/events", "types"),
            ("/api/v1/webhook-deliveries", "event"),
            ("/api/v1/leads", "includeTest"),
            ("/api/v1/orders/{orderId}", "orderId"),
            ("/api/v1/care-services-coupons/{code}", "code"),
        ] {
            let (schema, _) = exact(path, name).expect(name);
            serde_json::from_value::<Schema>(schema).expect(name);
        }
        assert_eq!(
            subset(&["a.b", "c"], true, false)["pattern"],
            json!("^\\s*(a\\.b|c)\\s*(,\\s*(a\\.b|c)\\s*)*$")
        );
        assert_eq!(
            subset(&["a", "c"], false, true)["pattern"],
            json!("^((a|c)(,(a|c))*)?$")
        );
    }
}
