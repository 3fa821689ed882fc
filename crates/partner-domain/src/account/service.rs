//! The account service: the operator's management of partners, users, tokens and flags.

use std::sync::Arc;

use time::OffsetDateTime;

use crate::account::ports::{AccountRepo, NewToken, RotateOutcome};
use crate::account::token::{TokenPepper, TokenText};
use crate::account::{ApiTokenInfo, CareFlags, IssuedToken, Partner, PartnerSettings, PortalUser};
use crate::kernel::clock::Clock;
use crate::kernel::error::RepoError;
use crate::kernel::ids::{TokenId, UserId};
use crate::kernel::random::Random;
use crate::kernel::values::{CareService, Email, PartnerId};

/// Errors of [`AccountService::create_user`].
#[derive(Debug, thiserror::Error)]
pub enum CreateUserError {
    /// No partner has that id.
    #[error("no partner with that partnerId")]
    UnknownPartner,
    /// The store failed.
    #[error(transparent)]
    Repo(#[from] RepoError),
}

/// Errors of [`AccountService::issue_token`].
#[derive(Debug, thiserror::Error)]
pub enum IssueTokenError {
    /// No user has that id.
    #[error("no such user")]
    UserNotFound,
    /// `expiresAt` is not in the future.
    #[error("expiresAt must be in the future")]
    ExpiryNotInFuture,
    /// No pepper is configured.
    #[error("no token pepper is configured, so tokens cannot be issued")]
    KeysUnavailable,
    /// The store failed.
    #[error(transparent)]
    Repo(#[from] RepoError),
}

/// Errors of [`AccountService::rotate_token`].
#[derive(Debug, thiserror::Error)]
pub enum RotateTokenError {
    /// No token has that id.
    #[error("no such token")]
    NotFound,
    /// The token is revoked or expired.
    #[error("the token is revoked or expired; create a new one instead")]
    NotLive,
    /// No pepper is configured.
    #[error("no token pepper is configured, so tokens cannot be issued")]
    KeysUnavailable,
    /// The store failed.
    #[error(transparent)]
    Repo(#[from] RepoError),
}

/// Errors of lookups and deletions that only fail when the record is absent.
#[derive(Debug, thiserror::Error)]
pub enum NotFoundOr {
    /// The record is absent.
    #[error("not found")]
    NotFound,
    /// The store failed.
    #[error(transparent)]
    Repo(#[from] RepoError),
}

/// The operator's management of partners, users and tokens.
#[derive(Debug, Clone)]
pub struct AccountService {
    repo: Arc<dyn AccountRepo>,
    pepper: Option<TokenPepper>,
    clock: Arc<dyn Clock>,
    rng: Arc<dyn Random>,
}

impl AccountService {
    /// The service over its port, the pepper (`None`: no token is issued), clock and randomness.
    pub fn new(
        repo: Arc<dyn AccountRepo>,
        pepper: Option<TokenPepper>,
        clock: Arc<dyn Clock>,
        rng: Arc<dyn Random>,
    ) -> Self {
        Self {
            repo,
            pepper,
            clock,
            rng,
        }
    }

    /// Creates or replaces a partner; `true` when it was created.
    pub async fn put_partner(
        &self,
        id: &PartnerId,
        settings: PartnerSettings,
    ) -> Result<(Partner, bool), RepoError> {
        self.repo
            .upsert_partner(id, &settings, self.clock.now())
            .await
    }

    /// The partner with this id.
    pub async fn partner(&self, id: &PartnerId) -> Result<Partner, NotFoundOr> {
        self.repo.partner(id).await?.ok_or(NotFoundOr::NotFound)
    }

    /// The Care Services switches.
    pub async fn care_flags(&self) -> Result<CareFlags, RepoError> {
        self.repo.care_flags().await
    }

    /// Applies the given switches; the others keep their value.
    pub async fn set_care_flags(
        &self,
        changes: &[(CareService, bool)],
    ) -> Result<CareFlags, RepoError> {
        self.repo.set_care_flags(changes).await
    }

