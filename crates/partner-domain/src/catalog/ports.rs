//! The catalog aggregate's port.
//!
//! With the `mocks` feature, a mock stands in for the store:
//!
//! ```
//! # #[cfg(feature = "mocks")] {
//! use std::sync::Arc;
//! use partner_domain::catalog::ports::{CatalogRepo, MockCatalogRepo};
//!
//! let mut repo = MockCatalogRepo::new();
//! repo.expect_medical_products().returning(|| Ok(Vec::new()));
//! let repo: Arc<dyn CatalogRepo> = Arc::new(repo);
//! # let _ = repo;
//! # }
//! ```

use std::collections::BTreeMap;

use async_trait::async_trait;
use time::OffsetDateTime;

use crate::catalog::{CareProduct, DnaProduct, MedicalProduct, Stored};
use crate::kernel::error::RepoError;
use crate::kernel::ids::ProductId;
use crate::kernel::values::{Money, PartnerId};

/// Storage of the product catalog and partners' prices. Products are global; prices MUST be
/// read and written for the given partner only. Reads return what is stored now (no cache), so
/// an operator's change shows on the next request.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait CatalogRepo: Send + Sync {
    /// Inserts or replaces; `true` when inserted.
    async fn put_medical(
        &self,
        p: &MedicalProduct,
        now: OffsetDateTime,
    ) -> Result<(Stored<MedicalProduct>, bool), RepoError>;
    /// Every medical product (active or not), in no particular order.
    async fn medical_products(&self) -> Result<Vec<MedicalProduct>, RepoError>;
    /// One medical product, if stored.
    async fn medical_product(&self, id: ProductId) -> Result<Option<MedicalProduct>, RepoError>;
    /// Replaces the partner's prices for one product.
    async fn put_medical_prices(
        &self,
        partner: &PartnerId,
        product: ProductId,
        prices: &BTreeMap<String, Money>,
        now: OffsetDateTime,
    ) -> Result<(), RepoError>;
    /// The partner's prices, by product.
    async fn medical_prices(
        &self,
        partner: &PartnerId,
    ) -> Result<BTreeMap<ProductId, BTreeMap<String, Money>>, RepoError>;
    /// Inserts or replaces a DNA product; `true` when inserted.
    async fn put_dna(
        &self,
        p: &DnaProduct,
        now: OffsetDateTime,
    ) -> Result<(Stored<DnaProduct>, bool), RepoError>;
    /// Every DNA product, in no particular order.
    async fn dna_products(&self) -> Result<Vec<DnaProduct>, RepoError>;
    /// One DNA product, if stored.
    async fn dna_product(&self, id: ProductId) -> Result<Option<DnaProduct>, RepoError>;
    /// Sets the partner's price of one DNA product.
    async fn put_dna_price(
        &self,
        partner: &PartnerId,
        product: ProductId,
        price: Money,
        now: OffsetDateTime,
    ) -> Result<(), RepoError>;
    /// The partner's DNA prices, by product.
    async fn dna_prices(
        &self,
        partner: &PartnerId,
    ) -> Result<BTreeMap<ProductId, Money>, RepoError>;
    /// Inserts or replaces a Care Services product; `true` when inserted.
    async fn put_care(
        &self,
        p: &CareProduct,
        now: OffsetDateTime,
    ) -> Result<(Stored<CareProduct>, bool), RepoError>;
    /// Every Care Services product, in no particular order.
    async fn care_products(&self) -> Result<Vec<CareProduct>, RepoError>;
}

crate::kernel::debug_port!(CatalogRepo);
