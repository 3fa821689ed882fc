//! Leads, orders, payouts and sub-accounts.

#![allow(dead_code)]

use utoipa::ToSchema;

#[allow(unused_imports)]
use super::*;

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