    /// Creates a portal user of an existing partner.
    pub async fn create_user(
        &self,
        email: Email,
        partner_id: PartnerId,
        admin: bool,
    ) -> Result<PortalUser, CreateUserError> {
        let user = PortalUser::new(
            UserId::generate(self.rng.as_ref()),
            email,
            partner_id,
            admin,
            self.clock.now(),
        );
        if self.repo.insert_user(&user).await? {
            Ok(user)
        } else {
            Err(CreateUserError::UnknownPartner)
        }
    }

    /// The partner's users, oldest first.
    pub async fn users(&self, partner: &PartnerId) -> Result<Vec<PortalUser>, RepoError> {
        self.repo.users_of(partner).await
    }

    /// Deletes a user; its tokens then answer `unknown_user`.
    pub async fn delete_user(&self, id: UserId) -> Result<(), NotFoundOr> {
        match self.repo.delete_user(id, self.clock.now()).await? {
            true => Ok(()),
            false => Err(NotFoundOr::NotFound),
        }
    }

    /// Issues an API token to a user (the text is returned once); `expires_at`, if any, must be in the future.
    pub async fn issue_token(
        &self,
        user_id: UserId,
        expires_at: Option<OffsetDateTime>,
    ) -> Result<IssuedToken, IssueTokenError> {
        let now = self.clock.now();
        if expires_at.is_some_and(|e| e <= now) {
            return Err(IssueTokenError::ExpiryNotInFuture);
        }
        let (token, new) = self
            .mint(now, expires_at)
            .ok_or(IssueTokenError::KeysUnavailable)?;
        if !self.repo.insert_token(user_id, &new).await? {
            return Err(IssueTokenError::UserNotFound);
        }
        Ok(issued(token, &new))
    }

    /// The user's tokens, without their text.
    pub async fn tokens(&self, user_id: UserId) -> Result<Vec<ApiTokenInfo>, NotFoundOr> {
        self.repo
            .tokens_of(user_id)
            .await?
            .ok_or(NotFoundOr::NotFound)
    }

    /// Replaces a live token with a new one (same user, same expiry); the old one is revoked
    /// in the same transaction.
    pub async fn rotate_token(&self, token_id: TokenId) -> Result<IssuedToken, RotateTokenError> {
        let now = self.clock.now();
        let (token, mut new) = self
            .mint(now, None)
            .ok_or(RotateTokenError::KeysUnavailable)?;
        match self.repo.rotate_token(token_id, &new, now).await? {
            RotateOutcome::Rotated { expires_at } => {
                new.expires_at = expires_at;
                Ok(issued(token, &new))
            }
            RotateOutcome::NotFound => Err(RotateTokenError::NotFound),
            RotateOutcome::NotLive => Err(RotateTokenError::NotLive),
        }
    }

    /// Revokes a token at once. Revoking a revoked token is a no-op.
    pub async fn revoke_token(&self, token_id: TokenId) -> Result<(), NotFoundOr> {
        match self.repo.revoke_token(token_id, self.clock.now()).await? {
            true => Ok(()),
            false => Err(NotFoundOr::NotFound),
        }
    }

    fn mint(
        &self,
        now: OffsetDateTime,
        expires_at: Option<OffsetDateTime>,
    ) -> Option<(TokenText, NewToken)> {
        let pepper = self.pepper.as_ref()?;
        let token = TokenText::mint(self.rng.as_ref());
        let new = NewToken {
            id: TokenId::generate(self.rng.as_ref()),
            hash: pepper.hash(&token),
            prefix: token.display_prefix(),
            created_at: now,
            expires_at,
        };
        Some((token, new))
    }
}

fn issued(token: TokenText, new: &NewToken) -> IssuedToken {
    IssuedToken {
        id: new.id,
        token,
        token_prefix: new.prefix.clone(),
        created_at: new.created_at,
        expires_at: new.expires_at,
    }
}
