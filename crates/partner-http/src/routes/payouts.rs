//! Payouts: the partner's listing, streamed (`GET /api/v1/payouts`), and the operator's
//! recording of a payout (`POST /internal/v1/payouts`).

use actix_web::{HttpRequest, HttpResponse, http::StatusCode, web};
use partner_domain::kernel::ids::PayoutId;
use partner_domain::kernel::values::{Money, PartnerId, ValueError, text};
use partner_domain::payout::{NewPayout, Payout, PayoutService, format_date, parse_date_field};
use serde::{Deserialize, Serialize, Serializer};
use time::Date;

use super::fields::optional_text;
use super::streaming::{CHUNK, stream_data};
use super::{Result, data};
use crate::AppState;
use crate::error::ApiError;
use crate::extract::JsonBody;

use crate::middleware::one_trip;
use crate::ratelimit::Group;

/// The spec's `Payout`.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Payout, example = json!({
    "recordId": "5d0e3f2a-8c1b-4a8e-9b7e-2f4c6d8e0a12", "email": "partners@demo-clinic.test",
    "createdAt": "2026-11-01", "payoutDate": "2026-11-01", "payoutAmount": 1250.5, "status": "paid"
}))]
pub(crate) struct PayoutOut<'a> {
    #[schema(value_type = String, format = Uuid)]
    record_id: PayoutId,
    email: &'a str,
    #[serde(serialize_with = "date")]
    #[schema(value_type = String, format = Date)]
    created_at: Date,
    #[serde(serialize_with = "date")]
    #[schema(value_type = String, format = Date)]
    payout_date: Date,
    #[schema(value_type = crate::routes::schemas::Money)]
    payout_amount: Money,
    status: &'a str,
}

impl<'a> From<&'a Payout> for PayoutOut<'a> {
    fn from(p: &'a Payout) -> Self {
        Self {
            record_id: p.id(),
            email: p.email(),
            created_at: p.created_at(),
            payout_date: p.payout_date(),
            payout_amount: p.amount(),
            status: p.status(),
        }
    }
}

fn date<S: Serializer>(d: &Date, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&format_date(*d))
}

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
            let wire =
                |out: &mut Vec<u8>, p: &Payout| serde_json::to_writer(out, &PayoutOut::from(p));
            Ok(stream_data(first, wire, move |after| {
                let (state, partner) = (state.clone(), partner.clone());
                async move { state.payouts.chunk(&partner, Some(after), CHUNK).await }
            }))
        },
    )
    .await
}

/// One payout by its `recordId` (extensions §8.2).
#[utoipa::path(
    get, path = "/api/v1/payouts/{recordId}", tag = "activity",
    params(("recordId" = String, Path, description = "The payout's `recordId` (a UUID)", format = Uuid)),
    responses(
        (status = 200, description = "The payout, as the listing shows it", body = crate::routes::schemas::PayoutData),
        (status = 400, description = "`recordId` is not a UUID", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "The partner has no payout with that id", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn one(req: HttpRequest, path: web::Path<String>) -> HttpResponse {
    // One round trip, as the listing; a malformed id answers 400 after authentication.
    let id = match crate::extract::uuid(&path, "recordId") {
        Ok(id) => PayoutId::from_uuid(id),
        Err(e) => return super::refused_after_admission(&req, Group::Payouts, e).await,
    };
    one_trip(
        &req,
        Group::Payouts,
        None,
        async move |st, token| Ok(st.payouts.find_for_token(st.auth.key(&token), id).await?),
        |_, _, payout| match payout {
            Some(p) => Ok(super::ok(PayoutOut::from(&p))),
            None => Err(ApiError::not_found("no such payout")),
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
    let payout = state.payouts.record(NewPayout::try_from(b)?).await?;
    Ok(data(StatusCode::CREATED, PayoutOut::from(&payout)))
}

impl TryFrom<PayoutBody> for NewPayout {
    type Error = ValueError;

    fn try_from(b: PayoutBody) -> std::result::Result<Self, ValueError> {
        Ok(Self {
            partner_id: PartnerId::parse(&b.partner_id)?,
            payout_date: parse_date_field(&b.payout_date, "payoutDate")?,
            amount: Money::parse(b.payout_amount, "payoutAmount")?,
            status: text("status", &b.status, 1, 32)?,
            receipt_url: optional_text(b.receipt_url.as_deref(), "receiptUrl", 2048)?,
            note: optional_text(b.note.as_deref(), "note", 2000)?,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]

    use partner_domain::kernel::values::PartnerId;
    use time::macros::date;

    use super::*;

    #[test]
    fn a_payout_has_exactly_the_contract_fields() {
        let p = Payout::new(
            PayoutId::from_uuid(uuid::Uuid::nil()),
            "ops@acme.test".into(),
            date!(2026 - 11 - 21),
            NewPayout {
                partner_id: PartnerId::parse("acme").expect("id"),
                payout_date: date!(2026 - 11 - 30),
                amount: Money::from_cents(123450),
                status: "paid".into(),
                receipt_url: Some("https://r".into()),
                note: Some("secret".into()),
            },
        );
        let v = serde_json::to_value(PayoutOut::from(&p)).expect("json");
        assert_eq!(
            v,
            serde_json::json!({ "recordId": uuid::Uuid::nil(), "email": "ops@acme.test", "createdAt": "2026-11-21",
                "payoutDate": "2026-11-30", "payoutAmount": 1234.5, "status": "paid" })
        );
    }
}
