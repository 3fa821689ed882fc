//! The sub-account aggregate's port.
//!
//! With the `mocks` feature, a mock stands in for the store (the crate page tests
//! [`SubAccountService`](crate::sub_account::SubAccountService) over it):
//!
//! ```
//! # #[cfg(feature = "mocks")] {
//! use partner_domain::sub_account::ports::MockSubAccountRepo;
//!
//! let mut repo = MockSubAccountRepo::new();
//! repo.expect_exists().returning(|_, _| Ok(true));
//! # let _ = repo;
//! # }
//! ```

use async_trait::async_trait;
use time::OffsetDateTime;

use crate::account::auth::{Sealed, TokenKey};
use crate::kernel::error::RepoError;
use crate::kernel::ids::SubAccountId;
use crate::kernel::values::{Nickname, PartnerId, SubId};
use crate::sub_account::SubAccount;

/// A sub-account about to be stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSubAccount {
    /// Its id.
    pub id: SubAccountId,
    /// Its `subId`.
    pub sub_id: SubId,
    /// Its nickname.
    pub nickname: Nickname,
    /// The instant it is created at.
    pub now: OffsetDateTime,
}

/// How an insert of a sub-account ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InsertSubAccount {
    /// Stored.
    Inserted(SubAccount),
    /// The partner already has a sub-account with that `subId`.
    DuplicateSubId,
}

/// Storage of a partner's sub-accounts. Every method MUST act on the given partner's rows only.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait SubAccountRepo: Send + Sync {
    /// The partner's sub-accounts, by `subId`.
    async fn list(&self, partner: &PartnerId) -> Result<Vec<SubAccount>, RepoError>;
    /// In ONE round trip: the token of `key` (as [`crate::account::ports::TokenRepo::find_by_hash`]) and what
    /// [`SubAccountRepo::list`] reads for its partner, taken from the token by the statement
    /// itself; rows only for a token live at `key.now` (see [`crate::lead::ports::LeadRepo::page_leads_for_token`]).
    async fn list_for_token(&self, key: TokenKey) -> Result<Sealed<Vec<SubAccount>>, RepoError>;
    /// In ONE round trip: the token of `key` and its partner's sub-account with this id.
    async fn find_for_token(
        &self,
        key: TokenKey,
        id: SubAccountId,
    ) -> Result<Sealed<Option<SubAccount>>, RepoError>;
    /// Inserts unless the partner already has a sub-account with that `subId` (decided by the
    /// store's unique constraint, so concurrent creations cannot both succeed).
    async fn insert(
        &self,
        partner: &PartnerId,
        new: &NewSubAccount,
    ) -> Result<InsertSubAccount, RepoError>;
    /// `false` when the partner has no sub-account with that id.
    async fn delete(&self, partner: &PartnerId, id: SubAccountId) -> Result<bool, RepoError>;
    /// Whether the partner has a sub-account with that `subId`.
    async fn exists(&self, partner: &PartnerId, sub_id: SubId) -> Result<bool, RepoError>;
}

crate::kernel::debug_port!(SubAccountRepo);
