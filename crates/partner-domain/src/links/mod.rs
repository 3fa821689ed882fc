//! Shareable links: every URL the service returns is built here and passes [`sanitize`].
//!
//! - Medical intake links: self-hosted (`{intake_url}/<selfHostedSlug>`) when the product is
//!   configured for it and the partner's `headlessLinks` switch is on, else provider-hosted
//!   (`{legacy_intake_url}/<legacyPath>`, always returned as `legacyUrl`). A sub-account rewrites
//!   `partner_id` into its attribution code (`acme.7`); medical links never carry `sub`.
//! - DNA links: `{legacy_intake_url}/<intakePath>?partner_id=…`.
//! - Care Services links: `{care_services_url}/<slug>` with `partner_id`, `sub`, `m`, `lang`,
//!   and `redeem=true` on the Bulk Code Redemption link (which never carries `m`).
//!
//! A link is built from a partner's [`LinkSettings`], which carry the access rules, so a builder
//! answers `None` for a partner without access instead of relying on its caller to check:
//!
//! ```
//! use partner_domain::links::LinkSettings;
//! use partner_domain::kernel::values::{Email, PartnerId};
//!
//! let settings = LinkSettings::new(PartnerId::parse("acme")?, Email::parse("ops@acme.test")?);
//! assert!(!settings.dna_access(), "no DNA access unless granted");
//! # Ok::<(), partner_domain::kernel::values::ValueError>(())
//! ```

pub mod attribution;
pub mod ports;

mod service;
mod settings;

pub use service::{CatalogError, LinkError, LinkService};
pub use settings::LinkSettings;

use std::collections::{BTreeMap, HashSet};

use url::Url;

use crate::account::{CareFlags, Partner};
use crate::catalog::{CareProduct, Category, DnaProduct, MedicalProduct};
use crate::kernel::ids::{ImageFileId, ProductId};
use crate::kernel::values::{CareService, Lang, Money, PartnerId, SubId};
use crate::links::attribution::Attribution;

/// The administrator-configured bases of every link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkBases {
    /// The base of self-hosted medical intakes (`PARTNER_INTAKE_URL`).
    pub intake: Url,
    /// The base of provider-hosted medical and DNA intakes (`PARTNER_LEGACY_INTAKE_URL`).
    pub legacy_intake: Url,
    /// The base of Care Services pages (`PARTNER_CARE_SERVICES_URL`).
    pub care_services: Url,
}

/// Which kind of page a URL opens; it decides which parameters and values are valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkKind {
    /// Self-hosted medical intake: `partner_id`, `lang`, `m` in 1/3/6, attribution parameters.
    MedicalSelfHosted,
    /// Provider-hosted medical intake, and DNA intake: `partner_id` and attribution parameters.
    ProviderHosted,
    /// Care Services: `partner_id`, `sub`, `m` in 1/3/6/12, `lang`, `redeem=true`, attribution.
    CareServices,
}

/// Every parameter any returned URL may carry.
pub const ALLOWED_PARAMS: [&str; 13] = [
    "partner_id",
    "sub",
    "m",
    "lang",
    "redeem",
    "utm_source",
    "utm_medium",
    "utm_campaign",
    "utm_term",
    "utm_content",
    "gclid",
    "fbclid",
    "msclkid",
];

fn valid_param(kind: LinkKind, key: &str, value: &str) -> bool {
    use LinkKind::*;
    match key {
        "partner_id" => Attribution::parse(value).is_ok(),
        "sub" => kind == CareServices && SubId::parse(value).is_ok(),
        "m" => match kind {
            MedicalSelfHosted => matches!(value, "1" | "3" | "6"),
            CareServices => matches!(value, "1" | "3" | "6" | "12"),
            ProviderHosted => false,
        },
        "lang" => kind != ProviderHosted && Lang::parse(value).is_some(),
        "redeem" => kind == CareServices && value == "true",
        // Campaign labels: printable text, never anything shaped like an email address.
        "utm_source" | "utm_medium" | "utm_campaign" | "utm_term" | "utm_content" => {
            (1..=200).contains(&value.chars().count())
                && !value.contains('@')
                && !value.chars().any(char::is_control)
        }
        "gclid" | "fbclid" | "msclkid" => {
            (1..=512).contains(&value.len())
                && value
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
        }
        _ => false,
    }
}

/// The one sanitizer: keeps only documented parameters with valid values for `kind` (the first
/// occurrence of a name decides; later duplicates are dropped), and drops credentials and
/// fragments. Nothing else (patient names, emails, phones, dates of birth, tokens) can survive.
pub fn sanitize(url: &Url, kind: LinkKind) -> Url {
    let mut seen = HashSet::new();
    let kept: Vec<(String, String)> = url
        .query_pairs()
        .filter(|(k, _)| seen.insert(k.to_string()))
        .filter(|(k, v)| valid_param(kind, k, v))
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let mut out = url.clone();
    let _ = out.set_username("");
    let _ = out.set_password(None);
    out.set_fragment(None);
    out.set_query(None);
    if !kept.is_empty() {
        out.query_pairs_mut().extend_pairs(kept);
    }
    out
}

