//! Leads, orders, payouts and sub-accounts.

#![allow(dead_code)]

use utoipa::ToSchema;

#[allow(unused_imports)]
use super::*;
use crate::routes::leads::LeadOut;
use crate::routes::orders::OrderOut;
use crate::routes::payouts::PayoutOut;

/// `{ data: Lead[], page }`.
#[derive(ToSchema)]
pub(crate) struct LeadPage {
    data: Vec<LeadOut<'static>>,
    page: PageInfoDoc,
}

/// `{ data: Order[] }`, the whole history.
#[derive(ToSchema)]
pub(crate) struct OrderList {
    data: Vec<OrderOut<'static>>,
}

/// `{ data: Payout[] }`.
#[derive(ToSchema)]
pub(crate) struct PayoutList {
    data: Vec<PayoutOut<'static>>,
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
