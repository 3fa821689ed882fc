//! Schemas of the OpenAPI documents that no handler type carries: the envelopes (`{ data }`,
//! pages), the error body and the shared values (`Money`, `Lang`, `CareService`, the enums).
//!
//! Every answer's own shape is its `…Out` type beside its route (`Serialize` + `ToSchema`,
//! borrowing the domain value), so the JSON and its schema come from one declaration; the types
//! here are only referenced (`value_type = …`) or wrap those. Drift in what is left shows in the
//! conformance run (`.ci/conformance`), which checks every live answer against the documents.
//! Request bodies are the handlers' own `Deserialize` structs, deriving `ToSchema` where they are
//! defined.

#![allow(dead_code)]

mod activity;
mod catalog;
mod coupons;
mod operator;
mod webhooks;

pub(crate) use activity::*;
pub(crate) use catalog::*;
pub(crate) use coupons::*;
pub(crate) use operator::*;
pub(crate) use webhooks::*;

use partner_domain::events::EventKind;
use utoipa::ToSchema;

/// `{ "error": { "code", "message" } }`, the body of every error answer.
#[derive(ToSchema)]
#[schema(example = json!({ "error": { "code": "invalid_request", "message": "limit: must be an integer within the allowed range" } }))]
pub(crate) struct ErrorBody {
    error: ErrorDetail,
}

#[derive(ToSchema)]
pub(crate) struct ErrorDetail {
    code: ErrorCode,
    /// Human-readable; never echoes secrets, tokens or SQL.
    message: String,
}

/// The error codes of the contract.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub(crate) enum ErrorCode {
    InvalidRequest,
    NotFound,
    Forbidden,
    MissingBearer,
    InvalidToken,
    UnknownUser,
    RateLimited,
    IdempotencyKeyInUse,
    IdempotencyKeyReused,
    ApiKeysUnavailable,
    Unavailable,
    InternalError,
    CursorExpired,
}

/// `{ "ok": true }`.
#[derive(ToSchema)]
pub(crate) struct Ok {
    #[schema(value_type = bool, example = true)]
    ok: bool,
}

/// `page` of a keyset listing: pass `nextCursor` back unchanged for the next page; `null` on the
/// last page.
#[derive(ToSchema)]
#[schema(as = PageInfo)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PageInfoDoc {
    #[schema(
        example = "eyJ0IjoiMjAyNi0xMS0yMVQxMDowMDowMC4wMDBaIn0.c2ln",
        required = true
    )]
    next_cursor: Option<String>,
    #[schema(minimum = 1, maximum = 500, example = 50)]
    limit: u16,
}

/// A sub-account's number: an integer 1-250, as a string.
pub(crate) const SUB_ID_PATTERN: &str = "^([1-9]|[1-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|250)$";

#[derive(ToSchema)]
#[schema(rename_all = "kebab-case")]
pub(crate) enum Category {
    WeightLoss,
    MensHealth,
    WomensHealth,
    HairLoss,
    Wellness,
}

#[derive(ToSchema)]
#[schema(rename_all = "kebab-case")]
pub(crate) enum CareService {
    PrimaryCare,
    UrgentCare,
    MentalHealth,
    Dermatology,
    VeterinaryCare,
}

#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
pub(crate) enum Lang {
    En,
    Es,
}

#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub(crate) enum TestSource {
    ProviderTestMode,
    Simulation,
}

/// The webhook event types: every kind a delivery may carry, from the domain's one declaration
/// of them ([`EventKind::DELIVERED`]), so a new kind is documented without a line here.
pub(crate) struct EventType;

impl utoipa::PartialSchema for EventType {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .description(Some("The webhook event types."))
            .enum_values(Some(EventKind::DELIVERED.map(EventKind::as_str)))
            .into()
    }
}

impl ToSchema for EventType {}

#[derive(ToSchema)]
#[schema(rename_all = "kebab-case")]
pub(crate) enum ProductSlug {
    UrgentCare,
    UrgentPlus,
    Primary,
    PrimaryPlus,
    VetCare,
    Behavior,
    PrimaryFamilyPlan,
    PrimaryFamilyPlanAndDiscountProgram,
}

#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
pub(crate) enum CouponStatus {
    Active,
    Redeemed,
    Void,
    Expired,
}

/// An amount in dollars: an integer when whole, else a number with two decimals.
#[derive(ToSchema)]
#[schema(value_type = f64, example = 49.5)]
pub(crate) struct Money(f64);
