//! The two OpenAPI 3.1 documents (extensions.md §6), generated from the handlers' `#[utoipa::path]`
//! attributes, their request types and [`super::schemas`]: the partner API with the public catalog
//! and the embedded view (`GET /api/v1/openapi.json`, no token), and the operator API
//! (`GET /internal/v1/openapi.json`, behind the operator token).
//!
//! What every operation of a group answers the same way (the guards' 401/403/429/503, the
//! rate-limit headers, 413 on bodies, 500) is added once by [`Common`] rather than repeated on each
//! handler.

use std::sync::LazyLock;

use actix_web::HttpResponse;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::Operation;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi as Document, Ref, ResponseBuilder, Type};
use utoipa::{Modify, OpenApi};

use super::accounts;
use super::schemas::*;
use super::{
    catalog, coupons, embed, embed_url, events, leads, links, orders, payouts, portal,
    sub_accounts, webhooks,
};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Partner Portal API",
        description = "The partner API (bearer token), the public catalog and the embedded Care Services view. \
                       Every error answer is `{ \"error\": { \"code\", \"message\" } }`.",
        version = "1.0.0"
    ),
    paths(
        leads::list,
        leads::one,
        orders::list,
        orders::one,
        payouts::list,
        payouts::one,
        sub_accounts::list,
        sub_accounts::one,
        sub_accounts::create,
        sub_accounts::delete,
        links::dna,
        links::medical,
        links::care,
        embed_url::show,
        coupons::list,
        coupons::one,
        webhooks::list,
        webhooks::post,
        webhooks::patch,
        webhooks::delete,
        webhooks::test,
        webhooks::recover,
        webhooks::deliveries,
        webhooks::by_hour,
        webhooks::delivery,
        webhooks::resend,
        portal::mint,
        portal::exchange,
        portal::page,
        portal::script,
        portal::style,
        events::list,
        events::show,
        partner_document,
        catalog::list,
        catalog::preflight,
        embed::care_services,
    ),
    components(schemas(ErrorBody)),
    modifiers(&PARTNER),
    tags(
        (name = "activity", description = "Leads, orders and payouts"),
        (name = "sub-accounts"),
        (name = "links", description = "Shareable intake links"),
        (name = "coupons", description = "Care Services coupon codes"),
        (name = "webhooks", description = "Webhook endpoints and their delivery log"),
        (name = "events", description = "The events feed: every webhook event of the partner, oldest first"),
        (name = "catalog", description = "The public product catalog (no token)"),
        (name = "embed", description = "The embedded Care Services view (HTML, no token)"),
        (name = "portal", description = "The partner's webhook portal: its page and its code exchange (no token)"),
        (name = "meta"),
    )
)]
struct PartnerApi;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Partner Portal operator API",
        description = "The operator API under `/internal/v1`, behind the operator token. \
                       Every error answer is `{ \"error\": { \"code\", \"message\" } }`.",
        version = "1.0.0"
    ),
    paths(
        accounts::put_partner,
        accounts::get_partner,
        accounts::put_flags,
        accounts::get_flags,
        accounts::create_user,
        accounts::delete_user,
        accounts::create_token,
        accounts::list_tokens,
        accounts::rotate_token,
        accounts::revoke_token,
        leads::create_lead,
        leads::patch_lead,
        orders::create_order,
        orders::create_event,
        payouts::create_payout,
        orders::commission_summary,
        catalog::put_medical,
        catalog::put_dna,
        catalog::put_care,
        catalog::put_medical_prices,
        catalog::put_dna_price,
        coupons::issue,
        coupons::redeem,
        coupons::void,
        webhooks::internal_list,
        webhooks::internal_create,
        webhooks::internal_update,
        webhooks::internal_delete,
        webhooks::internal_test,
        webhooks::internal_recover,
        webhooks::internal_deliveries,
        webhooks::internal_delivery,
        webhooks::internal_resend,
        internal_document,
    ),
    components(schemas(ErrorBody)),
    modifiers(&INTERNAL),
    tags(
        (name = "accounts", description = "Partners, feature flags, portal users and tokens"),
        (name = "activity", description = "Lead, order, analytics-event and payout ingest"),
        (name = "catalog", description = "Products and partners' prices"),
        (name = "coupons", description = "Care Services coupons"),
        (name = "webhooks", description = "Partners' webhook endpoints and delivery logs"),
        (name = "meta"),
    )
)]
struct InternalApi;

/// The partner document.
pub fn partner() -> Document {
    let mut doc = PartnerApi::openapi();
    super::openapi_webhooks::add(&mut doc);
    doc
}

/// The operator document.
pub fn internal() -> Document {
    let mut doc = InternalApi::openapi();
    super::openapi_bodies::tighten(&mut doc);
    doc
}

/// A document as committed under `docs/openapi/`: pretty JSON and a final newline.
pub fn to_json(doc: &Document) -> Result<String, serde_json::Error> {
    doc.to_pretty_json().map(|mut s| {
        s.push('\n');
        s
    })
}

/// Both documents are built once, on first request.
static PARTNER_JSON: LazyLock<Result<String, String>> =
    LazyLock::new(|| to_json(&partner()).map_err(|e| e.to_string()));
