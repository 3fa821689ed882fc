//! Schemas of the OpenAPI documents for the JSON the handlers answer with.
//!
//! The response types live in `partner-domain`, which stays free of web and documentation crates;
//! their wire shapes (custom `Serialize` impls for timestamps, money, codes) are described here, one
//! schema per domain type, named after the spec's resource. They are never serialized: they only
//! describe what the domain types serialize to. Drift shows in the conformance run
//! (`.ci/conformance`), which checks every live answer against these schemas. Request bodies are
//! the handlers' own `Deserialize` structs, deriving `ToSchema` where they are defined.

#![allow(dead_code)]

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
    ApiKeysUnavailable,
    InternalError,
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

/// `LeadRow` of the spec. `email` and `phone` are masked without the lead's consent.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({
    "id": "0b5c7a4e-1f0e-4c43-9a39-3f1f4b8e2a10", "partnerId": "demo-clinic", "subId": "1",
    "firstName": "Ana", "lastName": "Lopez", "email": "ana@example.com", "phone": "+15551234567",
    "origin": "quiz", "location": "Austin, TX", "questionId": null,
    "createdAt": "2026-11-21T10:00:00.000Z", "updatedAt": "2026-11-21T10:00:00.000Z",
    "isTest": false, "testSource": null
}))]
pub(crate) struct Lead {
    #[schema(format = Uuid)]
    id: String,
    partner_id: String,
    /// The sub-account number; empty when the lead is not attributed to one.
    sub_id: String,
    first_name: String,
    last_name: String,
    email: String,
    phone: String,
    origin: String,
    location: String,
    #[schema(required = true)]
    question_id: Option<String>,
    #[schema(format = DateTime)]
    created_at: String,
    #[schema(format = DateTime)]
    updated_at: String,
    is_test: bool,
    #[schema(required = true)]
    test_source: Option<TestSource>,
}

/// `{ data: Lead[], page }`.
#[derive(ToSchema)]
pub(crate) struct LeadPage {
    data: Vec<Lead>,
    page: PageInfoDoc,
}

/// The spec's `Order`. `partnerId`, `customerName` and `customerEmail` are present for admin
/// tokens only.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({
    "orderId": "ord_1001", "createdDate": "2026-11-20T15:30:00.000Z", "subAccount": "Front desk",
    "product": "Semaglutide 3 months", "amount": 897, "commission": 89.7, "status": "paid",
    "isTest": false
}))]
pub(crate) struct Order {
    order_id: String,
    #[schema(format = DateTime)]
    created_date: String,
    sub_account: String,
    product: String,
    amount: Money,
    commission: Money,
    status: String,
    is_test: bool,
    #[schema(nullable = false, required = false)]
    partner_id: Option<String>,
    #[schema(required = false)]
    customer_name: Option<String>,
    #[schema(required = false)]
    customer_email: Option<String>,
}

/// `{ data: Order[] }`, the whole history.
#[derive(ToSchema)]
pub(crate) struct OrderList {
    data: Vec<Order>,
}

/// The spec's `Payout`.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({
    "recordId": "5d0e3f2a-8c1b-4a8e-9b7e-2f4c6d8e0a12", "email": "partners@demo-clinic.test",
    "createdAt": "2026-11-01", "payoutDate": "2026-11-01", "payoutAmount": 1250.5, "status": "paid"
}))]
pub(crate) struct Payout {
    #[schema(format = Uuid)]
    record_id: String,
    email: String,
    #[schema(format = Date)]
    created_at: String,
    #[schema(format = Date)]
    payout_date: String,
    payout_amount: Money,
    status: String,
}

/// `{ data: Payout[] }`.
#[derive(ToSchema)]
pub(crate) struct PayoutList {
    data: Vec<Payout>,
}

/// `PortalSubAccount` of the spec. `email` is the owning partner's contact email.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({
    "id": "9f3c1e2d-4b5a-4c6d-8e7f-0a1b2c3d4e5f", "email": "partners@demo-clinic.test",
    "subId": "1", "nickname": "Front desk",
    "createdAt": "2026-11-21T10:00:00.000Z", "updatedAt": "2026-11-21T10:00:00.000Z"
}))]
pub(crate) struct SubAccount {
    #[schema(format = Uuid)]
    id: String,
    email: String,
    #[schema(pattern = "^[0-9]{1,3}$")]
    sub_id: String,
    nickname: String,
    #[schema(format = DateTime)]
    created_at: String,
    #[schema(format = DateTime)]
    updated_at: String,
}

