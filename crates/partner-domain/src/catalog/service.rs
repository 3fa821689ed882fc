//! The catalog service: the operator's management of products and partners' prices.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::account::ports::AccountRepo;
use crate::catalog::ports::CatalogRepo;
use crate::catalog::{
    CareProduct, CareProductInput, DnaProduct, DnaProductInput, MedicalProduct,
    MedicalProductInput, Stored,
};
use crate::kernel::clock::Clock;
use crate::kernel::error::RepoError;
use crate::kernel::ids::ProductId;
use crate::kernel::values::{Money, PartnerId, ValueError};

/// Errors of the partner price calls of [`CatalogService`].
#[derive(Debug, thiserror::Error)]
pub enum PutPriceError {
    /// No partner has that id.
    #[error("no partner with that partnerId")]
    UnknownPartner,
    /// No product has that id.
    #[error("no product with that id")]
    UnknownProduct,
    /// A price breaks the product's rules.
    #[error(transparent)]
    Invalid(#[from] ValueError),
    /// The store failed.
    #[error(transparent)]
    Repo(#[from] RepoError),
}

/// The operator's management of the catalog.
#[derive(Debug, Clone)]
pub struct CatalogService {
    repo: Arc<dyn CatalogRepo>,
    accounts: Arc<dyn AccountRepo>,
    clock: Arc<dyn Clock>,
}

impl CatalogService {
    /// The service over its ports and clock.
    pub fn new(
        repo: Arc<dyn CatalogRepo>,
        accounts: Arc<dyn AccountRepo>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            repo,
            accounts,
            clock,
        }
    }

    /// Checks ([`MedicalProduct::parse`]) and stores a medical product; `true` when inserted.
    pub async fn put_medical(
        &self,
        p: MedicalProductInput,
    ) -> Result<(Stored<MedicalProduct>, bool), PutPriceError> {
        let p = MedicalProduct::parse(p)?;
        Ok(self.repo.put_medical(&p, self.clock.now()).await?)
    }

    /// Checks ([`DnaProduct::parse`]) and stores a DNA product; `true` when inserted.
    pub async fn put_dna(
        &self,
        p: DnaProductInput,
    ) -> Result<(Stored<DnaProduct>, bool), PutPriceError> {
        let p = DnaProduct::parse(p)?;
        Ok(self.repo.put_dna(&p, self.clock.now()).await?)
    }

    /// Checks ([`CareProduct::parse`]) and stores a Care Services product; `true` when inserted.
    pub async fn put_care(
        &self,
        p: CareProductInput,
    ) -> Result<(Stored<CareProduct>, bool), PutPriceError> {
        let p = CareProduct::parse(p)?;
        Ok(self.repo.put_care(&p, self.clock.now()).await?)
    }

    async fn known_partner(&self, partner: &PartnerId) -> Result<(), PutPriceError> {
        match self.accounts.partner(partner).await? {
            Some(_) => Ok(()),
            None => Err(PutPriceError::UnknownPartner),
        }
    }

    /// Replaces the partner's tier prices of one medical product.
    pub async fn put_medical_prices(
        &self,
        partner: &PartnerId,
        product: ProductId,
        prices: BTreeMap<String, Money>,
    ) -> Result<(), PutPriceError> {
        self.known_partner(partner).await?;
        let p = self
            .repo
            .medical_product(product)
            .await?
            .ok_or(PutPriceError::UnknownProduct)?;
        p.check_prices(&prices)?;
        Ok(self
            .repo
            .put_medical_prices(partner, product, &prices, self.clock.now())
            .await?)
    }

    /// Sets the partner's price of one DNA product.
    pub async fn put_dna_price(
        &self,
        partner: &PartnerId,
        product: ProductId,
        price: Money,
    ) -> Result<(), PutPriceError> {
        self.known_partner(partner).await?;
        let p = self
            .repo
            .dna_product(product)
            .await?
            .ok_or(PutPriceError::UnknownProduct)?;
        p.check_price(price)?;
        Ok(self
            .repo
            .put_dna_price(partner, product, price, self.clock.now())
            .await?)
    }
}

/// The service's rules over mocks of its ports and a fixed clock: what reaches storage, and what
/// is refused before it does.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::account::ports::MockAccountRepo;
    use crate::account::{CareServicesAccess, Partner, PartnerSettings, PartnerSettingsInput};
    use crate::catalog::ports::MockCatalogRepo;
    use crate::catalog::{Category, MedicalTier};
    use crate::kernel::clock::FixedClock;
    use crate::kernel::ids::ImageFileId;
    use crate::kernel::values::{Email, Lang};
    use futures_util::FutureExt;
    use time::OffsetDateTime;
    use time::macros::datetime;
    use uuid::Uuid;