/// `base` with the path segments of `path` appended (each percent-encoded as needed).
fn join(base: &Url, path: &str) -> Url {
    let mut u = base.clone();
    if let Ok(mut segs) = u.path_segments_mut() {
        segs.pop_if_empty();
        for s in path.split('/').filter(|s| !s.is_empty()) {
            segs.push(s);
        }
    }
    u
}

fn with_params(mut u: Url, params: &[(&str, String)], kind: LinkKind) -> String {
    if !params.is_empty() {
        u.query_pairs_mut()
            .extend_pairs(params.iter().map(|(k, v)| (*k, v.as_str())));
    }
    sanitize(&u, kind).to_string()
}

/// The `lang` a URL carries: the requested language when it is recognized, enabled for the
/// partner and offered by the product; else the partner's default when the product offers it.
/// It is carried when it is not English, or when it was requested explicitly and accepted.
pub fn lang_param(
    requested: Option<&str>,
    partner: &LinkSettings,
    offered: &[Lang],
) -> Option<Lang> {
    if let Some(l) = requested.and_then(Lang::parse)
        && partner.enabled_langs().contains(&l)
        && offered.contains(&l)
    {
        return Some(l);
    }
    Some(partner.default_lang()).filter(|d| offered.contains(d) && *d != Lang::En)
}

/// A medical tier as partners see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MedicalTierView {
    /// The tier's key (`m1`, …).
    pub key: String,
    /// Its label.
    pub label: String,
    /// The lowest price the partner may set.
    pub min_price: Money,
    /// The highest price the partner may set.
    pub max_price: Money,
    /// The partner's price (its own, or the recommended one).
    pub user_price: Money,
    /// The partner's commission.
    pub commission: Money,
}

/// `PartnerProductLink` of the spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartnerProductLink {
    /// The product's id.
    pub record_id: ProductId,
    /// The partner's contact e-mail.
    pub email: String,
    /// The partner.
    pub partner_id: PartnerId,
    /// The product's name.
    pub product_name: String,
    /// Its details.
    pub details: String,
    /// The link to share: self-hosted or provider-hosted, as `url_style` says.
    pub url: String,
    /// The provider-hosted link, always.
    pub legacy_url: String,
    /// `headless` or `legacy`.
    pub url_style: &'static str,
    /// The product's image.
    pub image_url: String,
    /// Its categories.
    pub category: Vec<Category>,
    /// Its suggested prices, as text.
    pub suggested_prices: String,
    /// Its tiers, with the partner's prices.
    pub tiers: Vec<MedicalTierView>,
}

/// The medical intake link of `product` for `partner` (and one of its sub-accounts).
pub fn medical_link(
    bases: &LinkBases,
    partner: &LinkSettings,
    product: &MedicalProduct,
    prices: Option<&BTreeMap<String, Money>>,
    sub: Option<SubId>,
    lang: Option<&str>,
) -> PartnerProductLink {
    let code = Attribution {
        partner_id: partner.partner_id().clone(),
        sub_id: sub,
    }
    .to_string();
    let legacy = with_params(
        join(&bases.legacy_intake, product.legacy_path()),
        &[("partner_id", code.clone())],
        LinkKind::ProviderHosted,
    );
    let (url, style) = match (product.self_hosted_slug(), partner.headless_links()) {
        (Some(slug), true) => {
            let mut params = vec![("partner_id", code)];
            if let Some(l) = lang_param(lang, partner, product.self_hosted_langs()) {
                params.push(("lang", l.as_str().to_owned()));
            }
            (
                with_params(
                    join(&bases.intake, slug),
                    &params,
                    LinkKind::MedicalSelfHosted,
                ),
                "headless",
            )
        }
        _ => (legacy.clone(), "legacy"),
    };
    PartnerProductLink {
        record_id: product.id(),
        email: partner.email().to_string(),
        partner_id: partner.partner_id().clone(),
        product_name: product.name().to_owned(),
        details: product.details().to_owned(),
        url,
        legacy_url: legacy,
        url_style: style,
        image_url: product.image_url().to_owned(),
        category: product.categories().to_owned(),
        suggested_prices: product.suggested_prices().to_owned(),
        tiers: product
            .tiers()
            .iter()
            .map(|t| MedicalTierView {
                key: t.key.clone(),
                label: t.label.clone(),
                min_price: t.min_price,
                max_price: t.max_price,
                user_price: product.price(t, prices),
                commission: t.commission,
            })
            .collect(),
    }
}

/// `DnaProductLink` of the spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnaProductLink {
    /// The product's id.
    pub record_id: ProductId,
    /// The partner's contact e-mail.
    pub email: String,
    /// The partner.
    pub partner_id: PartnerId,
    /// The product's name.
    pub product_name: String,
    /// Its description.
    pub description: String,
    /// The provider-hosted intake link.
    pub intake_url: String,
    /// The product's image.
    pub product_image_url: String,
    /// The lowest price the partner may set.
    pub minimum_price: Money,
    /// The recommended price.
    pub recommended_price: Money,
    /// The highest price the partner may set.
    pub maximum_price: Money,
    /// The partner's price (its own, or the recommended one).
    pub user_set_price: Money,
    /// The parent products.
    pub parent_product: Vec<String>,
    /// Whether it can be ordered now.
    pub available: bool,
}

