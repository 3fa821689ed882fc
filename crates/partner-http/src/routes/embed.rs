//! The embedded Care Services view: `GET /embed/care-services`, an HTML page partners put in an
//! iframe (its URL is a shareable tracking link, not a secret). It lists the services the partner
//! can currently access, with the same links as `GET /api/v1/care-service-links`, and posts its
//! height to the host page as `{ type: "partner-api-docs-height", height }`.

use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpRequest, HttpResponse, web};
use partner_domain::links::{CareQuery, CareServiceLink, CatalogError};
use partner_domain::values::{CareService, PartnerId, SubId};

use super::Result;
use crate::AppState;
use crate::error::ApiError;
use crate::extract::Query;

pub(super) async fn care_services(state: web::Data<AppState>, req: HttpRequest) -> Result {
    let q = Query::of(&req)?;
    let partner = q
        .get("partner_id")
        .filter(|p| !p.is_empty())
        .ok_or_else(|| ApiError::invalid("partner_id is required"))
        .and_then(|p| {
            PartnerId::parse(p).map_err(|_| ApiError::invalid("partner_id is malformed"))
        })?;
    let service = q
        .get("service")
        .map(|s| {
            CareService::parse(s)
                .ok_or_else(|| ApiError::invalid("service must be one of the five service keys"))
        })
        .transpose()?;
    let months = crate::params::months(q.get("m"), "m")?;
    let sub = q
        .get("sub")
        .map(|s| SubId::parse(s).map_err(|_| ApiError::invalid("sub must be 1-250")))
        .transpose()?;
    let redeem = match q.get("redeem") {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => return Err(ApiError::invalid("redeem must be true")),
    };
    let query = CareQuery {
        service,
        sub,
        duration: None,
        lang: q.get("lang").map(str::to_owned),
    };
    let links = match state.links.care_embed(&partner, &query).await {
        Ok(l) => l,
        Err(CatalogError::UnknownPartner) => {
            return Err(ApiError::not_found("no active partner has that partner_id"));
        }
        Err(CatalogError::Repo(e)) => return Err(e.into()),
    };
    let mut res = HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8")))
        .insert_header((header::CACHE_CONTROL, HeaderValue::from_static("no-store")))
        // Meant to be framed by partner sites.
        .insert_header(("Content-Security-Policy", "frame-ancestors *; default-src 'self'; img-src https: data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'"))
        .body(page(&links, months, redeem));
    res.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    Ok(res)
}

/// Escapes text for HTML element content and double-quoted attributes.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn card(l: &CareServiceLink, months: Option<u8>, redeem: bool) -> String {
    let selected = months.and_then(|m| l.tiers.iter().find(|t| t.months == m));
    let (cta_href, cta_text) = if redeem {
        (l.redeem_url.as_str(), "Redeem a code".to_owned())
    } else {
        match selected {
            Some(t) => (t.url.as_str(), format!("Start {}", t.label)),
            None => (l.url.as_str(), "Get started".to_owned()),
        }
    };
    let tiers: String = if redeem {
        String::new()
    } else {
        l.tiers
            .iter()
            .map(|t| {
                let sel = selected.is_some_and(|s| s.key == t.key);
                format!(
                    "<li{}><a href=\"{}\" target=\"_top\">{} &middot; ${}</a></li>",
                    if sel {
                        " class=\"selected\" aria-current=\"true\""
                    } else {
                        ""
                    },
                    esc(&t.url),
                    esc(&t.label),
                    esc(&t.user_price.to_string()),
                )
            })
            .collect()
    };
    format!(
        "<section class=\"service\" data-service=\"{}\"><img src=\"{}\" alt=\"\"><h2>{}</h2><p>{}</p><ul>{}</ul>\
         <a class=\"cta\" href=\"{}\" target=\"_top\">{}</a></section>",
        esc(l.service.as_str()),
        esc(&l.image_url),
        esc(&l.product_name),
        esc(&l.description),
        tiers,
        esc(cta_href),
        esc(&cta_text),
    )
}

fn page(links: &[CareServiceLink], months: Option<u8>, redeem: bool) -> String {
    let body: String = if links.is_empty() {
        "<p class=\"empty\">No Care Services are available here right now.</p>".to_owned()
    } else {
        links.iter().map(|l| card(l, months, redeem)).collect()
    };
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>Care Services</title>\
         <style>body{{font-family:system-ui,sans-serif;margin:0;padding:16px}}.service{{border:1px solid #ddd;\
         border-radius:8px;padding:16px;margin-bottom:16px}}.service img{{max-width:96px}}.selected{{font-weight:bold}}\
         .cta{{display:inline-block;margin-top:8px}}</style></head><body>{body}\
         <script>(function(){{function post(){{window.parent.postMessage({{type:\"partner-api-docs-height\",\
         height:document.documentElement.scrollHeight}},\"*\");}}window.addEventListener(\"load\",post);\
         window.addEventListener(\"resize\",post);post();}})();</script></body></html>"
    )
}

#[cfg(test)]
mod tests {
    use super::esc;

    #[test]
    fn escaping() {
        assert_eq!(esc("A & <b>\"x\"'"), "A &amp; &lt;b&gt;&quot;x&quot;&#39;");
    }
}
