//! Payouts: the partner's listing, streamed (`GET /api/v1/payouts`), and the operator's
//! recording of a payout (`POST /internal/v1/payouts`).

use actix_web::{HttpRequest, HttpResponse, http::StatusCode, web};
use partner_domain::kernel::values::{Money, PartnerId, text};
use partner_domain::payout::{NewPayout, PayoutService, parse_date};
use serde::Deserialize;

use super::fields::optional_text;
use super::streaming::{CHUNK, stream_data};
use super::{Result, data};
use crate::AppState;
use crate::error::ApiError;
use crate::extract::JsonBody;

use crate::middleware::one_trip;
use crate::ratelimit::Group;

/// `{ data: Payout[] }`, streamed chunk by chunk.
#[utoipa::path(
    get, path = "/api/v1/payouts", tag = "activity",
    responses((status = 200, description = "Every payout of the partner (streamed)", body = crate::routes::schemas::PayoutList))
)]
pub(super) async fn list(req: HttpRequest) -> HttpResponse {
    // The first chunk is read with the token's record (one round trip); the following ones,
    // after authentication, for the authenticated partner.
    one_trip(
        &req,
        Group::Payouts,
        None,
        async |st, token| {
            Ok(st
                .payouts
                .first_chunk_for_token(st.auth.key(&token), CHUNK)
                .await?)
        },
        |st, me, payouts| {
            let first = PayoutService::chunk_of(payouts, CHUNK);
            let (state, partner) = (st.clone(), me.partner_id().clone());
            Ok(stream_data(first, move |after| {
                let (state, partner) = (state.clone(), partner.clone());
                async move { state.payouts.chunk(&partner, Some(after), CHUNK).await }
            }))
        },
    )
    .await
}

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = PayoutIngest)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct PayoutBody {
    partner_id: String,
    payout_date: String,
    payout_amount: f64,
    status: String,
    receipt_url: Option<String>,
    note: Option<String>,
}

#[utoipa::path(
    post, path = "/internal/v1/payouts", tag = "activity", request_body = PayoutBody,
    responses(
        (status = 201, description = "The stored payout", body = crate::routes::schemas::PayoutData),
        (status = 400, description = "A field is invalid", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No partner with that `partnerId`", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn create_payout(
    state: web::Data<AppState>,
    JsonBody(b): JsonBody<PayoutBody>,
) -> Result {
    let new = NewPayout {
        partner_id: PartnerId::parse(&b.partner_id)?,
        payout_date: parse_date(&b.payout_date)
            .ok_or_else(|| ApiError::invalid("payoutDate must be YYYY-MM-DD"))?,
        amount: Money::parse(b.payout_amount, "payoutAmount")?,
        status: text("status", &b.status, 1, 32)?,
        receipt_url: optional_text(b.receipt_url.as_deref(), "receiptUrl", 2048)?,
        note: optional_text(b.note.as_deref(), "note", 2000)?,
    };
    Ok(data(StatusCode::CREATED, state.payouts.record(new).await?))
}