/// The DNA link of `product` for `partner`, at `price` (the partner's own) or the product's
/// recommended price; `None` when the partner has no DNA access.
pub fn dna_link(
    bases: &LinkBases,
    partner: &LinkSettings,
    product: &DnaProduct,
    price: Option<Money>,
) -> Option<DnaProductLink> {
    if !partner.dna_access() {
        return None;
    }
    Some(DnaProductLink {
        record_id: product.id(),
        email: partner.email().to_string(),
        partner_id: partner.partner_id().clone(),
        product_name: product.product_name().to_owned(),
        description: product.description().to_owned(),
        intake_url: with_params(
            join(&bases.legacy_intake, product.intake_path()),
            &[("partner_id", partner.partner_id().to_string())],
            LinkKind::ProviderHosted,
        ),
        product_image_url: product.product_image_url().to_owned(),
        minimum_price: product.minimum_price(),
        recommended_price: product.recommended_price(),
        maximum_price: product.maximum_price(),
        user_set_price: price.unwrap_or(product.recommended_price()),
        parent_product: product.parent_product().to_owned(),
        available: product.available(),
    })
}

/// Whether the partner currently sees `service`: (subscription active OR manual override) AND
/// (yearly bundle OR individual access) AND the global category flag is on.
pub fn care_access(partner: &LinkSettings, flags: &CareFlags, service: CareService) -> bool {
    let cs = &partner.care_services();
    (cs.subscription_active || cs.manual_override)
        && (cs.yearly_bundle || cs.services.contains(&service))
        && flags.get(service)
}

/// What a Care Services links request asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CareQuery {
    /// Only this service, if set.
    pub service: Option<CareService>,
    /// The sub-account the links carry as `sub`, if any.
    pub sub: Option<SubId>,
    /// Only tiers of this many months, if set (and `m` on `url`).
    pub duration: Option<u8>,
    /// The language asked for (see [`lang_param`]).
    pub lang: Option<String>,
}

/// A Care Services tier as partners see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CareTierView {
    /// The tier's duration (not part of the wire shape; its `url` carries it as `m`).
    pub months: u8,
    /// The tier's key.
    pub key: String,
    /// Its label.
    pub label: String,
    /// The price.
    pub user_price: Money,
    /// The partner's commission.
    pub commission: Money,
    /// The link to this tier (`m` set).
    pub url: String,
}

/// `CareServiceLink` of the spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CareServiceLink {
    /// The product's id.
    pub record_id: ProductId,
    /// Its service.
    pub service: CareService,
    /// The product's name.
    pub product_name: String,
    /// Its description.
    pub description: String,
    /// Its image.
    pub image_url: String,
    /// The link to share (`m` set when a duration was asked for).
    pub url: String,
    /// The Bulk Code Redemption link (`redeem=true`, never `m`).
    pub redeem_url: String,
    /// Its tiers, with a link each.
    pub tiers: Vec<CareTierView>,
}

/// What the embedded Care Services view shows: the partner's accessible Care Services links, the
/// language the page speaks and the languages it may switch to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CareEmbed {
    /// The partner's display name.
    pub partner_name: String,
    /// The page's language: the links' `lang` rule (Care Services offer both), English when that
    /// rule leaves none.
    pub lang: Lang,
    /// The languages a visitor may switch to: the partner's enabled ones and its default.
    pub langs: Vec<Lang>,
    /// The links the partner can access now.
    pub links: Vec<CareServiceLink>,
}

/// The embedded view's language by the rule of the links' `lang` parameter.
pub fn embed_lang(requested: Option<&str>, partner: &LinkSettings) -> Lang {
    lang_param(requested, partner, &Lang::ALL).unwrap_or(Lang::En)
}

/// The languages the embedded view offers: enabled or default, in `Lang::ALL` order.
pub fn embed_langs(partner: &LinkSettings) -> Vec<Lang> {
    Lang::ALL
        .into_iter()
        .filter(|l| partner.enabled_langs().contains(l) || partner.default_lang() == *l)
        .collect()
}

/// The links of `product` for `partner`, or `None` when the partner cannot access its service
/// now ([`care_access`]: its grant and the global switch `flags`) or a requested duration leaves
/// it without a tier.
pub fn care_link(
    bases: &LinkBases,
    partner: &LinkSettings,
    flags: &CareFlags,
    product: &CareProduct,
    q: &CareQuery,
) -> Option<CareServiceLink> {
    if !care_access(partner, flags, product.service()) {
        return None;
    }
    let tiers: Vec<_> = product
        .tiers()
        .iter()
        .filter(|t| q.duration.is_none_or(|d| t.months == d))
        .collect();
    if tiers.is_empty() {
        return None;
    }
    let base = join(&bases.care_services, product.slug());
    let lang = lang_param(q.lang.as_deref(), partner, &Lang::ALL);
    let params = |m: Option<u8>, redeem: bool| {
        let mut p = vec![("partner_id", partner.partner_id().to_string())];
        if let Some(s) = q.sub {
            p.push(("sub", s.to_string()));
        }
        if let Some(m) = m {
            p.push(("m", m.to_string()));
        }
        if let Some(l) = lang {
            p.push(("lang", l.as_str().to_owned()));
        }
        if redeem {
            p.push(("redeem", "true".to_owned()));
        }
        with_params(base.clone(), &p, LinkKind::CareServices)
    };
    Some(CareServiceLink {
        record_id: product.id(),
        service: product.service(),
        product_name: product.product_name().to_owned(),
        description: product.description().to_owned(),
        image_url: product.image_url().to_owned(),
        url: params(q.duration, false),
        redeem_url: params(None, true),
        tiers: tiers
            .into_iter()
            .map(|t| CareTierView {
                months: t.months,
                key: t.key.clone(),
                label: t.label.clone(),
                user_price: t.user_price,
                commission: t.commission,
                url: params(Some(t.months), false),
            })
            .collect(),
    })
}