#[derive(ToSchema)]
pub(crate) struct SubAccountList {
    data: Vec<SubAccount>,
}

#[derive(ToSchema)]
pub(crate) struct SubAccountData {
    data: SubAccount,
}

#[derive(ToSchema)]
pub(crate) struct OkData {
    data: Ok,
}

/// `DnaProductLink` of the spec.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DnaProductLink {
    #[schema(format = Uuid)]
    record_id: String,
    email: String,
    partner_id: String,
    product_name: String,
    description: String,
    intake_url: String,
    product_image_url: String,
    minimum_price: Money,
    recommended_price: Money,
    maximum_price: Money,
    user_set_price: Money,
    parent_product: Vec<String>,
    available: bool,
}

#[derive(ToSchema)]
pub(crate) struct DnaLinkList {
    data: Vec<DnaProductLink>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MedicalTierView {
    key: String,
    label: String,
    min_price: Money,
    max_price: Money,
    user_price: Money,
    commission: Money,
}

/// `PartnerProductLink` of the spec.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PartnerProductLink {
    #[schema(format = Uuid)]
    record_id: String,
    email: String,
    partner_id: String,
    product_name: String,
    details: String,
    url: String,
    legacy_url: String,
    /// `self-hosted` or `legacy`.
    url_style: String,
    image_url: String,
    category: Vec<Category>,
    suggested_prices: String,
    tiers: Vec<MedicalTierView>,
}

/// `{ data, sub }`: `sub` echoes the `sub` query parameter (`null` without it).
#[derive(ToSchema)]
pub(crate) struct MedicalLinkList {
    data: Vec<PartnerProductLink>,
    #[schema(required = true)]
    sub: Option<String>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CareTierView {
    key: String,
    label: String,
    user_price: Money,
    commission: Money,
    url: String,
}

/// `CareServiceLink` of the spec.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CareServiceLink {
    #[schema(format = Uuid)]
    record_id: String,
    service: CareService,
    product_name: String,
    description: String,
    image_url: String,
    url: String,
    redeem_url: String,
    tiers: Vec<CareTierView>,
}

/// `{ data, sub, service, duration }`, echoing the query (`null` where absent).
#[derive(ToSchema)]
pub(crate) struct CareLinkList {
    data: Vec<CareServiceLink>,
    #[schema(required = true)]
    sub: Option<String>,
    #[schema(required = true)]
    service: Option<CareService>,
    #[schema(minimum = 1, maximum = 12, required = true)]
    duration: Option<u8>,
}

/// `CareServiceCoupon` of the spec (plus `subAccountId`, the attributed sub-account's subId).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({
    "id": "3a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", "code": "K7Q2M9X4P1ZD", "partnerId": "demo-clinic",
    "subAccountId": null, "productSlug": "urgent-care", "months": 3, "status": "active",
    "expiresAt": null, "redeemedAt": null, "redeemedEmail": null,
    "redeemedProviderPrimaryExternalId": null,
    "bulkOrderId": "7b8c9d0e-1f2a-4b3c-8d4e-5f6a7b8c9d0e",
    "purchaserEmail": "hr@acme.test", "purchaserSource": "invoice", "unitPriceCents": 4900,
    "notes": null, "createdAt": "2026-11-21T10:00:00.000Z"
}))]
pub(crate) struct Coupon {
    #[schema(format = Uuid)]
    id: String,
    #[schema(pattern = "^[A-Z0-9]{12}$")]
    code: String,
    partner_id: String,
    #[schema(required = true)]
    sub_account_id: Option<String>,
    product_slug: ProductSlug,
    #[schema(minimum = 1, maximum = 12)]
    months: u8,
    status: CouponStatus,
    #[schema(format = DateTime, required = true)]
    expires_at: Option<String>,
    #[schema(format = DateTime, required = true)]
    redeemed_at: Option<String>,
    #[schema(required = true)]
    redeemed_email: Option<String>,
    #[schema(required = true)]
    redeemed_provider_primary_external_id: Option<String>,
    #[schema(format = Uuid)]
    bulk_order_id: String,
    purchaser_email: String,
    purchaser_source: String,
    unit_price_cents: i64,
    #[schema(required = true)]
    notes: Option<String>,
    #[schema(format = DateTime)]
    created_at: String,
}

