//! The partner's webhook portal (extensions §10): `POST /api/v1/portal-sessions` mints a one-time
//! link, `POST /portal/v1/sessions` exchanges its code for a portal bearer, and `GET /portal`
//! serves the page (with its script and style sheet), embedded in the binary.

use actix_web::http::header;
use actix_web::{HttpResponse, http::StatusCode, web};
use partner_domain::kernel::wire;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::{Result, data};
use crate::AppState;
use crate::error::ApiError;
use crate::extract::JsonBody;
use crate::middleware::Caller;

/// A minted link.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = PortalLink)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LinkOut {
    /// `{base_url}/portal#code=<one-time code>`: usable once, until `expiresAt`.
    url: String,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String, format = DateTime)]
    expires_at: OffsetDateTime,
}

/// A portal session.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = PortalSession)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SessionOut {
    /// A bearer for the webhook and endpoint calls of the partner, until `expiresAt`.
    token: String,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String, format = DateTime)]
    expires_at: OffsetDateTime,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = PortalExchange)]
#[serde(deny_unknown_fields)]
pub(super) struct ExchangeBody {
    /// The code from the link's fragment.
    code: String,
}

/// The link's address: `{base}/portal` with the code in the fragment (never sent to a server).
fn link(base: &url::Url, code: &str) -> std::result::Result<String, ApiError> {
    let mut url = base
        .join("portal")
        .map_err(|e| ApiError::internal(&format!("PARTNER_BASE_URL cannot carry a path: {e}")))?;
    url.set_query(None);
    url.set_fragment(Some(&format!("code={code}")));
    Ok(url.into())
}

#[utoipa::path(
    post, path = "/api/v1/portal-sessions", tag = "webhooks",
    responses(
        (status = 201, description = "A one-time link to the webhook portal", body = crate::routes::schemas::PortalLinkData),
        (status = 403, description = "`forbidden`: the partner account is inactive, or the caller is a portal session", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn mint(state: web::Data<AppState>, Caller(me): Caller) -> Result {
    let code = state.portal.mint(&me).await?;
    Ok(data(
        StatusCode::CREATED,
        LinkOut {
            url: link(&state.base_url, code.expose())?,
            expires_at: code.expires_at(),
        },
    ))
}

#[utoipa::path(
    post, path = "/portal/v1/sessions", tag = "portal", request_body = ExchangeBody, security(()),
    responses(
        (status = 201, description = "A portal session", body = crate::routes::schemas::PortalSessionData),
        (status = 400, description = "`invalid_request`: the code is unknown, used or expired", body = crate::routes::schemas::ErrorBody),
        (status = 429, description = "`rate_limited`: this client address is over the public budget", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn exchange(
    state: web::Data<AppState>,
    JsonBody(b): JsonBody<ExchangeBody>,
) -> Result {
    let session = state.portal.exchange(&b.code).await?;
    Ok(HttpResponse::build(StatusCode::CREATED)
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(serde_json::json!({ "data": SessionOut {
            token: session.token().expose().to_owned(),
            expires_at: session.expires_at(),
        }})))
}

#[cfg(test)]
mod tests {
    use super::link;

    #[test]
    fn the_code_goes_in_the_fragment_of_the_portal_path() {
        for (base, want) in [
            (
                "https://partners.example.com",
                "https://partners.example.com/portal#code=abc",
            ),
            (
                "https://partners.example.com/",
                "https://partners.example.com/portal#code=abc",
            ),
            (
                "https://x.example/base/",
                "https://x.example/base/portal#code=abc",
            ),
            (
                "https://x.example/?q=1#f",
                "https://x.example/portal#code=abc",
            ),
        ] {
            let base = url::Url::parse(base).expect("url");
            assert_eq!(link(&base, "abc").expect("link"), want);
        }
    }
}
