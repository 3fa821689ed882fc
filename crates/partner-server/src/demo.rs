//! `partner-server demo`: `serve` on a demo data set, created idempotently at start through
//! the same domain services the API uses.

use std::sync::Arc;

use anyhow::Context;
use partner_domain::account::token::TokenPepper;
use partner_domain::account::{
    AccountService, CareServicesAccess, PartnerSettings, PartnerSettingsInput,
};
use partner_domain::kernel::clock::{Clock, FixedClock, SystemClock};
use partner_domain::kernel::cursor::CursorKey;
use partner_domain::kernel::ids::{ImageFileId, ProductId};
use partner_domain::kernel::random::{Random, SystemRandom};
use partner_domain::kernel::values::{CareService, Email, Lang, Money, Nickname, PartnerId, SubId};
use partner_domain::lead::{LeadService, NewLead, Origin, Phone, TestFlag};
use partner_domain::order::{NewAnalyticsEvent, Order, OrderParts, OrderService};
use partner_domain::payout::{NewPayout, PayoutService};
use partner_domain::sub_account::{CreateSubAccountError, SubAccountService};
use partner_postgres::PgStore;
use time::Duration;

use crate::config::Config;

pub const DEMO_PARTNER: &str = "demo-clinic";
const LEADS: usize = 320;

/// What the demo prints.
#[derive(Debug)]
pub struct DemoAccess {
    pub token: String,
    pub seeded: bool,
}

/// Gives the config what `demo` needs (a pepper and an operator token) when it lacks them.
pub fn prepare_config(config: &mut Config) {
    let rng = SystemRandom::new();
    let random = |len| {
        partner_domain::kernel::random::random_string(
            &rng,
            b"abcdefghijklmnopqrstuvwxyz0123456789",
            len,
        )
    };
    if config.token_pepper.is_none() {
        config.token_pepper = Some(random(48));
    }
    if config.internal_token.is_none() {
        config.internal_token = Some(format!("demo-internal-{}", random(24)));
    }
}

/// Creates the demo data unless the demo partner already exists, and mints a fresh token for
/// its user (tokens are shown once, so each start prints a new one).
pub async fn seed(config: &Config) -> anyhow::Result<DemoAccess> {
    let store = Arc::new(PgStore::new(&config.database_url, 4)?);
    let rng: Arc<dyn Random> = Arc::new(SystemRandom::new());
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let pepper = config
        .token_pepper
        .as_deref()
        .map(|p| TokenPepper::new(p.as_bytes()));
    let accounts = AccountService::new(store.clone(), pepper, clock.clone(), rng.clone());
    let partner = PartnerId::parse(DEMO_PARTNER)?;

    let seeded = accounts.partner(&partner).await.is_err();
    if seeded {
        let settings = PartnerSettings::parse(PartnerSettingsInput {
            name: "Demo Clinic".into(),
            email: Email::parse("partners@demo-clinic.test")?,
            active: true,
            dna_access: true,
            headless_links: true,
            default_lang: Lang::En,
            enabled_langs: vec![Lang::En, Lang::Es],
            care_services: CareServicesAccess {
                subscription_active: true,
                manual_override: false,
                yearly_bundle: true,
                services: CareService::ALL.to_vec(),
            },
        })?;
        accounts.put_partner(&partner, settings).await?;
        accounts
            .create_user(
                Email::parse("owner@demo-clinic.test")?,
                partner.clone(),
                false,
            )
            .await?;
        seed_activity(store.clone(), &partner, rng.clone()).await?;
        seed_catalog(store.clone(), &partner).await?;
        seed_coupons(store.clone(), &partner, rng.clone()).await?;
    }
    let user = accounts
        .users(&partner)
        .await?
        .into_iter()
        .next()
        .context("the demo partner has no user")?;
    let token = accounts.issue_token(user.id(), None).await?;
    Ok(DemoAccess {
        token: token.token().expose().to_owned(),
        seeded,
    })
}

