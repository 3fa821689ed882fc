//! Shareable links: every URL the service returns is built here and passes [`sanitize`].
//!
//! - Medical intake links: self-hosted (`{intake_url}/<selfHostedSlug>`) when the product is
//!   configured for it and the partner's `headlessLinks` switch is on, else provider-hosted
//!   (`{legacy_intake_url}/<legacyPath>`, always returned as `legacyUrl`). A sub-account rewrites
//!   `partner_id` into its attribution code (`acme.7`); medical links never carry `sub`.
//! - DNA links: `{legacy_intake_url}/<intakePath>?partner_id=…`.
//! - Care Services links: `{care_services_url}/<slug>` with `partner_id`, `sub`, `m`, `lang`,
//!   and `redeem=true` on the Bulk Code Redemption link (which never carries `m`).

pub mod attribution;
pub mod ports;

mod service;

pub use service::{CatalogError, LinkError, LinkService};

use std::collections::{BTreeMap, HashSet};

use url::Url;

use crate::account::{CareFlags, Partner, PartnerSettings};
use crate::catalog::{CareProduct, Category, DnaProduct, MedicalProduct};
use crate::kernel::ids::{ImageFileId, ProductId};
use crate::kernel::values::{CareService, Lang, Money, PartnerId, SubId};
use crate::links::attribution::Attribution;

/// The administrator-configured bases of every link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkBases {
    pub intake: Url,
    pub legacy_intake: Url,
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
    partner: &PartnerSettings,
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
    pub key: String,
    pub label: String,
    pub min_price: Money,
    pub max_price: Money,
    pub user_price: Money,
    pub commission: Money,
}

/// `PartnerProductLink` of the spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartnerProductLink {
    pub record_id: ProductId,
    pub email: String,
    pub partner_id: PartnerId,
    pub product_name: String,
    pub details: String,
    pub url: String,
    pub legacy_url: String,
    pub url_style: &'static str,
    pub image_url: String,
    pub category: Vec<Category>,
    pub suggested_prices: String,
    pub tiers: Vec<MedicalTierView>,
}

/// The medical intake link of `product` for `partner` (and one of its sub-accounts).
pub fn medical_link(
    bases: &LinkBases,
    partner: &Partner,
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
    let (url, style) = match (
        product.self_hosted_slug(),
        partner.settings().headless_links(),
    ) {
        (Some(slug), true) => {
            let mut params = vec![("partner_id", code)];
            if let Some(l) = lang_param(lang, partner.settings(), product.self_hosted_langs()) {
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
        email: partner.settings().email().to_string(),
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
    pub record_id: ProductId,
    pub email: String,
    pub partner_id: PartnerId,
    pub product_name: String,
    pub description: String,
    pub intake_url: String,
    pub product_image_url: String,
    pub minimum_price: Money,
    pub recommended_price: Money,
    pub maximum_price: Money,
    pub user_set_price: Money,
    pub parent_product: Vec<String>,
    pub available: bool,
}

pub fn dna_link(
    bases: &LinkBases,
    partner: &Partner,
    product: &DnaProduct,
    price: Option<Money>,
) -> DnaProductLink {
    DnaProductLink {
        record_id: product.id(),
        email: partner.settings().email().to_string(),
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
    }
}

/// Whether the partner currently sees `service`: (subscription active OR manual override) AND
/// (yearly bundle OR individual access) AND the global category flag is on.
pub fn care_access(partner: &PartnerSettings, flags: &CareFlags, service: CareService) -> bool {
    let cs = &partner.care_services();
    (cs.subscription_active || cs.manual_override)
        && (cs.yearly_bundle || cs.services.contains(&service))
        && flags.get(service)
}

/// What a Care Services links request asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CareQuery {
    pub service: Option<CareService>,
    pub sub: Option<SubId>,
    pub duration: Option<u8>,
    pub lang: Option<String>,
}

/// A Care Services tier as partners see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CareTierView {
    /// The tier's duration (not part of the wire shape; its `url` carries it as `m`).
    pub months: u8,
    pub key: String,
    pub label: String,
    pub user_price: Money,
    pub commission: Money,
    pub url: String,
}

/// `CareServiceLink` of the spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CareServiceLink {
    pub record_id: ProductId,
    pub service: CareService,
    pub product_name: String,
    pub description: String,
    pub image_url: String,
    pub url: String,
    pub redeem_url: String,
    pub tiers: Vec<CareTierView>,
}

/// What the embedded Care Services view shows: the partner's accessible Care Services links, the
/// language the page speaks and the languages it may switch to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CareEmbed {
    pub partner_name: String,
    /// The page's language: the links' `lang` rule (Care Services offer both), English when that
    /// rule leaves none.
    pub lang: Lang,
    /// The languages a visitor may switch to: the partner's enabled ones and its default.
    pub langs: Vec<Lang>,
    pub links: Vec<CareServiceLink>,
}

/// The embedded view's language by the rule of the links' `lang` parameter.
pub fn embed_lang(requested: Option<&str>, partner: &PartnerSettings) -> Lang {
    lang_param(requested, partner, &Lang::ALL).unwrap_or(Lang::En)
}

/// The languages the embedded view offers: enabled or default, in `Lang::ALL` order.
pub fn embed_langs(partner: &PartnerSettings) -> Vec<Lang> {
    Lang::ALL
        .into_iter()
        .filter(|l| partner.enabled_langs().contains(l) || partner.default_lang() == *l)
        .collect()
}