    const NOW: OffsetDateTime = datetime!(2026-11-23 12:00 UTC);

    fn service(repo: MockCatalogRepo, accounts: MockAccountRepo) -> CatalogService {
        CatalogService::new(
            Arc::new(repo),
            Arc::new(accounts),
            Arc::new(FixedClock::new(NOW)),
        )
    }

    fn acme() -> PartnerId {
        PartnerId::parse("acme").expect("id")
    }

    fn partner() -> Partner {
        let settings = PartnerSettings::parse(PartnerSettingsInput {
            name: "Acme".into(),
            email: Email::parse("ops@acme.test").expect("email"),
            active: true,
            dna_access: true,
            headless_links: false,
            default_lang: Lang::En,
            enabled_langs: vec![Lang::En],
            care_services: CareServicesAccess {
                subscription_active: false,
                manual_override: false,
                yearly_bundle: false,
                services: Vec::new(),
            },
        })
        .expect("settings");
        Partner::new(acme(), settings, NOW, NOW)
    }

    /// Accounts in which `acme` exists (or not).
    fn accounts(exists: bool) -> MockAccountRepo {
        let mut a = MockAccountRepo::new();
        a.expect_partner()
            .withf(|p| *p == acme())
            .returning(move |_| Ok(exists.then(partner)));
        a
    }

    fn medical_input() -> MedicalProductInput {
        MedicalProductInput {
            id: ProductId::from_uuid(Uuid::from_u128(1)),
            name: "Semaglutide".into(),
            categories: vec![Category::WeightLoss],
            details: "Available in all states".into(),
            image_url: "https://img.test/s.png".into(),
            image_file_id: ImageFileId::from_uuid(Uuid::nil()),
            image_source_url: "https://img.test/src.png".into(),
            active: true,
            legacy_path: "weight-loss/semaglutide".into(),
            self_hosted_slug: None,
            self_hosted_langs: Vec::new(),
            suggested_prices: "$199-$299".into(),
            tiers: vec![MedicalTier {
                key: "m1".into(),
                label: "1 month".into(),
                months: 1,
                min_price: Money::from_cents(19_900),
                max_price: Money::from_cents(39_900),
                recommended_price: Money::from_cents(29_900),
                commission: Money::from_cents(5_000),
            }],
        }
    }

    fn dna_input() -> DnaProductInput {
        DnaProductInput {
            id: ProductId::from_uuid(Uuid::from_u128(2)),
            product_name: "Ancestry".into(),
            description: "Saliva kit".into(),
            intake_path: "dna/ancestry".into(),
            product_image_url: "https://img.test/a.png".into(),
            minimum_price: Money::from_cents(5_000),
            recommended_price: Money::from_cents(7_900),
            maximum_price: Money::from_cents(9_900),
            parent_product: Vec::new(),
            available: true,
        }
    }

    fn stored<T>(record: T) -> Stored<T> {
        Stored {
            record,
            created_at: NOW,
            updated_at: NOW,
        }
    }

    #[test]
    fn a_valid_product_is_stored_at_the_clocks_instant() {
        let mut repo = MockCatalogRepo::new();
        repo.expect_put_medical()
            .withf(|p, now| p.id() == ProductId::from_uuid(Uuid::from_u128(1)) && *now == NOW)
            .times(1)
            .returning(|p, _| Ok((stored(p.clone()), true)));
        repo.expect_put_dna()
            .withf(|p, now| p.id() == ProductId::from_uuid(Uuid::from_u128(2)) && *now == NOW)
            .times(1)
            .returning(|p, _| Ok((stored(p.clone()), false)));
        let svc = service(repo, MockAccountRepo::new());
        let (m, inserted) = svc
            .put_medical(medical_input())
            .now_or_never()
            .expect("ready")
            .expect("stored");
        assert!(inserted);
        assert_eq!(m.created_at, NOW);
        let (_, inserted) = svc
            .put_dna(dna_input())
            .now_or_never()
            .expect("ready")
            .expect("stored");
        assert!(!inserted, "replaced");
    }

    #[test]
    fn an_invalid_product_never_reaches_storage() {
        let mut repo = MockCatalogRepo::new();
        repo.expect_put_medical().never();
        repo.expect_put_dna().never();
        let svc = service(repo, MockAccountRepo::new());
        let mut bad = medical_input();
        bad.tiers[0].recommended_price = Money::from_cents(1);
        let r = svc.put_medical(bad).now_or_never().expect("ready");
        assert!(matches!(r, Err(PutPriceError::Invalid(_))), "{r:?}");
        let mut bad = dna_input();
        bad.intake_path = "../x".into();
        let r = svc.put_dna(bad).now_or_never().expect("ready");
        assert!(matches!(r, Err(PutPriceError::Invalid(_))), "{r:?}");
    }

