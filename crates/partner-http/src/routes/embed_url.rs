//! `GET /api/v1/embed` (issue 28): the address of the partner's embedded Care Services view
//! (`docs/embedding.md`), so it need not be pieced together from the catalog address and the
//! partner id, and the `origin` the host snippet compares messages with.

use actix_web::{HttpRequest, HttpResponse};
use serde::Serialize;

use super::ok;
use crate::error::ApiError;
use crate::middleware::one_trip;
use crate::ratelimit::Group;

/// The embedded view's address.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = EmbedUrl)]
pub(crate) struct EmbedOut {
    /// `{catalog_url}/embed/care-services?partner_id=<partner id>`: the iframe's `src`. Append
    /// `&service=`, `&m=`, `&sub=`, `&redeem=true` or `&lang=` as `docs/embedding.md` lists. A
    /// shareable tracking link, not a secret.
    #[schema(example = "https://catalog.example.com/embed/care-services?partner_id=demo-clinic")]
    url: String,
    /// The scheme, host and port (when not the default) of `url`: what the host snippet compares
    /// `event.origin` with.
    #[schema(example = "https://catalog.example.com")]
    origin: String,
}

#[derive(utoipa::ToSchema)]
pub(crate) struct EmbedUrlData {
    #[allow(dead_code)]
    data: EmbedOut,
}

/// The view's address for `partner` under `catalog` (`PARTNER_CATALOG_URL`).
pub(crate) fn embed_url(
    catalog: &url::Url,
    partner: &str,
) -> std::result::Result<(String, String), ApiError> {
    // `{catalog_url}/embed/care-services`, as the catalog's own addresses are built.
    let base = catalog.as_str().trim_end_matches('/');
    let mut url = url::Url::parse(&format!("{base}/embed/care-services"))
        .map_err(|e| ApiError::internal(&format!("PARTNER_CATALOG_URL: {e}")))?;
    url.set_fragment(None);
    url.query_pairs_mut()
        .clear()
        .append_pair("partner_id", partner);
    Ok((url.to_string(), url.origin().ascii_serialization()))
}

#[utoipa::path(
    get, path = "/api/v1/embed", tag = "links",
    responses(
        (status = 200, description = "The address of the partner's embedded Care Services view", body = EmbedUrlData),
        (status = 404, description = "The Care Services API is disabled", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn show(req: HttpRequest) -> HttpResponse {
    // The token's record is all it reads ([`one_trip`] stands in for the partner guard).
    one_trip(
        &req,
        Group::Links,
        None,
        async |st, token| st.auth.lookup(&token).await,
        |st, me, ()| {
            let (url, origin) = embed_url(&st.catalog_url, me.partner_id().as_str())?;
            Ok(ok(EmbedOut { url, origin }))
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_joins_the_catalog_address_and_the_origin_keeps_the_port() {
        let at = |s: &str| url::Url::parse(s).expect("url");
        assert_eq!(
            embed_url(&at("https://catalog.example.com"), "acme").expect("url"),
            (
                "https://catalog.example.com/embed/care-services?partner_id=acme".to_owned(),
                "https://catalog.example.com".to_owned()
            )
        );
        assert_eq!(
            embed_url(&at("http://127.0.0.1:8080/"), "a b").expect("url"),
            (
                "http://127.0.0.1:8080/embed/care-services?partner_id=a+b".to_owned(),
                "http://127.0.0.1:8080".to_owned()
            )
        );
    }
}
