//! The sub-account service.

use std::sync::Arc;

use crate::account::auth::{Sealed, TokenKey};
use crate::kernel::clock::Clock;
use crate::kernel::error::RepoError;
use crate::kernel::ids::SubAccountId;
use crate::kernel::random::Random;
use crate::kernel::values::{Nickname, PartnerId, SubId};
use crate::sub_account::SubAccount;
use crate::sub_account::ports::{InsertSubAccount, NewSubAccount, SubAccountRepo};

/// Errors of [`SubAccountService::create`].
#[derive(Debug, thiserror::Error)]
pub enum CreateSubAccountError {
    /// The partner already has a sub-account with that `subId`.
    #[error("a sub-account with subId {0} already exists")]
    Duplicate(SubId),
    /// The store failed.
    #[error(transparent)]
    Repo(#[from] RepoError),
}

/// Errors of [`SubAccountService::delete`].
#[derive(Debug, thiserror::Error)]
pub enum DeleteSubAccountError {
    /// Absent, or another partner's: the two are indistinguishable on purpose.
    #[error("sub-account not found")]
    NotFound,
    /// The store failed.
    #[error(transparent)]
    Repo(#[from] RepoError),
}

/// A partner's management of its own sub-accounts.
#[derive(Debug, Clone)]
pub struct SubAccountService {
    repo: Arc<dyn SubAccountRepo>,
    clock: Arc<dyn Clock>,
    rng: Arc<dyn Random>,
}

impl SubAccountService {
    /// The service over its port, clock and randomness (sub-account ids).
    pub fn new(repo: Arc<dyn SubAccountRepo>, clock: Arc<dyn Clock>, rng: Arc<dyn Random>) -> Self {
        Self { repo, clock, rng }
    }

    /// The sub-accounts (by ascending subId) of the partner of the token of `key`, read with the
    /// token's record in one round trip and sealed until authentication passes.
    pub async fn list_for_token(
        &self,
        key: TokenKey,
    ) -> Result<Sealed<Vec<SubAccount>>, RepoError> {
        self.repo.list_for_token(key).await
    }

    /// The sub-account with this id of the partner of the token of `key` (extensions §8.2),
    /// read with the token's record in one round trip and sealed until authentication passes.
    pub async fn find_for_token(
        &self,
        key: TokenKey,
        id: SubAccountId,
    ) -> Result<Sealed<Option<SubAccount>>, RepoError> {
        self.repo.find_for_token(key, id).await
    }

    /// Creates a sub-account of the partner; refused when its `subId` is taken.
    pub async fn create(
        &self,
        partner: &PartnerId,
        sub_id: SubId,
        nickname: Nickname,
    ) -> Result<SubAccount, CreateSubAccountError> {
        let new = NewSubAccount {
            id: SubAccountId::generate(self.rng.as_ref()),
            sub_id,
            nickname,
            now: self.clock.now(),
        };
        match self.repo.insert(partner, &new).await? {
            InsertSubAccount::Inserted(s) => Ok(s),
            InsertSubAccount::DuplicateSubId => Err(CreateSubAccountError::Duplicate(sub_id)),
        }
    }

    /// Deletes one of the partner's sub-accounts.
    pub async fn delete(
        &self,
        partner: &PartnerId,
        id: SubAccountId,
    ) -> Result<(), DeleteSubAccountError> {
        match self.repo.delete(partner, id).await? {
            true => Ok(()),
            false => Err(DeleteSubAccountError::NotFound),
        }
    }

    /// Whether `sub_id` names one of the partner's sub-accounts.
    pub async fn exists(&self, partner: &PartnerId, sub_id: SubId) -> Result<bool, RepoError> {
        self.repo.exists(partner, sub_id).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::clock::FixedClock;
    use crate::kernel::random::SystemRandom;
    use crate::sub_account::ports::MockSubAccountRepo;
    use futures_util::FutureExt;
    use mockall::predicate::eq;
    use time::macros::datetime;
    use uuid::Uuid;

    fn svc(repo: MockSubAccountRepo) -> SubAccountService {
        SubAccountService::new(
            Arc::new(repo),
            Arc::new(FixedClock::new(datetime!(2026-11-21 10:00 UTC))),
            Arc::new(SystemRandom::new()),
        )
    }

    fn acme() -> PartnerId {
        PartnerId::parse("acme").expect("id")
    }

    #[test]
    fn duplicate_maps_to_its_own_error() {
        let mut repo = MockSubAccountRepo::new();
        repo.expect_insert()
            .returning(|_, _| Ok(InsertSubAccount::DuplicateSubId));
        let r = svc(repo)
            .create(
                &acme(),
                SubId::new(7).expect("7"),
                Nickname::parse("Ann").expect("nick"),
            )
            .now_or_never()
            .expect("ready");
        assert!(matches!(r, Err(CreateSubAccountError::Duplicate(_))));
    }

    #[test]
    fn create_passes_the_callers_partner_and_clock_time() {
        let mut repo = MockSubAccountRepo::new();
        repo.expect_insert()
            .with(eq(acme()), mockall::predicate::always())
            .returning(|_, n| {
                assert_eq!(n.now, datetime!(2026-11-21 10:00 UTC));
                Ok(InsertSubAccount::Inserted(SubAccount::new(
                    n.id,
                    "ops@acme.test".into(),
                    n.sub_id,
                    n.nickname.to_string(),
                    n.now,
                    n.now,
                )))
            });
        let s = svc(repo)
            .create(
                &acme(),
                SubId::new(7).expect("7"),
                Nickname::parse("Ann").expect("nick"),
            )
            .now_or_never()
            .expect("ready")
            .expect("created");
        assert_eq!(s.sub_id().get(), 7);
        assert_eq!(s.nickname(), "Ann");
        assert_eq!(
            s.created_at(),
            time::macros::datetime!(2026-11-21 10:00 UTC)
        );
    }

    #[test]
    fn delete_of_foreign_or_absent_is_not_found() {
        let mut repo = MockSubAccountRepo::new();
        repo.expect_delete().returning(|_, _| Ok(false));
        let r = svc(repo)
            .delete(&acme(), SubAccountId::from_uuid(Uuid::nil()))
            .now_or_never()
            .expect("ready");
        assert!(matches!(r, Err(DeleteSubAccountError::NotFound)));
    }
}