    fn prices(cents: u32) -> BTreeMap<String, Money> {
        BTreeMap::from([("m1".to_owned(), Money::from_cents(cents))])
    }

    #[test]
    fn tier_prices_are_stored_for_a_known_partner_and_product_within_the_bounds() {
        let mut repo = MockCatalogRepo::new();
        repo.expect_medical_product()
            .returning(|_| Ok(Some(MedicalProduct::parse(medical_input()).expect("valid"))));
        repo.expect_put_medical_prices()
            .withf(|p, product, prices, now| {
                *p == acme()
                    && *product == ProductId::from_uuid(Uuid::from_u128(1))
                    && prices.get("m1") == Some(&Money::from_cents(25_000))
                    && *now == NOW
            })
            .times(1)
            .returning(|_, _, _, _| Ok(()));
        service(repo, accounts(true))
            .put_medical_prices(
                &acme(),
                ProductId::from_uuid(Uuid::from_u128(1)),
                prices(25_000),
            )
            .now_or_never()
            .expect("ready")
            .expect("stored");
    }

    #[test]
    fn tier_prices_are_refused_in_the_contracts_order() {
        let product = ProductId::from_uuid(Uuid::from_u128(1));
        // An unknown partner: the product is not even read.
        let mut repo = MockCatalogRepo::new();
        repo.expect_medical_product().never();
        repo.expect_put_medical_prices().never();
        let r = service(repo, accounts(false))
            .put_medical_prices(&acme(), product, prices(25_000))
            .now_or_never()
            .expect("ready");
        assert!(matches!(r, Err(PutPriceError::UnknownPartner)), "{r:?}");
        // An unknown product.
        let mut repo = MockCatalogRepo::new();
        repo.expect_medical_product().returning(|_| Ok(None));
        repo.expect_put_medical_prices().never();
        let r = service(repo, accounts(true))
            .put_medical_prices(&acme(), product, prices(25_000))
            .now_or_never()
            .expect("ready");
        assert!(matches!(r, Err(PutPriceError::UnknownProduct)), "{r:?}");
        // A price outside its tier, and a tier the product does not have.
        for bad in [
            prices(40_000),
            BTreeMap::from([("m9".to_owned(), Money::from_cents(25_000))]),
        ] {
            let mut repo = MockCatalogRepo::new();
            repo.expect_medical_product()
                .returning(|_| Ok(Some(MedicalProduct::parse(medical_input()).expect("valid"))));
            repo.expect_put_medical_prices().never();
            let r = service(repo, accounts(true))
                .put_medical_prices(&acme(), product, bad)
                .now_or_never()
                .expect("ready");
            assert!(matches!(r, Err(PutPriceError::Invalid(_))), "{r:?}");
        }
    }

    #[test]
    fn a_dna_price_must_be_within_the_products_bounds() {
        let product = ProductId::from_uuid(Uuid::from_u128(2));
        let dna = || Ok(Some(DnaProduct::parse(dna_input()).expect("valid")));
        let mut repo = MockCatalogRepo::new();
        repo.expect_dna_product().returning(move |_| dna());
        repo.expect_put_dna_price()
            .withf(|p, _, price, now| {
                *p == acme() && *price == Money::from_cents(8_000) && *now == NOW
            })
            .times(1)
            .returning(|_, _, _, _| Ok(()));
        let svc = service(repo, accounts(true));
        svc.put_dna_price(&acme(), product, Money::from_cents(8_000))
            .now_or_never()
            .expect("ready")
            .expect("stored");
        let r = svc
            .put_dna_price(&acme(), product, Money::from_cents(10_000))
            .now_or_never()
            .expect("ready");
        assert!(matches!(r, Err(PutPriceError::Invalid(_))), "{r:?}");
        let mut repo = MockCatalogRepo::new();
        repo.expect_dna_product().returning(|_| Ok(None));
        let r = service(repo, accounts(true))
            .put_dna_price(&acme(), product, Money::from_cents(8_000))
            .now_or_never()
            .expect("ready");
        assert!(matches!(r, Err(PutPriceError::UnknownProduct)), "{r:?}");
    }

    #[test]
    fn a_storage_failure_is_a_repo_error() {
        let mut accounts = MockAccountRepo::new();
        accounts
            .expect_partner()
            .returning(|_| Err(RepoError::new("down")));
        let r = service(MockCatalogRepo::new(), accounts)
            .put_dna_price(
                &acme(),
                ProductId::from_uuid(Uuid::nil()),
                Money::from_cents(1),
            )
            .now_or_never()
            .expect("ready");
        assert!(matches!(r, Err(PutPriceError::Repo(_))), "{r:?}");
    }
}