static INTERNAL_JSON: LazyLock<Result<String, String>> =
    LazyLock::new(|| to_json(&internal()).map_err(|e| e.to_string()));

fn serve(doc: &Result<String, String>) -> HttpResponse {
    match doc {
        Ok(body) => HttpResponse::Ok()
            .content_type(actix_web::http::header::ContentType::json())
            .body(body.clone()),
        Err(e) => actix_web::ResponseError::error_response(&crate::ApiError::internal(e)),
    }
}

/// This document.
#[utoipa::path(
    get, path = "/api/v1/openapi.json", tag = "meta", security(()),
    responses((status = 200, description = "This OpenAPI 3.1 document", body = Object))
)]
pub(super) async fn partner_document() -> HttpResponse {
    serve(&PARTNER_JSON)
}

/// This document.
#[utoipa::path(
    get, path = "/internal/v1/openapi.json", tag = "meta",
    responses((status = 200, description = "This OpenAPI 3.1 document", body = Object))
)]
pub(super) async fn internal_document() -> HttpResponse {
    serve(&INTERNAL_JSON)
}

/// The answers every operation of a document shares.
enum Common {
    Partner,
    Internal,
}

const PARTNER: Common = Common::Partner;
const INTERNAL: Common = Common::Internal;

const BEARER: &str = "bearer";

fn error(description: &str) -> utoipa::openapi::Response {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorBody")))
                .build(),
        )
        .build()
}

fn integer_header(description: &str) -> utoipa::openapi::header::Header {
    HeaderBuilder::new()
        .schema(Some(
            utoipa::openapi::ObjectBuilder::new().schema_type(Type::Integer),
        ))
        .description(Some(description))
        .build()
}

fn string_header(description: &str) -> utoipa::openapi::header::Header {
    HeaderBuilder::new()
        .schema(Some(
            utoipa::openapi::ObjectBuilder::new().schema_type(Type::String),
        ))
        .description(Some(description))
        .build()
}

/// A unique, stable operation id from the method and path (handler names repeat across
/// modules): `GET /api/v1/webhook-endpoints/{id}` is `get_webhook_endpoints_by_id`.
fn operation_id(method: &str, path: &str) -> String {
    let rest = path
        .strip_prefix("/api/v1/")
        .or_else(|| path.strip_prefix("/internal/v1/"))
        .unwrap_or(path);
    let mut id = method.to_owned();
    for part in rest.split('/').filter(|p| !p.is_empty()) {
        id.push('_');
        if let Some(name) = part.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
            id.push_str("by_");
            id.push_str(name);
        } else {
            id.extend(
                part.chars()
                    .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }),
            );
        }
    }
    id
}

/// Adds `status` unless the handler documented it already.
/// The 503 every operation may answer while the database cannot be reached (extensions §11).
const UNAVAILABLE: &str =
    "`unavailable`: the database cannot be reached; retry after `Retry-After` (1 s)";

fn add(op: &mut Operation, status: &str, description: &str) {
    if !op.responses.responses.contains_key(status) {
        op.responses
            .responses
            .insert(status.to_owned(), error(description).into());
    }
}

fn has_body(op: &Operation) -> bool {
    op.request_body.is_some()
}

impl Modify for Common {
    fn modify(&self, doc: &mut Document) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            BEARER,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(match self {
                        Common::Partner => "A partner API token (`Authorization: Bearer <token>`)",
                        Common::Internal => "The operator token (`PARTNER_INTERNAL_TOKEN`)",
                    }))
                    .build(),
            ),
        );
        for (name, header) in [
            (
                "X-RateLimit-Limit",
                integer_header("Requests allowed per window for this token and endpoint group"),
            ),
            (
                "X-RateLimit-Remaining",
                integer_header("Requests left in the current window"),
            ),
            (
                "X-RateLimit-Reset",
                integer_header("Unix time (seconds) at which the budget is whole again"),
            ),
            (
                "Retry-After",
                integer_header("Seconds to wait before retrying"),
            ),
            (
                "Cache-Control",
                string_header("`no-store`: answers carry tenant data"),
            ),
            (
                "Idempotent-Replayed",
                string_header(
                    "`true` when this is the kept answer of an earlier request with the same \
                     `Idempotency-Key`, replayed byte for byte",
                ),
            ),
        ] {
            // The operator API has no rate limit; its 503 carries `Retry-After` too.
            if matches!(self, Common::Partner)
                || matches!(
                    name,
                    "Cache-Control" | "Retry-After" | "Idempotent-Replayed"
                )
            {
                components.headers.insert(name.to_owned(), header.into());
            }
        }
        doc.security = Some(vec![utoipa::openapi::security::SecurityRequirement::new(
            BEARER,
            Vec::<String>::new(),
        )]);
        for (path, item) in doc.paths.paths.iter_mut() {
            let partner_api = path.starts_with("/api/v1/") && path != "/api/v1/openapi.json";
            let ops = [
                ("get", item.get.as_mut()),
                ("put", item.put.as_mut()),
                ("post", item.post.as_mut()),
                ("delete", item.delete.as_mut()),
                ("patch", item.patch.as_mut()),
            ];
            for (method, op) in ops.into_iter().filter_map(|(m, op)| op.map(|op| (m, op))) {
                op.operation_id = Some(operation_id(method, path));
                if has_body(op) {
                    add(
                        op,
                        "400",
                        "The body is not a valid JSON object of this shape",
                    );
                    add(op, "413", "The body exceeds 1 MiB");
                }
                add(
                    op,
                    "500",
                    "Unexpected server error; safe to retry with backoff",
                );
                if matches!(method, "post" | "patch")
                    && (partner_api || path.starts_with("/internal/v1/"))
                {
                    idempotent(op);
                }
                match self {
                    Common::Partner if partner_api => partner_guard(op),
                    Common::Partner => {}
                    Common::Internal => {
                        add(op, "401", "No operator token, or not the operator token");
                        no_store(op);
                    }
                }
                add(op, "503", UNAVAILABLE);
                if let Some(utoipa::openapi::RefOr::T(r)) = op.responses.responses.get_mut("503") {
                    r.headers
                        .insert("Retry-After".to_owned(), header_ref("Retry-After"));
                }
            }
        }
        super::openapi_params::tighten(doc);
    }
}

