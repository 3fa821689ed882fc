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
    // The link is a credential shown once (issue 23, N10).
    Ok(crate::idempotency::shown_once(data(
        StatusCode::CREATED,
        LinkOut {
            url: link(&state.base_url, code.expose())?,
            expires_at: code.expires_at(),
        },
    )))
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

/// The page, its script and its style sheet, embedded in the binary.
const PAGE: &str = include_str!("portal_page/index.html");
const SCRIPT: &str = include_str!("portal_page/app.js");
const STYLE: &str = include_str!("portal_page/app.css");

/// Only the page's own files run and style it; it calls only this origin; nothing may frame it.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The page's language: `?lang=en|es` first, then the browser's preference among the two
/// (`Accept-Language`, by quality, ties in the order given), else English.
fn language(query: &str, accept: Option<&str>) -> &'static str {
    for pair in query.split('&') {
        match pair {
            "lang=es" => return "es",
            "lang=en" => return "en",
            _ => {}
        }
    }
    let mut best: Option<(&'static str, f32)> = None;
    for item in accept.unwrap_or_default().split(',') {
        let mut parts = item.split(';');
        let tag = parts.next().unwrap_or_default().trim();
        let primary = tag.split('-').next().unwrap_or_default();
        let q = parts
            .find_map(|p| p.trim().strip_prefix("q="))
            .map_or(Some(1.0), |v| v.trim().parse::<f32>().ok())
            .unwrap_or(0.0);
        let lang = if primary.eq_ignore_ascii_case("es") {
            "es"
        } else if primary.eq_ignore_ascii_case("en") {
            "en"
        } else {
            continue;
        };
        if q > 0.0 && best.is_none_or(|(_, bq)| q > bq) {
            best = Some((lang, q));
        }
    }
    best.map_or("en", |(l, _)| l)
}

fn asset(content_type: &'static str, body: &'static str) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, content_type))
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header(("Referrer-Policy", "no-referrer"))
        .insert_header(("Cross-Origin-Resource-Policy", "same-origin"))
        .body(body)
}

#[utoipa::path(
    get, path = "/portal", tag = "portal", security(()),
    params(("lang" = Option<String>, Query, description = "`en` or `es` (else the browser's preference)")),
    responses(
        (status = 200, description = "The webhook portal page; it reads its one-time code from the fragment `#code=…`", content_type = "text/html", body = String),
        (status = 429, description = "`rate_limited`: this client address is over the public budget", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn page(req: actix_web::HttpRequest) -> HttpResponse {
    let accept = req
        .headers()
        .get(header::ACCEPT_LANGUAGE)
        .and_then(|v| v.to_str().ok());
    let lang = language(req.query_string(), accept);
    HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, "text/html; charset=utf-8"))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header(("Content-Security-Policy", CSP))
        .insert_header(("Referrer-Policy", "no-referrer"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::X_FRAME_OPTIONS, "DENY"))
        .insert_header(("Cross-Origin-Opener-Policy", "same-origin"))
        .insert_header((header::VARY, "Accept-Language"))
        .body(PAGE.replacen("__LANG__", lang, 1))
}

#[utoipa::path(
    get, path = "/portal/app.js", tag = "portal", security(()),
    responses((status = 200, description = "The portal page's script", content_type = "text/javascript", body = String))
)]
pub(super) async fn script() -> HttpResponse {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

#[utoipa::path(
    get, path = "/portal/app.css", tag = "portal", security(()),
    responses((status = 200, description = "The portal page's style sheet", content_type = "text/css", body = String))
)]
pub(super) async fn style() -> HttpResponse {
    asset("text/css; charset=utf-8", STYLE)
}

#[cfg(test)]
mod tests {
    use super::{language, link};

    #[test]
    fn the_language_is_the_query_then_the_browsers_preference_then_english() {
        for (query, accept, want) in [
            ("lang=es", Some("en"), "es"),
            ("x=1&lang=en", Some("es"), "en"),
            ("lang=fr", Some("es-MX,es;q=0.9"), "es"),
            ("", Some("fr, en;q=0.5, es;q=0.8"), "es"),
            ("", Some("fr, es;q=0, en;q=0.1"), "en"),
            ("", Some("de"), "en"),
            ("", None, "en"),
            ("", Some("ES"), "es"),
        ] {
            assert_eq!(language(query, accept), want, "{query} {accept:?}");
        }
    }

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
