//! The exact schemas of the operator API's request bodies (issue 26): every rule the handlers
//! and the domain's parsers enforce on a single field (lengths after trimming, character sets,
//! enums, ranges, non-null values, formats), and the few rules over several fields that a schema
//! can state (`defaultLang` among `enabledLangs`, a lead patch naming at least one field), so that
//! a fuzzer trusting the operator document is never refused a valid body.
//!
//! The field rules live in the domain's parsers ([`partner_domain::kernel::values::text`],
//! `Email::parse`, `Phone::parse`, `parse_path`, …); the patterns here restate them, and
//! `.ci/conformance` (schemathesis with every check, positive and negative data) catches any
//! drift either way. Rules no schema can express (a value that must agree with another field, a
//! price within its product's range, a time that must be in the future, a record that must
//! exist) are in the descriptions, and only `positive_data_acceptance` on only those operations
//! is switched off in `.ci/schemathesis.toml`.

use partner_domain::lead::HEADLESS_INTAKE;
use partner_domain::order::{ORDER_COMPLETED, SIMULATED_PREFIX};
use serde_json::{Value, json};
use utoipa::openapi::extensions::Extensions;
use utoipa::openapi::schema::{AllOfBuilder, AnyOfBuilder, OneOfBuilder, SchemaType, Type};
use utoipa::openapi::{OpenApi as Document, RefOr, Required, Schema};

mod across;
use across::{
    and, completed_order_has_product_and_amount, default_lang_among_enabled, names_a_field,
    order_id, test_flag, token_body,
};

/// The characters Rust's `str::trim` removes (Unicode `White_Space`), as a class body.
const WS_CHARS: &str = r"\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000";
/// The control characters (`char::is_control`: Unicode `Cc`), as a class body.
const CONTROL: &str = r"\x00-\x1f\x7f-\x9f";

fn ws() -> String {
    format!("[{WS_CHARS}]*")
}

/// Any character but a control character.
fn visible() -> String {
    format!("[^{CONTROL}]")
}

/// Neither white space nor a control character.
fn solid() -> String {
    format!("[^{CONTROL}{WS_CHARS}]")
}

/// `text(field, s, min, max)` of the domain: `min`-`max` characters after trimming white space,
/// no control characters (min is 0 or 1).
pub(crate) fn text_pattern(min: usize, max: usize) -> String {
    let (n, c, w) = (solid(), visible(), ws());
    let core = if max <= 1 {
        n
    } else {
        format!("{n}(?:{c}{{0,{}}}{n})?", max - 2)
    };
    if min == 0 {
        format!("^{w}(?:{core})?{w}$")
    } else {
        format!("^{w}{core}{w}$")
    }
}

fn text(min: usize, max: usize, nullable: bool) -> Value {
    let description = if min == 0 {
        format!("At most {max} characters after trimming white space; no control characters")
    } else {
        format!("1-{max} characters after trimming white space; no control characters")
    };
    json!({
        "type": kind("string", nullable),
        "pattern": text_pattern(min, max),
        "description": description,
    })
}

fn kind(t: &str, nullable: bool) -> Value {
    if nullable {
        json!([t, "null"])
    } else {
        json!(t)
    }
}

fn schema(v: Value) -> Schema {
    serde_json::from_value(v).unwrap_or_else(|_| Schema::Object(Default::default()))
}

fn string_type(nullable: bool) -> SchemaType {
    if nullable {
        SchemaType::Array(vec![Type::String, Type::Null])
    } else {
        SchemaType::Type(Type::String)
    }
}

/// A string that must match every one of `patterns` (a structure and a length no single
/// pattern without look-arounds can state together).
fn all_patterns(patterns: &[String], nullable: bool, description: &str) -> Schema {
    let mut b = AllOfBuilder::new()
        .schema_type(string_type(nullable))
        .description(Some(description));
    for p in patterns {
        // The pattern alone: a pattern constrains strings only, so a null still passes where the
        // field is nullable.
        let mut item = schema(json!({ "type": "string", "pattern": p }));
        if let Schema::Object(o) = &mut item {
            o.schema_type = SchemaType::AnyValue;
        }
        b = b.item(item);
    }
    Schema::AllOf(b.build())
}