/// A product of the public catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogProduct {
    /// The product's id.
    pub id: ProductId,
    /// Its name.
    pub name: String,
    /// Its image.
    pub image: String,
    /// Always `file`.
    pub image_kind: &'static str,
    /// The image file's id.
    pub image_file_id: ImageFileId,
    /// Where the image came from.
    pub image_source_url: String,
    /// The intake link (a sub-account code carried as `partner_id`).
    pub intake_url: String,
    /// The 1-month price as text (`$0.00` when not offered).
    pub price_1_month: String,
    /// The 3-month price as text.
    pub price_3_month: String,
    /// The 6-month price as text.
    pub price_6_month: String,
    /// The product's details.
    pub details: String,
}

/// `$1299.00`; `$0.00` when the term is not offered.
pub fn price_text(m: Option<Money>) -> String {
    format!("${}", m.unwrap_or_default())
}

/// The public catalog's entry of `product` for `partner` (and one of its sub-accounts).
pub fn catalog_product(
    bases: &LinkBases,
    partner: &LinkSettings,
    product: &MedicalProduct,
    prices: Option<&BTreeMap<String, Money>>,
    sub: Option<SubId>,
) -> CatalogProduct {
    let link = medical_link(bases, partner, product, prices, sub, None);
    let term = |months| {
        price_text(
            product
                .tiers()
                .iter()
                .find(|t| t.months == months)
                .map(|t| product.price(t, prices)),
        )
    };
    CatalogProduct {
        id: product.id(),
        name: product.name().to_owned(),
        image: product.image_url().to_owned(),
        image_kind: "file",
        image_file_id: product.image_file_id(),
        image_source_url: product.image_source_url().to_owned(),
        intake_url: link.url,
        price_1_month: term(1),
        price_3_month: term(3),
        price_6_month: term(6),
        details: product.details().to_owned(),
    }
}

/// Why a partner without DNA access is refused its DNA links (403).
pub const DNA_DISABLED: &str = "DNA links are disabled for this account";

/// What a partner's DNA links are built from, read with a token's record in one round trip
/// ([`ports::LinkRepo::dna_links_for_token`]): the token's partner (`None` when the token is not
/// live), its DNA prices and every DNA product.
#[derive(Debug, Clone, Default)]
pub struct DnaLinkInputs {
    /// The token's partner (`None` when the token is not live).
    pub partner: Option<Partner>,
    /// The partner's DNA prices, by product.
    pub prices: BTreeMap<ProductId, Money>,
    /// Every DNA product.
    pub products: Vec<DnaProduct>,
}

/// What a partner's medical intake links are built from, read with a token's record in one round
/// trip ([`ports::LinkRepo::medical_links_for_token`]).
#[derive(Debug, Clone, Default)]
pub struct MedicalLinkInputs {
    /// Whether the `sub` asked for names one of the partner's sub-accounts (`true` when none was).
    pub sub_exists: bool,
    /// The token's partner (`None` when the token is not live).
    pub partner: Option<Partner>,
    /// The partner's tier prices, by product and tier key.
    pub prices: BTreeMap<ProductId, BTreeMap<String, Money>>,
    /// Every medical product.
    pub products: Vec<MedicalProduct>,
}

/// What a partner's Care Services links are built from, read with a token's record in one round
/// trip ([`ports::LinkRepo::care_links_for_token`]).
#[derive(Debug, Clone, Default)]
pub struct CareLinkInputs {
    /// Whether the `sub` asked for names one of the partner's sub-accounts (`true` when none was).
    pub sub_exists: bool,
    /// The token's partner (`None` when the token is not live).
    pub partner: Option<Partner>,
    /// The global Care Services switches.
    pub flags: CareFlags,
    /// Every Care Services product.
    pub products: Vec<CareProduct>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::account::{CareServicesAccess, PartnerSettings, PartnerSettingsInput};
    use crate::catalog::{CareTier, MedicalTier};
    use crate::kernel::values::Email;
    use proptest::prelude::*;
    use std::sync::Arc;
    use time::macros::datetime;

    fn bases() -> LinkBases {
        LinkBases {
            intake: Url::parse("https://intake.test/forms/").expect("url"),
            legacy_intake: Url::parse("https://legacy.test").expect("url"),
            care_services: Url::parse("https://care.test/c").expect("url"),
        }
    }

