//! The embedded Care Services view: `GET /embed/care-services`, an HTML page partners put in an
//! iframe (its URL is a shareable tracking link, not a secret). It lists the services the partner
//! can currently access, with the same links as `GET /api/v1/care-service-links`, and posts its
//! height to the host page as `{ type: "partner-api-docs-height", height }`.

use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpRequest, HttpResponse, web};
use std::sync::LazyLock;

use partner_domain::kernel::values::{CareService, Lang, PartnerId, SubId, ValueError};
use partner_domain::links::{CareEmbed, CareQuery, CareServiceLink};

use super::Result;
use crate::AppState;
use crate::error::ApiError;
use crate::extract::Query;

/// An HTML page for partners' iframes. Public: its URL is a shareable tracking link.
#[utoipa::path(
    get, path = "/embed/care-services", tag = "embed", security(()),
    params(
        ("partner_id" = String, Query, description = "The partner"),
        ("service" = Option<crate::routes::schemas::CareService>, Query, description = "Show one service"),
        ("m" = Option<u8>, Query, description = "Membership months: 1, 3, 6 or 12", minimum = 1, maximum = 12),
        ("sub" = Option<String>, Query, description = "A sub-account number (1-250)", pattern = "^([1-9]|[1-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|250)$"),
        ("redeem" = Option<bool>, Query, description = "`true` shows the coupon redemption links"),
        ("lang" = Option<String>, Query, description = "`en` or `es`"),
    ),
    responses(
        (status = 200, description = "The page", content_type = "text/html", body = String),
        (status = 400, description = "A parameter is invalid", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No active partner has that `partner_id`, or the Care Services API is disabled", body = crate::routes::schemas::ErrorBody),
        (status = 429, description = "Over the public budget of this client address (`PARTNER_PUBLIC_RATE` a second, bursts up to twice that, shared by the catalog and the embedded view); `Retry-After` says when to retry", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn care_services(state: web::Data<AppState>, req: HttpRequest) -> Result {
    let q = Query::of(&req)?;
    let partner = q
        .get("partner_id")
        .filter(|p| !p.is_empty())
        .ok_or(ValueError::Missing("partner_id"))
        .and_then(|p| PartnerId::parse(p).map_err(|e| e.named("partner_id")))?;
    let service = q
        .get("service")
        .map(CareService::parse_embed_param)
        .transpose()?;
    let months = crate::params::months(q.get("m"), "m")?;
    let sub = q
        .get("sub")
        .map(|s| SubId::parse(s).map_err(|e| ApiError::from(e.named("sub"))))
        .transpose()?;
    let redeem = partner_domain::kernel::params::parse_switch(q.get("redeem"), "redeem")?;
    let query = CareQuery {
        service,
        sub,
        duration: None,
        lang: q.get("lang").map(str::to_owned),
    };
    let embed = state.links.care_embed(&partner, &query).await?;
    let view = View {
        partner: &partner,
        service,
        months,
        sub,
        redeem,
        embed: &embed,
        t: Text::of(embed.lang),
    };
    let mut res = HttpResponse::Ok()
        .insert_header((
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        ))
        .insert_header((header::CACHE_CONTROL, HeaderValue::from_static("no-store")))
        .insert_header(("Content-Security-Policy", CSP.as_str()))
        .insert_header(("Referrer-Policy", "strict-origin-when-cross-origin"))
        .body(view.page());
    res.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    Ok(res)
}

/// The page's one stylesheet and one script, inlined and allowed by their hashes.
const STYLE: &str = include_str!("embed/style.css");
const SCRIPT: &str = include_str!("embed/script.js");

/// No inline code runs but the page's own style and script (`'sha256-…'` of each); images from any
/// https host (the catalog's product images) or `data:`; nothing else is fetched; any site may
/// frame the page.
static CSP: LazyLock<String> = LazyLock::new(|| {
    format!(
        "default-src 'none'; img-src https: data:; style-src '{}'; script-src '{}'; \
         base-uri 'none'; form-action 'none'; frame-ancestors *",
        sha256(STYLE),
        sha256(SCRIPT)
    )
});

/// A CSP source expression for `text`: `sha256-<base64 of its SHA-256>`.
fn sha256(text: &str) -> String {
    use base64::Engine as _;
    let d = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    format!(
        "sha256-{}",
        base64::engine::general_purpose::STANDARD.encode(d.as_ref())
    )
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

/// `$1,234` for whole dollars, else `$1,234.50`.
fn dollars(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    let abs = cents.unsigned_abs();
    let whole = (abs / 100).to_string();
    let mut grouped = String::with_capacity(whole.len() + whole.len() / 3);
    for (i, c) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(c);
    }
    match abs % 100 {
        0 => format!("{sign}${grouped}"),
        c => format!("{sign}${grouped}.{c:02}"),
    }
}

/// The page's words in one language.
struct Text {
    lang: Lang,
    eyebrow: &'static str,
    title: &'static str,
    lede: &'static str,
    languages: &'static str,
    plan_length: &'static str,
    per_month: &'static str,
    /// `/mo`: what the page shows; screen readers get `per_month`.
    per_month_short: &'static str,
    get_started: &'static str,
    start_with: &'static str,
    empty: &'static str,
    redeem_title: &'static str,
    redeem_lede: &'static str,
    about_code: &'static str,
    what_title: &'static str,
    what: &'static str,
    from_title: &'static str,
    /// `{partner}` stands for the partner's name.
    from: &'static str,
    where_title: &'static str,
    where_: &'static str,
    pick: &'static str,
    redeem: &'static str,
}

impl Text {
    const EN: Text = Text {
        lang: Lang::En,
        eyebrow: "Online care",
        title: "Care Services",
        lede: "See a licensed clinician online. Choose a service and a plan length to get started.",
        languages: "Language",
        plan_length: "Choose a plan length",
        per_month: "a month",
        per_month_short: "/mo",
        get_started: "Get started",
        start_with: "Start with",
        empty: "No Care Services are available here right now.",
        redeem_title: "Redeem your Care Services code",
        redeem_lede: "A code covers a Care Services plan that has already been paid for.",
        about_code: "About your code",
        what_title: "What a code is",
        what: "12 characters: capital letters A to Z and numbers 0 to 9. For example:",
        from_title: "Where it came from",
        from: "{partner} buys codes in bulk and gives them out, usually by email or on a printed card.",
        where_title: "Where to type it",
        where_: "Choose the service your code is for below. The next page asks for the code.",
        pick: "Choose the service your code is for",
        redeem: "Redeem a code",
    };

    const ES: Text = Text {
        lang: Lang::Es,
        eyebrow: "Atención en línea",
        title: "Servicios de atención",
        lede: "Consulte en línea con un profesional clínico con licencia. Elija un servicio y la duración del plan para comenzar.",
        languages: "Idioma",
        plan_length: "Elija la duración del plan",
        per_month: "al mes",
        per_month_short: "/mes",
        get_started: "Comenzar",
        start_with: "Comenzar con",
        empty: "En este momento no hay servicios de atención disponibles aquí.",
        redeem_title: "Canjee su código de servicios de atención",
        redeem_lede: "Un código cubre un plan de servicios de atención que ya está pagado.",
        about_code: "Sobre su código",
        what_title: "Qué es un código",
        what: "12 caracteres: letras mayúsculas de la A a la Z y números del 0 al 9. Por ejemplo:",
        from_title: "De dónde viene",
        from: "{partner} compra códigos al por mayor y los entrega, normalmente por correo electrónico o en una tarjeta impresa.",
        where_title: "Dónde escribirlo",
        where_: "Elija abajo el servicio de su código. La página siguiente le pedirá el código.",
        pick: "Elija el servicio de su código",
        redeem: "Canjear un código",
    };

    fn of(lang: Lang) -> &'static Text {
        match lang {
            Lang::En => &Self::EN,
            Lang::Es => &Self::ES,
        }
    }

    /// `1 month`, `3 months`; `1 mes`, `3 meses`.
    fn duration(&self, months: u8) -> String {
        match (self.lang, months) {
            (Lang::En, 1) => "1 month".to_owned(),
            (Lang::En, m) => format!("{m} months"),
            (Lang::Es, 1) => "1 mes".to_owned(),
            (Lang::Es, m) => format!("{m} meses"),
        }
    }
}

/// The name of a language in that language.
fn endonym(l: Lang) -> &'static str {
    match l {
        Lang::En => "English",
        Lang::Es => "Español",
    }
}

/// One rendering of the page.
struct View<'a> {
    partner: &'a PartnerId,
    service: Option<CareService>,
    months: Option<u8>,
    sub: Option<SubId>,
    redeem: bool,
    embed: &'a CareEmbed,
    t: &'static Text,
}