/// `Email::parse`: trimmed, at most 254 characters, exactly one `@` with a non-empty local part
/// and a dotted domain that neither starts nor ends with `.`, no white space or control
/// characters.
fn email(nullable: bool) -> Schema {
    let w = ws();
    let e = format!("[^@{CONTROL}{WS_CHARS}]");
    let f = format!("[^@.{CONTROL}{WS_CHARS}]");
    all_patterns(
        &[
            format!(r"^{w}{e}+@{f}{e}*\.{e}*{f}{w}$"),
            format!("^{w}{}{{1,254}}{w}$", solid()),
        ],
        nullable,
        "An email address: one `@`, a dotted domain, no white space or control characters, \
         at most 254 characters after trimming",
    )
}

/// `Phone::parse` after the ingest's "blank is none": at most 32 of digits, spaces and
/// `+ - ( ) .` after trimming, with a digit; blank means no phone.
fn phone() -> Schema {
    let w = ws();
    let edge = "[0-9+().-]";
    all_patterns(
        &[
            format!("^{w}(?:{edge}(?:[0-9 +().-]{{0,30}}{edge})?)?{w}$"),
            format!("^{w}$|[0-9]"),
        ],
        true,
        "At most 32 of digits, spaces and `+ - ( ) .` after trimming, with at least one digit; \
         null or blank: no phone",
    )
}

/// `parse_path`: 1-8 segments of `A-Z a-z 0-9 _ - .` (no `.` or `..` segment), at most 200
/// characters once leading and trailing `/` are removed.
fn path(nullable: bool) -> Schema {
    let seg =
        r"(?:[A-Za-z0-9_-][A-Za-z0-9_.-]*|\.[A-Za-z0-9_-][A-Za-z0-9_.-]*|\.\.[A-Za-z0-9_.-]+)";
    all_patterns(
        &[
            format!("^/*{seg}(?:/{seg}){{0,7}}/*$"),
            "^/*[A-Za-z0-9_.-](?:[A-Za-z0-9_./-]{0,198}[A-Za-z0-9_.-])?/*$".to_owned(),
        ],
        nullable,
        "A relative path: 1-8 segments of `A-Z a-z 0-9 _ - .` (no `.` or `..` segment), at most \
         200 characters without its leading and trailing `/`",
    )
}

/// `parse_http_url`: what a pattern can state of it (the scheme, no white space or control
/// characters, the length bound in characters); the rest is the WHATWG URL parser's.
fn url() -> Value {
    json!({
        "type": "string",
        "maxLength": 2048,
        "pattern": format!("^[Hh][Tt][Tt][Pp][Ss]?:[^{CONTROL}{WS_CHARS}]+$"),
        "description": "An absolute `http` or `https` URL with a host (as the WHATWG URL parser \
                        reads it), at most 2,048 bytes, without white space or control \
                        characters; stored normalized",
    })
}

/// `Money::parse`: a non-negative number of dollars with at most two decimals, at most ten
/// billion.
fn money(nullable: bool) -> Value {
    json!({
        "type": kind("number", nullable),
        "minimum": 0,
        "maximum": 10_000_000_000u64,
        "multipleOf": 0.01,
        "description": "Dollars: non-negative, at most two decimals",
    })
}

const PARTNER_ID: &str = "[A-Za-z0-9_-]{1,64}";
const SUB_ID: &str = "([1-9]|[1-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|250)";

fn partner_id() -> Value {
    json!({
        "type": "string",
        "pattern": format!("^{PARTNER_ID}$"),
        "description": "A partner id: 1-64 of `A-Z a-z 0-9 _ -`",
    })
}

/// `Attribution::parse`: a partner id, or a sub-account's code `<partnerId>.<subId>`.
fn attribution() -> Value {
    json!({
        "type": "string",
        "pattern": format!(r"^{PARTNER_ID}(\.{SUB_ID})?$"),
        "description": "A partner id, or a sub-account's attribution code `<partnerId>.<subId>`; \
                        with `subId` too, both must name the same sub-account",
    })
}

fn sub_id(description: &str) -> Value {
    json!({
        "type": ["string", "null"],
        "pattern": format!("^{SUB_ID}$"),
        "description": description,
    })
}

fn timestamp(nullable: bool, description: &str) -> Value {
    json!({
        "type": kind("string", nullable),
        "format": "date-time",
        "description": description,
    })
}

const TIMESTAMP: &str =
    "An RFC 3339 timestamp (any offset) whose instant in UTC falls in the years 0000-9999";

