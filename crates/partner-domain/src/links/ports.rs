//! The links aggregate's ports: what a partner's links are built from, read with its token, and
//! what the public surfaces (the catalog, the embedded view) read of the partners.

use async_trait::async_trait;

use crate::account::auth::{Sealed, TokenKey};
use crate::account::{CareFlags, Partner};
use crate::kernel::error::RepoError;
use crate::kernel::values::{PartnerId, SubId};
use crate::links::{CareLinkInputs, DnaLinkInputs, MedicalLinkInputs};

/// The link listings' reads. Each reads, in ONE round trip, a token's record and what the links of
/// its partner are built from, with the partner taken from the token by the statements (nothing
/// for a token that is not live), so the answer is sealed until authentication passes.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait LinkRepo: Send + Sync {
    /// In ONE round trip: the token of `key` and what the DNA links of its partner are built
    /// from (the partner, its DNA prices: taken from the token by the statements, nothing for a
    /// token that is not live; every DNA product).
    async fn dna_links_for_token(&self, key: TokenKey) -> Result<Sealed<DnaLinkInputs>, RepoError>;
    /// In ONE round trip: the token of `key` and what the medical links of its partner are built
    /// from, with whether `sub` names one of its sub-accounts (as [`Self::dna_links_for_token`]).
    async fn medical_links_for_token(
        &self,
        key: TokenKey,
        sub: Option<SubId>,
    ) -> Result<Sealed<MedicalLinkInputs>, RepoError>;
    /// In ONE round trip: the token of `key` and what the Care Services links of its partner are
    /// built from (the global switches too), with whether `sub` names one of its sub-accounts.
    async fn care_links_for_token(
        &self,
        key: TokenKey,
        sub: Option<SubId>,
    ) -> Result<Sealed<CareLinkInputs>, RepoError>;
}

crate::kernel::debug_port!(LinkRepo, LinkPartners);

/// What the public link surfaces (the catalog and the embedded Care Services view) read of the
/// partners: one partner by id and the global Care Services switches. Another service
/// implements it over its own copy of the partner list; the server's store over its tables.
///
/// ```
/// # use partner_domain::links::ports::LinkPartners;
/// # use partner_domain::account::{CareFlags, Partner};
/// # use partner_domain::kernel::values::PartnerId;
/// # use partner_domain::RepoError;
/// struct NoPartners;
/// #[async_trait::async_trait]
/// impl LinkPartners for NoPartners {
///     async fn partner(&self, _: &PartnerId) -> Result<Option<Partner>, RepoError> {
///         Ok(None)
///     }
///     async fn care_flags(&self) -> Result<CareFlags, RepoError> {
///         Ok(CareFlags::default())
///     }
/// }
/// ```
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait LinkPartners: Send + Sync {
    /// The partner with this id (active or not), if any.
    async fn partner(&self, id: &PartnerId) -> Result<Option<Partner>, RepoError>;
    /// The global Care Services switches.
    async fn care_flags(&self) -> Result<CareFlags, RepoError>;
}