impl View<'_> {
    /// This page's own URL (relative) in language `lang`.
    fn self_url(&self, lang: Lang) -> String {
        let mut q: Vec<(&str, String)> = vec![("partner_id", self.partner.to_string())];
        if let Some(s) = self.service {
            q.push(("service", s.as_str().to_owned()));
        }
        if let Some(m) = self.months {
            q.push(("m", m.to_string()));
        }
        if let Some(s) = self.sub {
            q.push(("sub", s.to_string()));
        }
        if self.redeem {
            q.push(("redeem", "true".to_owned()));
        }
        q.push(("lang", lang.as_str().to_owned()));
        format!("?{}", serde_urlencoded::to_string(q).unwrap_or_default())
    }

    fn languages(&self) -> String {
        if self.embed.langs.len() < 2 {
            return String::new();
        }
        let links: String = self
            .embed
            .langs
            .iter()
            .map(|&l| {
                format!(
                    "<a href=\"{}\" lang=\"{l}\" hreflang=\"{l}\"{}>{}</a>",
                    esc(&self.self_url(l)),
                    if l == self.embed.lang {
                        " aria-current=\"true\""
                    } else {
                        ""
                    },
                    endonym(l),
                    l = l.as_str(),
                )
            })
            .collect();
        format!(
            "<nav class=\"langs\" aria-label=\"{}\">{links}</nav>",
            self.t.languages
        )
    }

    fn card(&self, i: usize, l: &CareServiceLink) -> String {
        let t = self.t;
        let h = if self.redeem { "h3" } else { "h2" };
        let initial: String = l
            .product_name
            .chars()
            .find(|c| c.is_alphanumeric())
            .or_else(|| l.service.as_str().chars().next())
            .map(|c| c.to_uppercase().collect())
            .unwrap_or_default();
        let image = if l.image_url.is_empty() {
            String::new()
        } else {
            format!(
                "<img src=\"{}\" alt=\"\" loading=\"lazy\" decoding=\"async\">",
                esc(&l.image_url)
            )
        };
        let (tiers, href, cta) = if self.redeem {
            (String::new(), l.redeem_url.as_str(), t.redeem.to_owned())
        } else {
            let selected = self
                .months
                .and_then(|m| l.tiers.iter().find(|t| t.months == m));
            let rows: String = l
                .tiers
                .iter()
                .map(|tier| {
                    let cents = tier.user_price.cents();
                    let monthly = if tier.months > 1 {
                        let m = dollars((cents + i64::from(tier.months) / 2) / i64::from(tier.months));
                        format!(
                            "<small><span aria-hidden=\"true\">{m}{}</span>\
                             <span class=\"sr-only\">{m} {}</span></small>",
                            t.per_month_short, t.per_month
                        )
                    } else {
                        String::new()
                    };
                    let dur = t.duration(tier.months);
                    format!(
                        "<label class=\"tier\"><input type=\"radio\" name=\"tier-{i}\" value=\"{}\" \
                         data-url=\"{}\" data-cta=\"{}\"{}><span class=\"dur\">{}</span>\
                         <span class=\"price\"><strong>{}</strong>{monthly}</span></label>",
                        tier.months,
                        esc(&tier.url),
                        esc(&format!("{} {dur}", t.start_with)),
                        if selected.is_some_and(|s| s.key == tier.key) {
                            " checked"
                        } else {
                            ""
                        },
                        esc(&dur),
                        dollars(cents),
                    )
                })
                .collect();
            let (href, cta) = match selected {
                Some(s) => (
                    s.url.as_str(),
                    format!("{} {}", t.start_with, t.duration(s.months)),
                ),
                None => (l.url.as_str(), t.get_started.to_owned()),
            };
            (
                format!(
                    "<fieldset class=\"tiers\"><legend>{}</legend>{rows}</fieldset>",
                    t.plan_length
                ),
                href,
                cta,
            )
        };
        format!(
            "<li class=\"card{compact}\" data-service=\"{service}\">\
             <div class=\"media\"><span class=\"ph\" aria-hidden=\"true\"><span>{initial}</span></span>{image}</div>\
             <div class=\"body\"><div><{h} id=\"svc-{i}\">{name}</{h}><p class=\"desc\">{desc}</p></div>{tiers}\
             <a class=\"cta\" href=\"{href}\" target=\"_top\"><span class=\"cta-text\">{cta}</span>\
             <span class=\"sr-only\">, {name}</span><span class=\"arrow\" aria-hidden=\"true\">&rarr;</span></a></div></li>",
            compact = if self.redeem { " compact" } else { "" },
            service = esc(l.service.as_str()),
            initial = esc(&initial),
            name = esc(&l.product_name),
            desc = esc(&l.description),
            href = esc(href),
            cta = esc(&cta),
        )
    }

    fn page(&self) -> String {
        let t = self.t;
        let links = &self.embed.links;
        let cards = if links.is_empty() {
            format!("<p class=\"empty\">{}</p>", t.empty)
        } else {
            let items: String = links
                .iter()
                .enumerate()
                .map(|(i, l)| self.card(i, l))
                .collect();
            format!("<ul class=\"grid\" role=\"list\">{items}</ul>")
        };
        let (title, lede, main) = if self.redeem {
            let about = format!(
                "<section class=\"about\" aria-labelledby=\"about\"><h2 id=\"about\">{}</h2>\
                 <div><h3>{}</h3><p>{}</p><span class=\"code\" translate=\"no\">K7Q29XMD4PLA</span></div>\
                 <div><h3>{}</h3><p>{}</p></div><div><h3>{}</h3><p>{}</p></div></section>",
                t.about_code,
                t.what_title,
                t.what,
                t.from_title,
                t.from.replace("{partner}", &esc(&self.embed.partner_name)),
                t.where_title,
                t.where_,
            );
            let pick = if links.is_empty() {
                String::new()
            } else {
                format!("<h2 class=\"pick\">{}</h2>", t.pick)
            };
            (
                t.redeem_title,
                t.redeem_lede,
                format!("{about}{pick}{cards}"),
            )
        } else {
            (t.title, t.lede, cards)
        };
        format!(
            "<!doctype html><html lang=\"{lang}\"><head><meta charset=\"utf-8\">\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
             <meta name=\"referrer\" content=\"strict-origin-when-cross-origin\">\
             <title>{title}</title><link rel=\"icon\" href=\"data:,\"><style>{STYLE}</style></head>\
             <body><main class=\"page\"><header class=\"top\"><div><p class=\"eyebrow\">{eyebrow}</p>\
             <h1>{title}</h1><p class=\"lede\">{lede}</p></div>{langs}</header>{main}</main>\
             <script>{SCRIPT}</script></body></html>",
            lang = t.lang.as_str(),
            eyebrow = t.eyebrow,
            langs = self.languages(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::{CSP, SCRIPT, STYLE, dollars, esc, sha256};

    #[test]
    fn escaping() {
        assert_eq!(esc("A & <b>\"x\"'"), "A &amp; &lt;b&gt;&quot;x&quot;&#39;");
    }

    #[test]
    fn prices() {
        assert_eq!(dollars(30000), "$300");
        assert_eq!(dollars(2499), "$24.99");
        assert_eq!(dollars(123_456_700), "$1,234,567");
        assert_eq!(dollars(100_005), "$1,000.05");
        assert_eq!(dollars(5), "$0.05");
    }

    #[test]
    fn the_policy_allows_exactly_the_page_s_style_and_script() {
        // sha256 of the empty string, as browsers compute it.
        assert_eq!(
            sha256(""),
            "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
        );
        assert!(CSP.contains(&format!("style-src '{}'", sha256(STYLE))));
        assert!(CSP.contains(&format!("script-src '{}'", sha256(SCRIPT))));
        assert!(!CSP.contains("unsafe"));
        assert!(CSP.contains("frame-ancestors *"));
        assert!(!STYLE.contains("</") && !SCRIPT.contains("</"));
    }
}
