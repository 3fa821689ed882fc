//! The links aggregate's port: what a partner's links are built from, read with its token.

use async_trait::async_trait;

use crate::account::auth::{Sealed, TokenKey};
use crate::kernel::error::RepoError;
use crate::kernel::values::SubId;
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

crate::kernel::debug_port!(LinkRepo);