async fn seed_activity(
    store: Arc<PgStore>,
    partner: &PartnerId,
    rng: Arc<dyn Random>,
) -> anyhow::Result<()> {
    let now = SystemClock.now();
    let subs = SubAccountService::new(store.clone(), Arc::new(SystemClock), rng.clone());
    for (id, nick) in [(1, "Front desk"), (2, "Instagram affiliate")] {
        match subs
            .create(
                partner,
                SubId::new(id).context("sub id")?,
                Nickname::parse(nick)?,
            )
            .await
        {
            Ok(_) | Err(CreateSubAccountError::Duplicate(_)) => {}
            Err(CreateSubAccountError::Repo(e)) => return Err(e.into()),
        }
    }

    // Leads spread over the last 90 days: the clock steps forward between ingests.
    let clock = Arc::new(FixedClock::new(now - Duration::days(90)));
    let step = Duration::days(90) / (LEADS as u32);
    let leads = LeadService::new(
        store.clone(),
        store.clone(),
        clock.clone(),
        rng.clone(),
        CursorKey::new(b"demo"),
    );
    const FIRST: [&str; 8] = [
        "Ana", "Ben", "Carla", "Dev", "Emma", "Farid", "Grace", "Hugo",
    ];
    const LAST: [&str; 6] = ["Lopez", "Smith", "Nguyen", "Okafor", "Rossi", "Kim"];
    let headless = Origin::parse("headless_intake")?;
    for i in 0..LEADS {
        clock.advance(step);
        let (origin, location, test) = match i % 10 {
            0..=5 => (
                Origin::parse("managed-website")?,
                "Austin, TX".to_owned(),
                TestFlag::REAL,
            ),
            6 | 7 => (headless.clone(), "Weight Loss".to_owned(), TestFlag::REAL),
            8 => (
                headless.clone(),
                "Weight Loss".to_owned(),
                TestFlag::parse(Some(true), Some("simulation"), &headless)?,
            ),
            _ => (
                headless.clone(),
                "Hair Loss".to_owned(),
                TestFlag::parse(Some(true), Some("provider_test_mode"), &headless)?,
            ),
        };
        let first = pick(&FIRST, i);
        let last = pick(&LAST, i);
        leads
            .ingest(NewLead {
                partner_id: partner.clone(),
                sub_id: SubId::new(u16::try_from(i % 3).unwrap_or(0)),
                first_name: first.into(),
                last_name: last.into(),
                email: Email::parse(&format!(
                    "{}.{}{i}@example.com",
                    first.to_lowercase(),
                    last.to_lowercase()
                ))?,
                email_consent: i % 7 != 0,
                // Early progressive-intake rows have no phone yet.
                phone: if i % 10 == 6 {
                    None
                } else {
                    Some(Phone::parse(&format!("+1 512 555 {:04}", i))?)
                },
                sms_consent: i % 5 != 0,
                origin,
                location,
                question_id: (i % 4 == 0).then(|| format!("q-{}", i % 12)),
                test,
            })
            .await?;
    }

    let orders = OrderService::new(
        store.clone(),
        store.clone(),
        Arc::new(SystemClock),
        rng.clone(),
    );
    for i in 0..14i64 {
        let is_test = i >= 11;
        orders
            .ingest(Order::new(OrderParts {
                order_id: format!("{}-{:04}", if is_test { "PTEST" } else { "ORD" }, 1000 + i),
                partner_id: partner.clone(),
                sub_id: SubId::new(u16::try_from(i % 3).unwrap_or(0)),
                created_date: now - Duration::days(60 - 4 * i),
                product: pick(
                    &[
                        "Semaglutide 1 month",
                        "Tirzepatide 3 months",
                        "Finasteride 6 months",
                    ],
                    i as usize,
                )
                .into(),
                amount: Money::from_cents(19_900 + 10_000 * (i % 3) as u32),
                commission: Money::from_cents(2_985 + 1_500 * (i % 3) as u32),
                status: "shipped".into(),
                is_test,
                source: "pharmacy".into(),
                customer_name: Some(format!(
                    "{} {}",
                    pick(&FIRST, i as usize),
                    pick(&LAST, i as usize)
                )),
                customer_email: Some(format!("customer{i}@example.com")),
            })?)
            .await?;
    }
    for i in 0..3i64 {
        orders
            .record_event(NewAnalyticsEvent {
                run_id: format!("demo-run-{i}"),
                partner_id: partner.clone(),
                sub_id: SubId::new(1),
                event: "order_completed".into(),
                product: Some("Semaglutide 1 month".into()),
                amount: Some(Money::from_cents(19_900)),
                occurred_at: now - Duration::days(10 * i + 1),
                test_source: partner_domain::lead::TestSource::Simulation,
            })
            .await?;
    }

    let payouts = PayoutService::new(store.clone(), store, Arc::new(SystemClock), rng);
    for (days_ago, cents) in [(45, 45_050), (15, 38_975), (1, 12_000)] {
        payouts
            .record(NewPayout {
                partner_id: partner.clone(),
                payout_date: (now - Duration::days(days_ago)).date(),
                amount: Money::from_cents(cents),
                status: "paid".into(),
                receipt_url: None,
                note: Some("demo".into()),
            })
            .await?;
    }
    Ok(())
}