/// `{ data, total, limit, offset }`: an offset page of coupons.
#[derive(ToSchema)]
pub(crate) struct CouponList {
    data: Vec<Coupon>,
    total: u64,
    #[schema(minimum = 1, maximum = 500)]
    limit: u16,
    offset: u64,
}

/// An issued bulk order.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BulkOrder {
    #[schema(format = Uuid)]
    bulk_order_id: String,
    coupons: Vec<Coupon>,
}

#[derive(ToSchema)]
pub(crate) struct BulkOrderData {
    data: BulkOrder,
}

#[derive(ToSchema)]
pub(crate) struct CouponData {
    data: Coupon,
}

#[derive(ToSchema)]
pub(crate) struct CustomHeader {
    name: String,
    value: String,
}

/// A webhook endpoint as partners see it: never its secret, except `secret` in the answer that
/// generated it.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({
    "id": "c1d2e3f4-a5b6-4c7d-8e9f-0a1b2c3d4e5f", "url": "https://hooks.example.com/partner",
    "events": ["lead.created", "order.created"], "leadCreatedDelay": null, "customHeader": null,
    "hasSecret": true, "createdAt": "2026-11-21T10:00:00.000Z", "status": "enabled",
    "disabledReason": null, "disabledAt": null, "previousSecretExpiresAt": null
}))]
pub(crate) struct WebhookEndpoint {
    #[schema(format = Uuid)]
    id: String,
    url: String,
    events: Vec<EventType>,
    #[schema(value_type = Option<String>, pattern = "^(1m|5m|1h)$", required = true)]
    lead_created_delay: Option<String>,
    #[schema(required = true)]
    custom_header: Option<CustomHeader>,
    has_secret: bool,
    #[schema(format = DateTime)]
    created_at: String,
    #[schema(pattern = "^(enabled|disabled)$")]
    status: String,
    #[schema(value_type = Option<String>, pattern = "^(gone|failing)$", required = true)]
    disabled_reason: Option<String>,
    #[schema(format = DateTime, required = true)]
    disabled_at: Option<String>,
    #[schema(format = DateTime, required = true)]
    previous_secret_expires_at: Option<String>,
    /// Present only in the answer that generated it.
    #[schema(nullable = false, required = false)]
    secret: Option<String>,
}

#[derive(ToSchema)]
pub(crate) struct WebhookEndpointList {
    data: Vec<WebhookEndpoint>,
}

#[derive(ToSchema)]
pub(crate) struct WebhookEndpointData {
    data: WebhookEndpoint,
}

/// `WebhookDelivery`.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WebhookDelivery {
    #[schema(format = Uuid)]
    id: String,
    #[schema(format = Uuid)]
    endpoint_id: String,
    event: String,
    #[schema(pattern = "^(pending|delivered|failed)$")]
    status: String,
    attempts: i32,
    #[schema(format = DateTime, required = true)]
    next_attempt_at: Option<String>,
    #[schema(format = DateTime, required = true)]
    last_attempt_at: Option<String>,
    #[schema(required = true)]
    last_status_code: Option<i32>,
    #[schema(required = true)]
    last_error: Option<String>,
    #[schema(format = DateTime)]
    created_at: String,
    #[schema(format = DateTime, required = true)]
    delivered_at: Option<String>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AttemptLogEntry {
    #[schema(format = DateTime)]
    attempted_at: String,
    #[schema(required = true)]
    status_code: Option<i32>,
    #[schema(required = true)]
    duration_ms: Option<i32>,
    #[schema(required = true)]
    error: Option<String>,
}

