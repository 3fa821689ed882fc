//! The rules over several fields of a body that a schema can state (a test flag with its origin,
//! an `order_completed` with its product and amount, `defaultLang` among `enabledLangs`, a lead
//! patch naming a field), the order id's reserved prefix, and the token request's optional body.

#[allow(clippy::wildcard_imports)]
use super::*;

/// A string that also does not match `not` (`not`, which utoipa's model lacks: the holder's only
/// extension key).
fn string_not(not: Value) -> Schema {
    let mut holder = match schema(json!({ "type": "string" })) {
        Schema::Object(o) => o,
        other => return other,
    };
    holder.extensions = Some(Extensions::from_iter([("not", not)]));
    Schema::Object(holder)
}

/// `parse_order_id`: 1-100 visible ASCII characters, not starting with the simulated orders'
/// prefix.
pub(super) fn order_id() -> Schema {
    Schema::AllOf(
        AllOfBuilder::new()
            .schema_type(SchemaType::Type(Type::String))
            .description(Some(
                "1-100 visible ASCII characters; not starting with `TEST-SIM-` (reserved for \
                 simulated orders)",
            ))
            .item(schema(
                json!({ "type": "string", "pattern": "^[!-~]{1,100}$" }),
            ))
            .item(string_not(
                json!({ "pattern": format!("^{SIMULATED_PREFIX}") }),
            ))
            .build(),
    )
}

/// `TestFlag::parse`: a real lead (`isTest` false, null or absent, and no `testSource`), or a
/// test row of a `headless_intake` lead with its source.
pub(super) fn test_flag() -> Schema {
    Schema::AnyOf(
        AnyOfBuilder::new()
            .description(Some(
                "A real lead (`isTest` false, null or absent, `testSource` null or absent), or a \
                 test row: `isTest` true with a `testSource`, origin `headless_intake`",
            ))
            .item(schema(json!({
                "type": "object",
                "properties": {
                    "isTest": { "type": ["boolean", "null"], "enum": [false, null] },
                    "testSource": { "type": "null" },
                },
            })))
            .item(schema(json!({
                "type": "object",
                "required": ["isTest", "testSource", "origin"],
                "properties": {
                    "isTest": { "type": "boolean", "enum": [true] },
                    "testSource": { "type": "string", "enum": ["provider_test_mode", "simulation"] },
                    "origin": { "type": "string", "enum": [HEADLESS_INTAKE] },
                },
            })))
            .build(),
    )
}

/// `NewAnalyticsEvent::checked`: `order_completed` needs a non-blank `product` and an `amount`.
pub(super) fn completed_order_has_product_and_amount() -> Schema {
    let mut other_event = match schema(json!({ "type": "object" })) {
        Schema::Object(o) => o,
        other => return other,
    };
    other_event.properties.insert(
        "event".to_owned(),
        RefOr::T(string_not(json!({ "enum": [ORDER_COMPLETED] }))),
    );
    Schema::AnyOf(
        AnyOfBuilder::new()
            .description(Some(
                "`order_completed` needs a non-blank `product` and an `amount`",
            ))
            .item(Schema::Object(other_event))
            .item(schema(json!({
                "type": "object",
                "required": ["product", "amount"],
                "properties": {
                    "product": { "type": "string", "pattern": text_pattern(1, 200) },
                    "amount": { "type": "number" },
                },
            })))
            .build(),
    )
}

/// `defaultLang` must be one of `enabledLangs`: one branch per language, the array containing
/// it (`contains`, which utoipa's model lacks: added as the array's only extension key, so the
/// output stays deterministic).
pub(super) fn default_lang_among_enabled() -> Schema {
    let mut any = AnyOfBuilder::new();
    for lang in ["en", "es"] {
        let mut enabled = match schema(json!({ "type": "array", "items": enum_ref("Lang") })) {
            Schema::Array(a) => a,
            _ => continue,
        };
        enabled.extensions = Some(Extensions::from_iter([(
            "contains",
            json!({ "const": lang }),
        )]));
        let mut branch = match schema(json!({
            "type": "object",
            "properties": { "defaultLang": { "type": "string", "enum": [lang] } },
        })) {
            Schema::Object(o) => o,
            _ => continue,
        };
        branch
            .properties
            .insert("enabledLangs".to_owned(), RefOr::T(Schema::Array(enabled)));
        any = any.item(Schema::Object(branch));
    }
    Schema::AnyOf(
        any.description(Some("`defaultLang` is one of `enabledLangs`"))
            .build(),
    )
}

/// A patch must change something: name `phone` (null clears it) or another field with a
/// non-null value.
pub(super) fn names_a_field() -> Schema {
    let mut any =
        AnyOfBuilder::new().item(schema(json!({ "type": "object", "required": ["phone"] })));
    for (name, t) in [
        ("smsConsent", "boolean"),
        ("email", "string"),
        ("emailConsent", "boolean"),
        ("firstName", "string"),
        ("lastName", "string"),
    ] {
        any = any.item(schema(json!({
            "type": "object",
            "required": [name],
            "properties": { name: { "type": t } },
        })));
    }
    Schema::AnyOf(
        any.description(Some(
            "At least one field: `phone` (null clears it), or another one not null",
        ))
        .build(),
    )
}

/// `schema` of component `name` and also `rule`.
pub(super) fn and(doc: &mut Document, name: &str, rule: Schema) {
    let Some(components) = doc.components.as_mut() else {
        return;
    };
    let Some(RefOr::T(base)) = components.schemas.remove(name) else {
        return;
    };
    components.schemas.insert(
        name.to_owned(),
        RefOr::T(Schema::AllOf(
            AllOfBuilder::new().item(base).item(rule).build(),
        )),
    );
}

/// The token body: optional, an object when sent (`null` is refused like any non-object).
pub(super) fn token_body(doc: &mut Document) {
    let Some(item) = doc.paths.paths.get_mut("/internal/v1/users/{id}/tokens") else {
        return;
    };
    let Some(op) = item.post.as_mut() else { return };
    let Some(RefOr::T(body)) = op.request_body.as_mut() else {
        return;
    };
    body.required = Some(Required::False);
    body.description = Some("Optional: without a body the token never expires".to_owned());
    let object = schema(json!({
        "type": "object",
        "properties": {
            "expiresAt": timestamp(true, "An RFC 3339 timestamp in the future; null or absent: never"),
        },
        "additionalProperties": false,
    }));
    for content in body.content.values_mut() {
        let RefOr::T(content) = content else { continue };
        content.schema = Some(RefOr::T(object.clone()));
    }
}
