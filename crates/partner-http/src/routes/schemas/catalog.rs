//! The `{ data }` wrappers of the operator's products and partner prices (the answers
//! themselves are in [`crate::routes::catalog`]).

#![allow(dead_code)]

use utoipa::ToSchema;

#[allow(unused_imports)]
use super::*;

#[derive(ToSchema)]
pub(crate) struct MedicalProductData {
    data: crate::routes::catalog::MedicalProductOut<'static>,
}

#[derive(ToSchema)]
pub(crate) struct DnaProductData {
    data: crate::routes::catalog::DnaProductOut<'static>,
}

#[derive(ToSchema)]
pub(crate) struct CareProductData {
    data: crate::routes::catalog::CareProductOut<'static>,
}

#[derive(ToSchema)]
pub(crate) struct MedicalPricesData {
    data: crate::routes::catalog::MedicalPricesOut<'static>,
}

#[derive(ToSchema)]
pub(crate) struct DnaPriceData {
    data: crate::routes::catalog::DnaPriceOut<'static>,
}