/// A delivery with its last attempts, oldest first.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WebhookDeliveryDetail {
    #[schema(format = Uuid)]
    id: String,
    #[schema(format = Uuid)]
    endpoint_id: String,
    event: String,
    #[schema(pattern = "^(pending|delivered|failed)$")]
    status: String,
    attempts: i32,
    #[schema(format = DateTime, required = true)]
    next_attempt_at: Option<String>,
    #[schema(format = DateTime, required = true)]
    last_attempt_at: Option<String>,
    #[schema(required = true)]
    last_status_code: Option<i32>,
    #[schema(required = true)]
    last_error: Option<String>,
    #[schema(format = DateTime)]
    created_at: String,
    #[schema(format = DateTime, required = true)]
    delivered_at: Option<String>,
    attempt_log: Vec<AttemptLogEntry>,
}

#[derive(ToSchema)]
pub(crate) struct WebhookDeliveryPage {
    data: Vec<WebhookDelivery>,
    page: PageInfoDoc,
}

#[derive(ToSchema)]
pub(crate) struct WebhookDeliveryData {
    data: WebhookDelivery,
}

#[derive(ToSchema)]
pub(crate) struct WebhookDeliveryDetailData {
    data: WebhookDeliveryDetail,
}

#[derive(ToSchema)]
pub(crate) struct Requeued {
    /// Deliveries queued again by this call (at most 1,000, oldest first).
    requeued: u64,
    /// How many more match: calling again continues.
    remaining: u64,
}

#[derive(ToSchema)]
pub(crate) struct RequeuedData {
    data: Requeued,
}

/// A product of the public catalog.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CatalogProduct {
    #[schema(format = Uuid)]
    id: String,
    name: String,
    image: String,
    image_kind: String,
    #[schema(format = Uuid)]
    image_file_id: String,
    image_source_url: String,
    intake_url: String,
    #[serde(rename = "price1Month")]
    #[schema(example = "$299.00")]
    price_1_month: String,
    #[serde(rename = "price3Month")]
    price_3_month: String,
    #[serde(rename = "price6Month")]
    price_6_month: String,
    details: String,
}

/// `{ products, count }`.
#[derive(ToSchema)]
pub(crate) struct CatalogList {
    products: Vec<CatalogProduct>,
    count: u64,
}

// --- The operator API ---

#[derive(ToSchema)]
pub(crate) struct LeadData {
    data: Lead,
}

#[derive(ToSchema)]
pub(crate) struct OrderData {
    data: Order,
}

#[derive(ToSchema)]
pub(crate) struct PayoutData {
    data: Payout,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CareServicesAccess {
    subscription_active: bool,
    manual_override: bool,
    yearly_bundle: bool,
    services: Vec<CareService>,
}

/// A partner account.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({
    "partnerId": "demo-clinic", "name": "Demo Clinic", "email": "partners@demo-clinic.test",
    "active": true, "dnaAccess": true, "headlessLinks": true, "defaultLang": "en",
    "enabledLangs": ["en", "es"],
    "careServices": { "subscriptionActive": true, "manualOverride": false, "yearlyBundle": true,
                      "services": ["primary-care"] },
    "createdAt": "2026-11-21T10:00:00.000Z", "updatedAt": "2026-11-21T10:00:00.000Z"
}))]
pub(crate) struct Partner {
    partner_id: String,
    name: String,
    email: String,
    active: bool,
    dna_access: bool,
    headless_links: bool,
    default_lang: Lang,
    enabled_langs: Vec<Lang>,
    care_services: CareServicesAccess,
    #[schema(format = DateTime)]
    created_at: String,
    #[schema(format = DateTime)]
    updated_at: String,
}

#[derive(ToSchema)]
pub(crate) struct PartnerData {
    data: Partner,
}

/// The global Care Services switches, one per service.
#[derive(ToSchema)]
pub(crate) struct CareFlags {
    #[serde(rename = "primary-care")]
    primary_care: bool,
    #[serde(rename = "urgent-care")]
    urgent_care: bool,
    #[serde(rename = "mental-health")]
    mental_health: bool,
    dermatology: bool,
    #[serde(rename = "veterinary-care")]
    veterinary_care: bool,
}

#[derive(ToSchema)]
pub(crate) struct CareFlagsData {
    data: CareFlags,
}