fn demo_id(n: u128) -> uuid::Uuid {
    uuid::Uuid::from_u128(0xd3e0_0000_0000_4000_8000_0000_0000_0000 | n)
}

/// Products of every kind (medical self-hosted and provider-hosted, DNA, all five Care
/// Services) and the demo partner's own prices. Catalog records are global and upserted.
async fn seed_catalog(store: Arc<PgStore>, partner: &PartnerId) -> anyhow::Result<()> {
    use partner_domain::catalog::{
        CareProductInput, CareTier, CatalogService, Category, DnaProductInput, MedicalProductInput,
        MedicalTier,
    };
    let catalog = CatalogService::new(store.clone(), store, Arc::new(SystemClock));
    let usd = |d: u32| Money::from_cents(d * 100);
    let tier = |key: &str, months: u8, min: u32, rec: u32, max: u32, commission: u32| MedicalTier {
        key: key.into(),
        label: format!("{months} month{}", if months == 1 { "" } else { "s" }),
        months,
        min_price: usd(min),
        max_price: usd(max),
        recommended_price: usd(rec),
        commission: usd(commission),
    };
    let medical = [
        (
            1,
            "Semaglutide",
            vec![Category::WeightLoss],
            Some("semaglutide"),
            vec![Lang::En, Lang::Es],
            "semaglutide",
        ),
        (
            2,
            "Tirzepatide",
            vec![Category::WeightLoss, Category::Wellness],
            Some("tirzepatide"),
            vec![Lang::En],
            "tirzepatide",
        ),
        (
            3,
            "Finasteride",
            vec![Category::HairLoss, Category::MensHealth],
            None,
            vec![],
            "hair/finasteride",
        ),
        (
            4,
            "Estradiol",
            vec![Category::WomensHealth],
            None,
            vec![],
            "womens/estradiol",
        ),
    ];
    for (n, name, categories, slug, langs, legacy) in medical {
        catalog
            .put_medical(MedicalProductInput {
                id: ProductId::from_uuid(demo_id(n)),
                name: name.into(),
                categories,
                details: "Available in most US states".into(),
                image_url: format!("https://images.example.com/{}.png", name.to_lowercase()),
                image_file_id: ImageFileId::from_uuid(demo_id(100 + n)),
                image_source_url: format!(
                    "https://images.example.com/source/{}.png",
                    name.to_lowercase()
                ),
                active: true,
                legacy_path: legacy.into(),
                self_hosted_slug: slug.map(str::to_owned),
                self_hosted_langs: langs,
                suggested_prices: "$199 - $1299".into(),
                tiers: vec![
                    tier("m1", 1, 199, 299, 399, 50),
                    tier("m3", 3, 699, 799, 999, 140),
                    tier("m6", 6, 1099, 1299, 1499, 250),
                ],
            })
            .await?;
    }
    catalog
        .put_medical_prices(
            partner,
            ProductId::from_uuid(demo_id(1)),
            [("m1".to_owned(), usd(249))].into(),
        )
        .await?;
    catalog
        .put_dna(DnaProductInput {
            id: ProductId::from_uuid(demo_id(10)),
            product_name: "Ancestry + Health DNA Kit".into(),
            description: "Saliva kit with ancestry and health reports".into(),
            intake_path: "dna/ancestry-health".into(),
            product_image_url: "https://images.example.com/dna.png".into(),
            minimum_price: usd(79),
            recommended_price: usd(99),
            maximum_price: usd(149),
            parent_product: vec!["DNA".into()],
            available: true,
        })
        .await?;
    catalog
        .put_dna_price(partner, ProductId::from_uuid(demo_id(10)), usd(119))
        .await?;
    for (n, service) in CareService::ALL.into_iter().enumerate() {
        let tiers = [1u8, 3, 6, 12]
            .into_iter()
            .map(|m| CareTier {
                key: format!("m{m}"),
                label: format!("{m} month{}", if m == 1 { "" } else { "s" }),
                months: m,
                user_price: usd(20 * u32::from(m)),
                commission: usd(4 * u32::from(m)),
            })
            .collect();
        catalog
            .put_care(CareProductInput {
                id: ProductId::from_uuid(demo_id(20 + n as u128)),
                service,
                slug: service.as_str().into(),
                product_name: format!("{} membership", service.as_str().replace('-', " ")),
                description: "Unlimited virtual visits".into(),
                image_url: format!("https://images.example.com/{}.png", service.as_str()),
                tiers,
            })
            .await?;
    }
    Ok(())
}