/// The links of `product`, or `None` when a requested duration leaves it without a tier.
pub fn care_link(
    bases: &LinkBases,
    partner: &Partner,
    product: &CareProduct,
    q: &CareQuery,
) -> Option<CareServiceLink> {
    let tiers: Vec<_> = product
        .tiers()
        .iter()
        .filter(|t| q.duration.is_none_or(|d| t.months == d))
        .collect();
    if tiers.is_empty() {
        return None;
    }
    let base = join(&bases.care_services, product.slug());
    let lang = lang_param(q.lang.as_deref(), partner.settings(), &Lang::ALL);
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
    pub id: ProductId,
    pub name: String,
    pub image: String,
    pub image_kind: &'static str,
    pub image_file_id: ImageFileId,
    pub image_source_url: String,
    pub intake_url: String,
    pub price_1_month: String,
    pub price_3_month: String,
    pub price_6_month: String,
    pub details: String,
}

/// `$1299.00`; `$0.00` when the term is not offered.
pub fn price_text(m: Option<Money>) -> String {
    format!("${}", m.unwrap_or_default())
}

pub fn catalog_product(
    bases: &LinkBases,
    partner: &Partner,
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
    pub partner: Option<Partner>,
    pub prices: BTreeMap<ProductId, Money>,
    pub products: Vec<DnaProduct>,
}

/// What a partner's medical intake links are built from, read with a token's record in one round
/// trip ([`ports::LinkRepo::medical_links_for_token`]).
#[derive(Debug, Clone, Default)]
pub struct MedicalLinkInputs {
    /// Whether the `sub` asked for names one of the partner's sub-accounts (`true` when none was).
    pub sub_exists: bool,
    pub partner: Option<Partner>,
    pub prices: BTreeMap<ProductId, BTreeMap<String, Money>>,
    pub products: Vec<MedicalProduct>,
}

/// What a partner's Care Services links are built from, read with a token's record in one round
/// trip ([`ports::LinkRepo::care_links_for_token`]).
#[derive(Debug, Clone, Default)]
pub struct CareLinkInputs {
    /// Whether the `sub` asked for names one of the partner's sub-accounts (`true` when none was).
    pub sub_exists: bool,
    pub partner: Option<Partner>,
    pub flags: CareFlags,
    pub products: Vec<CareProduct>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::account::{CareServicesAccess, PartnerSettingsInput};
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
        use crate::account::ports::MockAccountRepo;
        use crate::catalog::ports::MockCatalogRepo;
        use crate::links::ports::MockLinkRepo;
        use futures_util::FutureExt;

        let service = |active: Option<bool>| {
            let mut accounts = MockAccountRepo::new();
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
            Arc::new(crate::account::ports::MockAccountRepo::new()),
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
        let p = partner(true, Lang::En, &[Lang::En, Lang::Es]);
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
            (
                product(Some("s"), &[]),
                partner(false, Lang::En, &[Lang::En]),
            ),
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
            &partner(true, Lang::En, &[Lang::En]),
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
        let es_default = partner(true, Lang::Es, &both);
        let en_only = partner(true, Lang::En, &[Lang::En]);
        let es_only = partner(true, Lang::Es, &[Lang::Es]);
        assert_eq!(embed_lang(None, es_default.settings()), Lang::Es);
        assert_eq!(embed_lang(Some("en"), es_default.settings()), Lang::En);
        assert_eq!(embed_lang(Some("es"), en_only.settings()), Lang::En);
        assert_eq!(embed_lang(Some("fr"), en_only.settings()), Lang::En);
        assert_eq!(embed_lang(Some("en"), es_only.settings()), Lang::Es);
        assert_eq!(embed_langs(es_default.settings()), both);
        assert_eq!(embed_langs(en_only.settings()), [Lang::En]);
    }

    #[test]
    fn lang_rules() {
        let both = [Lang::En, Lang::Es];
        let en_default = partner(true, Lang::En, &both);
        let es_default = partner(true, Lang::Es, &both);
        let en_only = partner(true, Lang::En, &[Lang::En]);
        let s = &en_default.settings();
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
            lang_param(Some("fr"), es_default.settings(), &both),
            Some(Lang::Es),
            "unknown: default"
        );
        assert_eq!(
            lang_param(Some("es"), en_only.settings(), &both),
            None,
            "disabled: default en"
        );
        assert_eq!(
            lang_param(Some("es"), s, &[Lang::En]),
            None,
            "not offered by the product"
        );
        assert_eq!(
            lang_param(None, es_default.settings(), &[Lang::En]),
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
            &partner(true, Lang::En, &[Lang::En]),
            &product(None, &[]),
            Some(&prices),
            None,
            None,
        );
        assert_eq!(l.tiers[0].user_price, Money::from_cents(25_000));
        assert_eq!(l.tiers[1].user_price, Money::from_cents(129_900));
        let c = catalog_product(
            &bases(),
            &partner(true, Lang::En, &[Lang::En]),
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
                    user_price: Money::from_cents(1000 * i64::from(*m)),
                    commission: Money::from_cents(100),
                })
                .collect(),
        })
        .expect("a valid product")
    }

    #[test]
    fn care_links_carry_sub_m_lang_and_redeem() {
        let p = partner(true, Lang::Es, &[Lang::En, Lang::Es]);
        let q = CareQuery {
            sub: SubId::new(7),
            duration: Some(3),
            ..CareQuery::default()
        };
        let l = care_link(&bases(), &p, &care(&[1, 3, 12]), &q).expect("has a 3-month tier");
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
            care_link(&bases(), &p, &care(&[1, 12]), &q).is_none(),
            "no tier of that duration"
        );
        let all = care_link(
            &bases(),
            &partner(true, Lang::En, &[Lang::En]),
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
        let p = |i: &PartnerSettingsInput| PartnerSettings::parse(i.clone()).expect("settings");
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