    fn settings(headless: bool, default_lang: Lang, enabled: &[Lang]) -> PartnerSettingsInput {
        PartnerSettingsInput {
            name: "Acme".into(),
            email: Email::parse("ops@acme.test").expect("email"),
            active: true,
            dna_access: true,
            headless_links: headless,
            default_lang,
            enabled_langs: enabled.to_vec(),
            care_services: CareServicesAccess {
                subscription_active: true,
                manual_override: false,
                yearly_bundle: false,
                services: vec![CareService::Dermatology],
            },
        }
    }

    fn partner(headless: bool, default_lang: Lang, enabled: &[Lang]) -> Partner {
        Partner::new(
            PartnerId::parse("acme").expect("id"),
            PartnerSettings::parse(settings(headless, default_lang, enabled)).expect("settings"),
            datetime!(2026-11-21 10:00 UTC),
            datetime!(2026-11-21 10:00 UTC),
        )
    }

    fn link(headless: bool, default_lang: Lang, enabled: &[Lang]) -> LinkSettings {
        LinkSettings::from(&partner(headless, default_lang, enabled))
    }

    fn product(slug: Option<&str>, langs: &[Lang]) -> MedicalProduct {
        MedicalProduct::parse(crate::catalog::MedicalProductInput {
            id: ProductId::from_uuid(uuid::Uuid::nil()),
            name: "Semaglutide".into(),
            categories: vec![Category::WeightLoss],
            details: "Available in all states".into(),
            image_url: "https://img.test/s.png".into(),
            image_file_id: ImageFileId::from_uuid(uuid::Uuid::nil()),
            image_source_url: "https://img.test/src.png".into(),
            active: true,
            legacy_path: "weight-loss/semaglutide".into(),
            self_hosted_slug: slug.map(str::to_owned),
            self_hosted_langs: langs.to_vec(),
            suggested_prices: "$199-$299".into(),
            tiers: vec![
                MedicalTier {
                    key: "m1".into(),
                    label: "1 month".into(),
                    months: 1,
                    min_price: Money::from_cents(19_900),
                    max_price: Money::from_cents(39_900),
                    recommended_price: Money::from_cents(29_900),
                    commission: Money::from_cents(5_000),
                },
                MedicalTier {
                    key: "m3".into(),
                    label: "3 months".into(),
                    months: 3,
                    min_price: Money::from_cents(50_000),
                    max_price: Money::from_cents(150_000),
                    recommended_price: Money::from_cents(129_900),
                    commission: Money::from_cents(15_000),
                },
            ],
        })
        .expect("a valid product")
    }