/// A change of some switches: service name to on/off.
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CareFlagsChange {
    #[serde(rename = "primary-care")]
    primary_care: Option<bool>,
    #[serde(rename = "urgent-care")]
    urgent_care: Option<bool>,
    #[serde(rename = "mental-health")]
    mental_health: Option<bool>,
    dermatology: Option<bool>,
    #[serde(rename = "veterinary-care")]
    veterinary_care: Option<bool>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PortalUser {
    #[schema(format = Uuid)]
    id: String,
    email: String,
    partner_id: String,
    admin: bool,
    #[schema(format = DateTime)]
    created_at: String,
}

#[derive(ToSchema)]
pub(crate) struct PortalUserData {
    data: PortalUser,
}

/// What is known of a token after creation: never its text.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ApiTokenInfo {
    #[schema(format = Uuid)]
    id: String,
    token_prefix: String,
    #[schema(format = DateTime)]
    created_at: String,
    #[schema(format = DateTime, required = true)]
    expires_at: Option<String>,
    #[schema(format = DateTime, required = true)]
    revoked_at: Option<String>,
    #[schema(format = DateTime, required = true)]
    last_used_at: Option<String>,
}

#[derive(ToSchema)]
pub(crate) struct ApiTokenList {
    data: Vec<ApiTokenInfo>,
}

/// A token just created or rotated: the only time its text is shown.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct IssuedToken {
    #[schema(format = Uuid)]
    id: String,
    token: String,
    token_prefix: String,
    #[schema(format = DateTime)]
    created_at: String,
    #[schema(format = DateTime, required = true)]
    expires_at: Option<String>,
}

#[derive(ToSchema)]
pub(crate) struct IssuedTokenData {
    data: IssuedToken,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CommissionSummary {
    order_count: u64,
    commission_total: Money,
    excluded_test_orders: u64,
}

#[derive(ToSchema)]
pub(crate) struct CommissionSummaryData {
    data: CommissionSummary,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MedicalTier {
    key: String,
    label: String,
    months: u8,
    min_price: Money,
    max_price: Money,
    recommended_price: Money,
    commission: Money,
}

/// A stored medical product.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MedicalProduct {
    #[schema(format = Uuid)]
    id: String,
    name: String,
    categories: Vec<Category>,
    details: String,
    image_url: String,
    #[schema(format = Uuid)]
    image_file_id: String,
    image_source_url: String,
    active: bool,
    legacy_path: String,
    #[schema(required = true)]
    self_hosted_slug: Option<String>,
    self_hosted_langs: Vec<Lang>,
    suggested_prices: String,
    tiers: Vec<MedicalTier>,
    #[schema(format = DateTime)]
    created_at: String,
    #[schema(format = DateTime)]
    updated_at: String,
}

#[derive(ToSchema)]
pub(crate) struct MedicalProductData {
    data: MedicalProduct,
}

/// A stored DNA product.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DnaProduct {
    #[schema(format = Uuid)]
    id: String,
    product_name: String,
    description: String,
    intake_path: String,
    product_image_url: String,
    minimum_price: Money,
    recommended_price: Money,
    maximum_price: Money,
    parent_product: Vec<String>,
    available: bool,
    #[schema(format = DateTime)]
    created_at: String,
    #[schema(format = DateTime)]
    updated_at: String,
}

#[derive(ToSchema)]
pub(crate) struct DnaProductData {
    data: DnaProduct,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CareTier {
    key: String,
    label: String,
    months: u8,
    user_price: Money,
    commission: Money,
}

/// A stored Care Services product.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CareProduct {
    #[schema(format = Uuid)]
    id: String,
    service: CareService,
    slug: String,
    product_name: String,
    description: String,
    image_url: String,
    tiers: Vec<CareTier>,
    #[schema(format = DateTime)]
    created_at: String,
    #[schema(format = DateTime)]
    updated_at: String,
}

#[derive(ToSchema)]
pub(crate) struct CareProductData {
    data: CareProduct,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MedicalPrices {
    partner_id: String,
    #[schema(format = Uuid)]
    product_id: String,
    tier_prices: std::collections::BTreeMap<String, Money>,
}

#[derive(ToSchema)]
pub(crate) struct MedicalPricesData {
    data: MedicalPrices,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DnaPrice {
    partner_id: String,
    #[schema(format = Uuid)]
    product_id: String,
    user_set_price: Money,
}

#[derive(ToSchema)]
pub(crate) struct DnaPriceData {
    data: DnaPrice,
}
