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

#[derive(ToSchema)]
pub(crate) struct SubAccountList {
    data: Vec<crate::routes::sub_accounts::SubAccountOut<'static>>,
}

#[derive(ToSchema)]
pub(crate) struct SubAccountData {
    data: crate::routes::sub_accounts::SubAccountOut<'static>,
}

#[derive(ToSchema)]
pub(crate) struct OkData {
    data: Ok,
}