    /// The public surfaces (catalog, embedded Care Services view) serve active partners only,
    /// and list what the stored catalog holds as it is now.
    #[test]
    fn the_public_catalog_serves_active_partners_only() {
        use crate::catalog::ports::MockCatalogRepo;
        use crate::links::ports::MockLinkPartners;
        use crate::links::ports::MockLinkRepo;
        use futures_util::FutureExt;

        let service = |active: Option<bool>| {
            let mut accounts = MockLinkPartners::new();
            accounts.expect_partner().returning(move |_| {
                Ok(active.map(|a| {
                    let mut s = settings(false, Lang::En, &[Lang::En]);
                    s.active = a;
                    Partner::new(
                        PartnerId::parse("acme").expect("id"),
                        PartnerSettings::parse(s).expect("settings"),
                        datetime!(2026-11-21 10:00 UTC),
                        datetime!(2026-11-21 10:00 UTC),
                    )
                }))
            });
            accounts
                .expect_care_flags()
                .returning(|| Ok(CareFlags::default()));
            let mut catalog = MockCatalogRepo::new();
            catalog
                .expect_medical_prices()
                .returning(|_| Ok(BTreeMap::new()));
            catalog
                .expect_medical_products()
                .returning(|| Ok(vec![product(None, &[])]));
            catalog
                .expect_care_products()
                .returning(|| Ok(vec![care(&[1, 12])]));
            LinkService::new(
                Arc::new(MockLinkRepo::new()),
                Arc::new(catalog),
                Arc::new(accounts),
                bases(),
            )
        };
        let acme = Attribution::parse("acme").expect("code");
        for refused in [None, Some(false)] {
            let svc = service(refused);
            assert!(matches!(
                svc.catalog(&acme, None).now_or_never().expect("ready"),
                Err(CatalogError::UnknownPartner)
            ));
            let q = CareQuery::default();
            assert!(matches!(
                svc.care_embed(&acme.partner_id, &q)
                    .now_or_never()
                    .expect("ready"),
                Err(CatalogError::UnknownPartner)
            ));
        }
        let svc = service(Some(true));
        let listed = svc
            .catalog(&acme, Some(Category::WeightLoss))
            .now_or_never()
            .expect("ready")
            .expect("catalog");
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].price_1_month, "$299.00", "the recommended price");
        let none = svc
            .catalog(&acme, Some(Category::HairLoss))
            .now_or_never()
            .expect("ready")
            .expect("catalog");
        assert!(none.is_empty());
        let embed = svc
            .care_embed(&acme.partner_id, &CareQuery::default())
            .now_or_never()
            .expect("ready")
            .expect("embed");
        assert_eq!(embed.partner_name, "Acme");
        assert_eq!(embed.links.len(), 1, "dermatology, granted and switched on");
    }

    /// Links built from what was read for a token: the `sub` check first (400), then the partner
    /// read must be the authenticated one.
    #[test]
    fn links_from_inputs_read_for_a_token() {
        let svc = LinkService::new(
            Arc::new(crate::links::ports::MockLinkRepo::new()),
            Arc::new(crate::catalog::ports::MockCatalogRepo::new()),
            Arc::new(crate::links::ports::MockLinkPartners::new()),
            bases(),
        );
        let acme = PartnerId::parse("acme").expect("id");
        let inputs = |sub_exists, p: Option<Partner>| MedicalLinkInputs {
            sub_exists,
            partner: p,
            prices: BTreeMap::new(),
            products: vec![product(None, &[])],
        };
        let me = partner(false, Lang::En, &[Lang::En]);
        let links = svc
            .medical_links_from(&acme, inputs(true, Some(me.clone())), None, None)
            .expect("links");
        assert_eq!(links.len(), 1);
        assert!(matches!(
            svc.medical_links_from(&acme, inputs(false, Some(me.clone())), SubId::new(7), None),
            Err(LinkError::UnknownSub)
        ));
        let other = PartnerId::parse("beta").expect("id");
        assert!(matches!(
            svc.medical_links_from(&other, inputs(true, Some(me.clone())), None, None),
            Err(LinkError::Repo(_))
        ));
        assert!(matches!(
            svc.medical_links_from(&acme, inputs(true, None), None, None),
            Err(LinkError::Repo(_))
        ));
        let dna = svc
            .dna_links_from(
                &acme,
                DnaLinkInputs {
                    partner: Some(me),
                    ..DnaLinkInputs::default()
                },
            )
            .expect("no products, no links");
        assert!(dna.is_empty());
    }

    #[test]
    fn headless_vs_legacy() {
        let b = bases();
        let p = link(true, Lang::En, &[Lang::En, Lang::Es]);
        let l = medical_link(
            &b,
            &p,
            &product(Some("semaglutide"), &[Lang::En]),
            None,
            None,
            None,
        );
        assert_eq!(l.url_style, "headless");
        assert_eq!(
            l.url,
            "https://intake.test/forms/semaglutide?partner_id=acme"
        );
        assert_eq!(
            l.legacy_url,
            "https://legacy.test/weight-loss/semaglutide?partner_id=acme"
        );
        // Not configured, or the partner switch off: legacy, url == legacyUrl.
        for (prod, part) in [
            (product(None, &[]), p.clone()),
            (product(Some("s"), &[]), link(false, Lang::En, &[Lang::En])),
        ] {
            let l = medical_link(&b, &part, &prod, None, None, None);
            assert_eq!(
                (l.url_style, l.url.as_str()),
                ("legacy", l.legacy_url.as_str())
            );
        }
    }

    #[test]
    fn sub_accounts_rewrite_partner_id_and_never_add_sub() {
        let b = bases();
        let l = medical_link(
            &b,
            &link(true, Lang::En, &[Lang::En]),
            &product(Some("s"), &[]),
            None,
            SubId::new(7),
            None,
        );
        assert_eq!(l.url, "https://intake.test/forms/s?partner_id=acme.7");
        assert_eq!(
            l.legacy_url,
            "https://legacy.test/weight-loss/semaglutide?partner_id=acme.7"
        );
        assert_eq!(l.partner_id.as_str(), "acme");
    }

    #[test]
    fn embed_language() {
        let both = [Lang::En, Lang::Es];
        let es_default = link(true, Lang::Es, &both);
        let en_only = link(true, Lang::En, &[Lang::En]);
        let es_only = link(true, Lang::Es, &[Lang::Es]);
        assert_eq!(embed_lang(None, &es_default), Lang::Es);
        assert_eq!(embed_lang(Some("en"), &es_default), Lang::En);
        assert_eq!(embed_lang(Some("es"), &en_only), Lang::En);
        assert_eq!(embed_lang(Some("fr"), &en_only), Lang::En);
        assert_eq!(embed_lang(Some("en"), &es_only), Lang::Es);
        assert_eq!(embed_langs(&es_default), both);
        assert_eq!(embed_langs(&en_only), [Lang::En]);
    }

    #[test]
    fn lang_rules() {
        let both = [Lang::En, Lang::Es];
        let en_default = link(true, Lang::En, &both);
        let es_default = link(true, Lang::Es, &both);
        let en_only = link(true, Lang::En, &[Lang::En]);
        let s = &en_default;
        assert_eq!(lang_param(Some("es"), s, &both), Some(Lang::Es));
        assert_eq!(
            lang_param(Some("en"), s, &both),
            Some(Lang::En),
            "explicit and accepted"
        );
        assert_eq!(
            lang_param(None, s, &both),
            None,
            "English default is not carried"
        );
        assert_eq!(
            lang_param(Some("fr"), &es_default, &both),
            Some(Lang::Es),
            "unknown: default"
        );
        assert_eq!(
            lang_param(Some("es"), &en_only, &both),
            None,
            "disabled: default en"
        );
        assert_eq!(
            lang_param(Some("es"), s, &[Lang::En]),
            None,
            "not offered by the product"
        );
        assert_eq!(
            lang_param(None, &es_default, &[Lang::En]),
            None,
            "default not offered"
        );
        let l = medical_link(
            &bases(),
            &es_default,
            &product(Some("s"), &both),
            None,
            None,
            None,
        );
        assert_eq!(l.url, "https://intake.test/forms/s?partner_id=acme&lang=es");
        assert!(
            !l.legacy_url.contains("lang"),
            "provider-hosted links never carry lang"
        );
    }

    #[test]
    fn partner_prices_fall_back_to_recommended() {
        let prices = BTreeMap::from([("m1".to_owned(), Money::from_cents(25_000))]);
        let l = medical_link(
            &bases(),
            &link(true, Lang::En, &[Lang::En]),
            &product(None, &[]),
            Some(&prices),
            None,
            None,
        );
        assert_eq!(l.tiers[0].user_price, Money::from_cents(25_000));
        assert_eq!(l.tiers[1].user_price, Money::from_cents(129_900));
        let c = catalog_product(
            &bases(),
            &link(true, Lang::En, &[Lang::En]),
            &product(None, &[]),
            Some(&prices),
            None,
        );
        assert_eq!(
            (
                c.price_1_month.as_str(),
                c.price_3_month.as_str(),
                c.price_6_month.as_str()
            ),
            ("$250.00", "$1299.00", "$0.00")
        );
    }

    fn care(months: &[u8]) -> CareProduct {
        CareProduct::parse(crate::catalog::CareProductInput {
            id: ProductId::from_uuid(uuid::Uuid::nil()),
            service: CareService::Dermatology,
            slug: "derm".into(),
            product_name: "Dermatology".into(),
            description: "Skin".into(),
            image_url: "https://img.test/d.png".into(),
            tiers: months
                .iter()
                .map(|m| CareTier {
                    key: format!("m{m}"),
                    label: format!("{m} months"),
                    months: *m,
                    user_price: Money::from_cents(1000 * u32::from(*m)),
                    commission: Money::from_cents(100),
                })
                .collect(),
        })
        .expect("a valid product")
    }

    #[test]
    fn care_links_carry_sub_m_lang_and_redeem() {
        let p = link(true, Lang::Es, &[Lang::En, Lang::Es]);
        let q = CareQuery {
            sub: SubId::new(7),
            duration: Some(3),
            ..CareQuery::default()
        };
        let l = care_link(&bases(), &p, &CareFlags::default(), &care(&[1, 3, 12]), &q)
            .expect("has a 3-month tier");
        assert_eq!(
            l.url,
            "https://care.test/c/derm?partner_id=acme&sub=7&m=3&lang=es"
        );
        assert_eq!(
            l.redeem_url,
            "https://care.test/c/derm?partner_id=acme&sub=7&lang=es&redeem=true"
        );
        assert_eq!(l.tiers.len(), 1);
        assert_eq!(
            l.tiers[0].url,
            "https://care.test/c/derm?partner_id=acme&sub=7&m=3&lang=es"
        );
        assert!(
            care_link(&bases(), &p, &CareFlags::default(), &care(&[1, 12]), &q).is_none(),
            "no tier of that duration"
        );
        let all = care_link(
            &bases(),
            &link(true, Lang::En, &[Lang::En]),
            &CareFlags::default(),
            &care(&[1, 12]),
            &CareQuery::default(),
        )
        .expect("link");
        assert_eq!(all.url, "https://care.test/c/derm?partner_id=acme");
        assert_eq!(
            all.tiers[1].url,
            "https://care.test/c/derm?partner_id=acme&m=12"
        );
    }

    #[test]
    fn care_access_combinations() {
        let mut input = settings(true, Lang::En, &[Lang::En]);
        let p = |i: &PartnerSettingsInput| {
            LinkSettings::from(&Partner::new(
                PartnerId::parse("acme").expect("id"),
                PartnerSettings::parse(i.clone()).expect("settings"),
                datetime!(2026-11-21 10:00 UTC),
                datetime!(2026-11-21 10:00 UTC),
            ))
        };
        let mut flags = CareFlags::default();
        let d = CareService::Dermatology;
        let u = CareService::UrgentCare;
        assert!(care_access(&p(&input), &flags, d));
        assert!(
            !care_access(&p(&input), &flags, u),
            "no individual access, no bundle"
        );
        input.care_services.yearly_bundle = true;
        assert!(care_access(&p(&input), &flags, u));
        flags.set(u, false);
        assert!(!care_access(&p(&input), &flags, u), "global flag off");
        input.care_services.subscription_active = false;
        assert!(!care_access(&p(&input), &flags, d), "no subscription");
        input.care_services.manual_override = true;
        assert!(care_access(&p(&input), &flags, d), "manual override");
    }

    /// Issue 21: `care_link` built the links of a service the partner cannot access (the caller
    /// had to know to call `care_access` first). It checks the grant and the switch itself now.
    #[test]
    fn care_link_checks_access_itself() {
        let q = CareQuery::default();
        let derm = care(&[1, 12]);
        let granted = link(true, Lang::En, &[Lang::En]);
        assert!(care_link(&bases(), &granted, &CareFlags::default(), &derm, &q).is_some());
        let mut off = CareFlags::default();
        off.set(CareService::Dermatology, false);
        assert!(
            care_link(&bases(), &granted, &off, &derm, &q).is_none(),
            "global switch off"
        );
        let no_grant = granted.clone().with_care_services(CareServicesAccess {
            subscription_active: true,
            manual_override: false,
            yearly_bundle: false,
            services: vec![CareService::UrgentCare],
        });
        assert!(
            care_link(&bases(), &no_grant, &CareFlags::default(), &derm, &q).is_none(),
            "not granted"
        );
        let lapsed = granted.with_care_services(CareServicesAccess {
            subscription_active: false,
            manual_override: false,
            yearly_bundle: true,
            services: vec![CareService::Dermatology],
        });
        assert!(
            care_link(&bases(), &lapsed, &CareFlags::default(), &derm, &q).is_none(),
            "no subscription"
        );
    }

    fn dna(recommended: u32) -> DnaProduct {
        DnaProduct::parse(crate::catalog::DnaProductInput {
            id: ProductId::from_uuid(uuid::Uuid::nil()),
            product_name: "Ancestry".into(),
            description: "DNA".into(),
            intake_path: "dna/ancestry".into(),
            product_image_url: "https://img.test/dna.png".into(),
            minimum_price: Money::from_cents(5_000),
            recommended_price: Money::from_cents(recommended),
            maximum_price: Money::from_cents(9_900),
            parent_product: Vec::new(),
            available: true,
        })
        .expect("a valid product")
    }

    /// Issue 21: a DNA link took a -1 cent price. Money is never negative now (a stored
    /// negative amount is refused when read), and DNA links need DNA access.
    #[test]
    fn dna_link_prices_are_never_negative_and_need_dna_access() {
        assert!(Money::try_from_cents(-1).is_err());
        let with = LinkSettings::new(
            PartnerId::parse("acme").expect("id"),
            Email::parse("ops@acme.test").expect("email"),
        )
        .with_dna_access(true);
        let l = dna_link(&bases(), &with, &dna(7_900), Some(Money::from_cents(8_000)))
            .expect("DNA access");
        assert_eq!(l.user_set_price, Money::from_cents(8_000));
        assert_eq!(
            l.intake_url,
            "https://legacy.test/dna/ancestry?partner_id=acme"
        );
        let fallback = dna_link(&bases(), &with, &dna(7_900), None).expect("DNA access");
        assert_eq!(fallback.user_set_price, Money::from_cents(7_900));
        assert!(
            dna_link(&bases(), &with.with_dna_access(false), &dna(7_900), None).is_none(),
            "no DNA access, no link"
        );
    }

    #[test]
    fn sanitizer_examples() {
        let u = Url::parse(
            "https://user:pw@x.test/p?email=a@b.c&partner_id=acme&partner_id=evil&m=6&m=1&lang=fr&utm_source=news\
             &utm_term=a@b.c&name=Ann&dob=1990-01-01&sub=7&redeem=true&gclid=abc-1#token",
        )
        .expect("url");
        assert_eq!(
            sanitize(&u, LinkKind::MedicalSelfHosted).as_str(),
            "https://x.test/p?partner_id=acme&m=6&utm_source=news&gclid=abc-1"
        );
        assert_eq!(
            sanitize(&u, LinkKind::CareServices).as_str(),
            "https://x.test/p?partner_id=acme&m=6&utm_source=news&sub=7&redeem=true&gclid=abc-1"
        );
        assert_eq!(
            sanitize(
                &Url::parse("https://x.test/p?m=12").expect("url"),
                LinkKind::MedicalSelfHosted
            )
            .as_str(),
            "https://x.test/p"
        );
    }

    proptest! {
        #[test]
        fn the_sanitizer_never_emits_an_unlisted_parameter(
            pairs in proptest::collection::vec(("[a-z_]{0,12}|partner_id|m|lang|sub|redeem|utm_source|gclid|email|phone", ".{0,40}"), 0..12),
            path in "[a-zA-Z0-9/._%-]{0,30}",
            kind in prop_oneof![Just(LinkKind::MedicalSelfHosted), Just(LinkKind::ProviderHosted), Just(LinkKind::CareServices)],
        ) {
            let mut u = Url::parse("https://intake.test/").expect("url");
            u.set_path(&path);
            u.query_pairs_mut().extend_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            let out = sanitize(&u, kind);
            let mut names = HashSet::new();
            for (k, v) in out.query_pairs() {
                prop_assert!(ALLOWED_PARAMS.contains(&k.as_ref()), "leaked {k}");
                prop_assert!(valid_param(kind, &k, &v), "invalid {k}={v}");
                prop_assert!(names.insert(k.to_string()), "duplicate {k}");
            }
            prop_assert!(out.fragment().is_none() && out.password().is_none() && out.username().is_empty());
            // Sanitizing is idempotent.
            prop_assert_eq!(sanitize(&out, kind), out);
        }

        #[test]
        fn the_sanitizer_never_panics_on_arbitrary_text(raw in ".{0,200}") {
            if let Ok(u) = Url::parse(&format!("https://h.test/?{raw}")) {
                let _ = sanitize(&u, LinkKind::CareServices);
            }
            if let Ok(u) = Url::parse(&raw) {
                let _ = sanitize(&u, LinkKind::MedicalSelfHosted);
            }
        }
    }
}