/// `Idempotency-Key` (extensions §8.3): the header, its two conflict answers, and the replay
/// marker on every answer that may be kept.
fn idempotent(op: &mut Operation) {
    let key = utoipa::openapi::path::ParameterBuilder::new()
        .name("Idempotency-Key")
        .parameter_in(utoipa::openapi::path::ParameterIn::Header)
        .required(utoipa::openapi::Required::False)
        .description(Some(
            "1-255 visible ASCII characters. The first request with a key runs; its answer \
             (status below 500, not 429) is kept for 24 hours and replayed, byte for byte with \
             `Idempotent-Replayed: true`, to a request with the same key, method, path (with \
             the query string) and body.",
        ))
        .schema(Some(
            utoipa::openapi::ObjectBuilder::new()
                .schema_type(Type::String)
                .min_length(Some(1))
                .max_length(Some(255))
                .pattern(Some("^[!-~]{1,255}$")),
        ))
        .build();
    op.parameters
        .get_or_insert_with(Vec::new)
        .push(utoipa::openapi::RefOr::T(key));
    for (status, text) in [
        (
            "400",
            "`invalid_request`: the `Idempotency-Key` is not 1-255 visible ASCII characters",
        ),
        (
            "409",
            "`idempotency_key_in_use`: a request with this `Idempotency-Key` is still running",
        ),
        (
            "422",
            "`idempotency_key_reused`: this `Idempotency-Key` was used for another method, \
             path or body",
        ),
    ] {
        match op.responses.responses.get_mut(status) {
            Some(utoipa::openapi::RefOr::T(r)) => {
                r.description = format!("{}; or {text}", r.description);
            }
            Some(_) => {}
            None => add(op, status, text),
        }
    }
    for (status, response) in op.responses.responses.iter_mut() {
        let utoipa::openapi::RefOr::T(response) = response else {
            continue;
        };
        if status.starts_with('2') || status.starts_with('4') {
            response.headers.insert(
                "Idempotent-Replayed".to_owned(),
                header_ref("Idempotent-Replayed"),
            );
        }
    }
}

/// The partner guard's answers and headers.
fn partner_guard(op: &mut Operation) {
    add(
        op,
        "401",
        "`missing_bearer`, `invalid_token` (invalid, revoked or expired) or `unknown_user`",
    );
    add(op, "403", "`forbidden`: the partner account is inactive");
    add(
        op,
        "429",
        "`rate_limited`: this token's budget for the endpoint group is spent; see `Retry-After`",
    );
    add(
        op,
        "503",
        "`api_keys_unavailable`: API keys cannot be verified in this environment; or \
         `unavailable`: the database cannot be reached, retry after `Retry-After` (1 s)",
    );
    for (status, response) in op.responses.responses.iter_mut() {
        let utoipa::openapi::RefOr::T(response) = response else {
            continue;
        };
        // The guard answers 401/403/503 before charging the budget: no rate-limit headers.
        if !matches!(status.as_str(), "401" | "403" | "503") {
            for name in [
                "X-RateLimit-Limit",
                "X-RateLimit-Remaining",
                "X-RateLimit-Reset",
            ] {
                response.headers.insert(name.to_owned(), header_ref(name));
            }
        }
        if status == "429" {
            response
                .headers
                .insert("Retry-After".to_owned(), header_ref("Retry-After"));
        }
    }
    no_store(op);
}

fn no_store(op: &mut Operation) {
    for response in op.responses.responses.values_mut() {
        if let utoipa::openapi::RefOr::T(response) = response {
            response
                .headers
                .insert("Cache-Control".to_owned(), header_ref("Cache-Control"));
        }
    }
}

/// A reference to one of the headers in `components/headers`.
fn header_ref(name: &str) -> utoipa::openapi::RefOr<utoipa::openapi::header::Header> {
    utoipa::openapi::RefOr::Ref(Ref::new(format!("#/components/headers/{name}")))
}