fn enum_ref(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

/// One of the enum component `name`, or null.
fn nullable_enum(name: &str, description: &str) -> Schema {
    Schema::OneOf(
        OneOfBuilder::new()
            .item(RefOr::Ref(utoipa::openapi::Ref::from_schema_name(name)))
            .item(schema(json!({ "type": "null" })))
            .description(Some(description))
            .build(),
    )
}

fn array_of(items: Value, unique: bool, min_items: Option<usize>) -> Value {
    let mut a = serde_json::Map::new();
    a.insert("type".to_owned(), json!("array"));
    a.insert("items".to_owned(), items);
    if unique {
        a.insert("uniqueItems".to_owned(), json!(true));
    }
    if let Some(n) = min_items {
        a.insert("minItems".to_owned(), json!(n));
    }
    Value::Object(a)
}

fn integer_enum(values: &[u8]) -> Value {
    json!({ "type": "integer", "enum": values })
}

fn boolean() -> Value {
    json!({ "type": "boolean" })
}

/// One field's exact schema.
enum Field {
    Json(Value),
    Built(Box<Schema>),
}

impl From<Value> for Field {
    fn from(v: Value) -> Self {
        Self::Json(v)
    }
}

impl From<Schema> for Field {
    fn from(s: Schema) -> Self {
        Self::Built(Box::new(s))
    }
}

impl Field {
    fn into_schema(self) -> RefOr<Schema> {
        match self {
            Field::Built(s) => RefOr::T(*s),
            Field::Json(v) => match serde_json::from_value::<RefOr<Schema>>(v) {
                Ok(s) => s,
                Err(_) => RefOr::T(Schema::Object(Default::default())),
            },
        }
    }
}

/// The exact schema of every property of the operator API's request bodies, by component.
fn fields() -> Vec<(&'static str, Vec<(&'static str, Field)>)> {
    vec![
        (
            "PartnerSettings",
            vec![
                ("name", text(1, 200, false).into()),
                ("email", email(false).into()),
                ("defaultLang", enum_ref("Lang").into()),
                ("enabledLangs", array_of(enum_ref("Lang"), false, Some(1)).into()),
            ],
        ),
        (
            "CareServicesAccessInput",
            vec![("services", array_of(enum_ref("CareService"), false, None).into())],
        ),
        (
            "CareFlagsChange",
            ["primary-care", "urgent-care", "mental-health", "dermatology", "veterinary-care"]
                .into_iter()
                .map(|s| (s, boolean().into()))
                .collect(),
        ),
        (
            "PortalUserCreate",
            vec![("email", email(false).into()), ("partnerId", partner_id().into())],
        ),
        (
            "LeadIngest",
            vec![
                ("partnerId", attribution().into()),
                ("subId", sub_id("The sub-account number, 1-250").into()),
                ("firstName", text(1, 100, false).into()),
                ("lastName", text(0, 100, false).into()),
                ("email", email(false).into()),
                ("phone", phone().into()),
                (
                    "origin",
                    json!({ "type": "string", "pattern": "^[a-z0-9_-]{1,64}$",
                            "description": "1-64 of `a-z 0-9 _ -`" })
                    .into(),
                ),
                ("location", text(0, 200, false).into()),
                ("questionId", text(0, 100, true).into()),
                (
                    "isTest",
                    json!({ "type": ["boolean", "null"],
                            "description": "`true` for a test row (only with origin \
                                            `headless_intake`, and then with `testSource`); \
                                            null or absent: `false`" })
                    .into(),
                ),
                (
                    "testSource",
                    nullable_enum(
                        "TestSource",
                        "Required when `isTest` is true, else null or absent",
                    )
                    .into(),
                ),
            ],
        ),
        (
            "LeadPatch",
            vec![
                ("phone", phone().into()),
                (
                    "smsConsent",
                    json!({ "type": ["boolean", "null"], "description": "null: unchanged" }).into(),
                ),
                ("email", email(true).into()),
                (
                    "emailConsent",
                    json!({ "type": ["boolean", "null"], "description": "null: unchanged" }).into(),
                ),
                ("firstName", text(1, 100, true).into()),
                ("lastName", text(0, 100, true).into()),
            ],
        ),
        (
            "OrderIngest",
            vec![
                ("orderId", order_id().into()),
                ("partnerId", attribution().into()),
                ("subId", sub_id("The sub-account number, 1-250").into()),
                ("createdDate", timestamp(false, TIMESTAMP).into()),
                ("product", text(1, 200, false).into()),
                ("amount", money(false).into()),
                ("commission", money(false).into()),
                ("status", text(1, 64, false).into()),
                ("source", text(1, 64, false).into()),
                ("customerName", text(0, 200, true).into()),
                ("customerEmail", email(true).into()),
            ],
        ),
        (
            "AnalyticsEventIngest",
            vec![
                (
                    "runId",
                    json!({ "type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$",
                            "description": "1-64 of `A-Z a-z 0-9 _ -`" })
                    .into(),
                ),
                ("partnerId", attribution().into()),
                ("subId", sub_id("The sub-account number, 1-250").into()),
                (
                    "event",
                    json!({ "type": "string", "pattern": "^[a-z0-9_.-]{1,64}$",
                            "description": "1-64 of `a-z 0-9 _ . -`; `order_completed` needs a \
                                            non-blank `product` and an `amount`" })
                    .into(),
                ),
                ("product", text(0, 200, true).into()),
                ("amount", money(true).into()),
                ("occurredAt", timestamp(false, TIMESTAMP).into()),
                ("testSource", enum_ref("TestSource").into()),
            ],
        ),
        (
            "PayoutIngest",
            vec![
                ("partnerId", partner_id().into()),
                (
                    "payoutDate",
                    json!({ "type": "string", "format": "date", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$" })
                        .into(),
                ),
                ("payoutAmount", money(false).into()),
                ("status", text(1, 32, false).into()),
                ("receiptUrl", text(0, 2048, true).into()),
                ("note", text(0, 2000, true).into()),
            ],
        ),
        (
            "MedicalProductInput",
            vec![
                ("name", text(1, 200, false).into()),
                ("categories", array_of(enum_ref("Category"), true, None).into()),
                ("details", text(0, 500, false).into()),
                ("imageUrl", url().into()),
                (
                    "imageFileId",
                    json!({ "type": "string", "format": "uuid",
                            "description": "A UUID (the simple, braced and URN forms are read too)" })
                    .into(),
                ),
                ("imageSourceUrl", url().into()),
                ("legacyPath", path(false).into()),
                ("selfHostedSlug", path(true).into()),
                ("selfHostedLangs", array_of(enum_ref("Lang"), true, None).into()),
                ("suggestedPrices", text(0, 200, false).into()),
                (
                    "tiers",
                    json!({ "type": "array", "minItems": 1,
                            "items": enum_ref("MedicalTierInput"),
                            "description": "At least one; each `key` once" })
                    .into(),
                ),
            ],
        ),
        (
            "MedicalTierInput",
            vec![
                (
                    "key",
                    json!({ "type": "string", "pattern": "^[a-z0-9_-]{1,32}$",
                            "description": "1-32 of `a-z 0-9 _ -`" })
                    .into(),
                ),
                ("label", text(1, 100, false).into()),
                ("months", integer_enum(&[1, 3, 6]).into()),
                ("minPrice", money(false).into()),
                ("maxPrice", money(false).into()),
                (
                    "recommendedPrice",
                    json!({ "type": "number", "minimum": 0, "maximum": 10_000_000_000u64,
                            "multipleOf": 0.01,
                            "description": "Dollars, at most two decimals; \
                                            `minPrice <= recommendedPrice <= maxPrice`" })
                    .into(),
                ),
                ("commission", money(false).into()),
            ],
        ),
        (
            "DnaProductInput",
            vec![
                ("productName", text(1, 200, false).into()),
                ("description", text(0, 2000, false).into()),
                ("intakePath", path(false).into()),
                ("productImageUrl", url().into()),
                ("minimumPrice", money(false).into()),
                (
                    "recommendedPrice",
                    json!({ "type": "number", "minimum": 0, "maximum": 10_000_000_000u64,
                            "multipleOf": 0.01,
                            "description": "Dollars, at most two decimals; \
                                            `minimumPrice <= recommendedPrice <= maximumPrice`" })
                    .into(),
                ),
                ("maximumPrice", money(false).into()),
                ("parentProduct", array_of(text(1, 200, false), false, None).into()),
            ],
        ),
        (
            "CareProductInput",
            vec![
                ("service", enum_ref("CareService").into()),
                ("slug", path(false).into()),
                ("productName", text(1, 200, false).into()),
                ("description", text(0, 2000, false).into()),
                ("imageUrl", url().into()),
                (
                    "tiers",
                    json!({ "type": "array", "minItems": 1,
                            "items": enum_ref("CareTierInput"),
                            "description": "At least one; each `key` and each `months` once" })
                    .into(),
                ),
            ],
        ),
        (
            "CareTierInput",
            vec![
                (
                    "key",
                    json!({ "type": "string", "pattern": "^[a-z0-9_-]{1,32}$",
                            "description": "1-32 of `a-z 0-9 _ -`" })
                    .into(),
                ),
                ("label", text(1, 100, false).into()),
                ("months", integer_enum(&[1, 3, 6, 12]).into()),
                ("userPrice", money(false).into()),
                ("commission", money(false).into()),
            ],
        ),
        (
            "MedicalPricesInput",
            vec![(
                "tierPrices",
                json!({ "type": "object", "additionalProperties": money(false),
                        "description": "The product's tier keys, each price within its tier's \
                                        `minPrice` and `maxPrice`" })
                .into(),
            )],
        ),
        (
            "DnaPriceInput",
            vec![(
                "userSetPrice",
                json!({ "type": "number", "minimum": 0, "maximum": 10_000_000_000u64,
                        "multipleOf": 0.01,
                        "description": "Dollars, at most two decimals, within the product's \
                                        `minimumPrice` and `maximumPrice`" })
                .into(),
            )],
        ),
        (
            "BulkOrderRequest",
            vec![
                ("partnerId", partner_id().into()),
                ("productSlug", enum_ref("ProductSlug").into()),
                ("months", integer_enum(&[1, 3, 6, 12]).into()),
                (
                    "quantity",
                    json!({ "type": "integer", "format": "int64", "minimum": 1, "maximum": 10000 })
                        .into(),
                ),
                (
                    "unitPriceCents",
                    json!({ "type": "integer", "format": "int64", "minimum": 0,
                            "maximum": i64::MAX })
                    .into(),
                ),
                ("purchaserEmail", email(false).into()),
                ("purchaserSource", text(1, 64, false).into()),
                (
                    "subAccountId",
                    sub_id("The sub-account number, 1-250, of a sub-account of the partner").into(),
                ),
                ("expiresAt", timestamp(true, "An RFC 3339 timestamp in the future").into()),
                ("notes", text(0, 2000, true).into()),
            ],
        ),
        (
            "CouponRedemption",
            vec![
                (
                    "code",
                    json!({ "type": "string",
                            "pattern": format!("^{w}[ -]*(?:[A-Za-z0-9][ -]*){{12}}{w}$", w = ws()),
                            "description": "12 letters and digits; case, spaces and hyphens are \
                                            ignored" })
                    .into(),
                ),
                ("productSlug", enum_ref("ProductSlug").into()),
                ("months", integer_enum(&[1, 3, 6, 12]).into()),
                ("email", email(false).into()),
                ("providerPrimaryExternalId", text(1, 200, false).into()),
            ],
        ),
    ]
}

/// Applies the exact body schemas to the operator document.
pub(super) fn tighten(doc: &mut Document) {
    if let Some(components) = doc.components.as_mut() {
        for (name, props) in fields() {
            let Some(RefOr::T(Schema::Object(object))) = components.schemas.get_mut(name) else {
                continue;
            };
            for (prop, field) in props {
                object
                    .properties
                    .insert(prop.to_owned(), field.into_schema());
            }
        }
    }
    and(doc, "PartnerSettings", default_lang_among_enabled());
    and(doc, "LeadPatch", names_a_field());
    and(doc, "LeadIngest", test_flag());
    and(
        doc,
        "AnalyticsEventIngest",
        completed_order_has_product_and_amount(),
    );
    token_body(doc);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]

    use super::*;

    /// Every table schema is read by utoipa's model without losing a keyword (an untagged
    /// `Schema` would quietly read a `oneOf` as an empty object, say).
    #[test]
    fn no_keyword_is_lost() {
        for (component, props) in fields() {
            for (prop, field) in props {
                let Field::Json(v) = field else { continue };
                let back =
                    serde_json::to_value(Field::Json(v.clone()).into_schema()).expect("serializes");
                assert_eq!(back, v, "{component}.{prop}");
            }
        }
    }
}
