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
    #[error("no partner with that partnerId")]
    UnknownPartner,
    #[error("no product with that id")]
    UnknownProduct,
    #[error(transparent)]
    Invalid(#[from] ValueError),
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

    pub async fn put_medical(
        &self,
        p: MedicalProductInput,
    ) -> Result<(Stored<MedicalProduct>, bool), PutPriceError> {
        let p = MedicalProduct::parse(p)?;
        Ok(self.repo.put_medical(&p, self.clock.now()).await?)
    }

    pub async fn put_dna(
        &self,
        p: DnaProductInput,
    ) -> Result<(Stored<DnaProduct>, bool), PutPriceError> {
        let p = DnaProduct::parse(p)?;
        Ok(self.repo.put_dna(&p, self.clock.now()).await?)
    }

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