/// A bulk order with active, redeemed and void codes, and an older one whose codes expired.
async fn seed_coupons(
    store: Arc<PgStore>,
    partner: &PartnerId,
    rng: Arc<dyn Random>,
) -> anyhow::Result<()> {
    use partner_domain::coupon::{BulkOrderRequest, CouponService, ProductSlug};
    let now = SystemClock.now();
    let purchaser = Email::parse("hr@employer.example.com")?;
    let request = |quantity, expires_at, slug| BulkOrderRequest {
        partner_id: partner.clone(),
        sub_id: SubId::new(1),
        product_slug: slug,
        months: 12,
        quantity,
        unit_price_cents: 14_900,
        purchaser_email: purchaser.clone(),
        purchaser_source: "employer-benefits".into(),
        expires_at,
        notes: Some("Demo bulk order".into()),
    };
    // Issued 30 days ago with an expiry that has passed since: these read as expired.
    let past: Arc<dyn Clock> = Arc::new(FixedClock::new(now - Duration::days(30)));
    let then = CouponService::new(store.clone(), store.clone(), past, rng.clone());
    then.issue(request(
        3,
        Some(now - Duration::days(1)),
        ProductSlug::UrgentCare,
    ))
    .await?;

    let coupons = CouponService::new(store.clone(), store, Arc::new(SystemClock), rng);
    let order = coupons
        .issue(request(
            12,
            Some(now + Duration::days(365)),
            ProductSlug::Primary,
        ))
        .await?;
    let patient = Email::parse("patient@example.com")?;
    for c in order.coupons.iter().take(2) {
        let who = coupons.redemption(&patient, format!("member-{}", &c.code().as_str()[..6]));
        coupons
            .redeem(c.code(), ProductSlug::Primary, 12, who)
            .await?;
    }
    if let Some(c) = order.coupons.get(2) {
        coupons.void(c.id()).await?;
    }
    Ok(())
}

/// The lines printed for a newcomer.
pub fn banner(config: &Config, port: u16, access: &DemoAccess) -> String {
    // `PARTNER_BASE_URL`/`PARTNER_CATALOG_URL` are the addresses partners see (a proxy may
    // front the server); with an ephemeral port (`:0`) only the bound port is meaningful.
    let host = config.bind.rsplit_once(':').map_or("127.0.0.1", |(h, _)| h);
    let bound = format!("http://{host}:{port}");
    let (base, catalog) = if config.bind.ends_with(":0") {
        (bound.clone(), bound)
    } else {
        (
            config.base_url.as_str().trim_end_matches('/').to_owned(),
            config.catalog_url.as_str().trim_end_matches('/').to_owned(),
        )
    };
    let t = &access.token;
    let internal = config.internal_token.as_deref().unwrap_or_default();
    format!(
        "\nPartner Portal API demo: partner `{DEMO_PARTNER}` ({}).\n\
         Partner token (shown once):  {t}\n\
         Operator token:              {internal}\n\n\
         Try:\n\
         curl -s '{base}/api/v1/leads?limit=5' -H 'Authorization: Bearer {t}'\n\
         curl -s '{base}/api/v1/leads?limit=5&includeTest=true' -H 'Authorization: Bearer {t}'\n\
         curl -s '{base}/api/v1/orders' -H 'Authorization: Bearer {t}'\n\n\
         Also: /api/v1/payouts, /api/v1/sub-accounts, /api/v1/medical-intake-links?sub=1,\n\
         /api/v1/care-service-links?duration=12, /api/v1/dna-links,\n\
         /api/v1/care-services-coupons?format=csv (same header), and the public\n\
         catalog without a token: curl -s '{catalog}/api/all-products?partner_id={DEMO_PARTNER}'\n",
        if access.seeded {
            "demo data created"
        } else {
            "demo data already present"
        }
    )
}

/// Writes `PORT=`, `PARTNER_TOKEN=` and `INTERNAL_TOKEN=` lines to `path` (mode 0600 where
/// supported: it holds secrets), for scripts that start `demo` and then call it.
pub fn write_access_file(
    path: &std::path::Path,
    config: &Config,
    port: u16,
    access: &DemoAccess,
) -> anyhow::Result<()> {
    let text = format!(
        "PORT={port}\nPARTNER_TOKEN={}\nINTERNAL_TOKEN={}\n",
        access.token,
        config.internal_token.as_deref().unwrap_or_default()
    );
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    std::io::Write::write_all(&mut file, text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// The `i`-th of `names`, cycling (demo data).
fn pick<'a>(names: &[&'a str], i: usize) -> &'a str {
    i.checked_rem(names.len())
        .and_then(|j| names.get(j))
        .copied()
        .unwrap_or_default()
}
