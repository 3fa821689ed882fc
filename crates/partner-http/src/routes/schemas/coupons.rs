//! Care Services coupons.

#![allow(dead_code)]

use utoipa::ToSchema;

#[allow(unused_imports)]
use super::*;
use crate::routes::coupons::{BulkOrderOut, CouponOut};

/// `{ data, total, limit, offset }`: an offset page of coupons.
#[derive(ToSchema)]
pub(crate) struct CouponList {
    data: Vec<CouponOut<'static>>,
    total: u64,
    #[schema(minimum = 1, maximum = 500)]
    limit: u16,
    offset: u64,
}

#[derive(ToSchema)]
pub(crate) struct BulkOrderData {
    data: BulkOrderOut<'static>,
}

#[derive(ToSchema)]
pub(crate) struct CouponData {
    data: CouponOut<'static>,
}
