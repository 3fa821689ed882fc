//! The account aggregate's ports: token lookups on the request path, and the operator-side
//! storage of partners, users, tokens and feature flags. Every method that reads or writes partner
//! data takes the caller's [`PartnerId`], so a repository cannot be asked for another tenant's rows
//! by mistake.

use async_trait::async_trait;
use time::OffsetDateTime;

use crate::account::token::TokenHash;
use crate::account::{ApiTokenInfo, CareFlags, Partner, PartnerSettings, PortalUser};
use crate::kernel::error::RepoError;
use crate::kernel::ids::{TokenId, UserId};
use crate::kernel::values::{CareService, PartnerId, SubId};

/// What the authentication step needs to know about a presented token, in one lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRecord {
    /// The token's id.
    pub token_id: TokenId,
    /// Its keyed hash.
    pub hash: TokenHash,
    /// Its user.
    pub user_id: UserId,
    /// Whether the user is deleted.
    pub user_deleted: bool,
    /// The user's partner.
    pub partner_id: PartnerId,
    /// Whether the partner is active.
    pub partner_active: bool,
    /// Whether the partner may use the DNA links endpoint.
    pub partner_dna_access: bool,
    /// Whether the user is an admin.
    pub admin: bool,
    /// When the token expires, if ever.
    pub expires_at: Option<OffsetDateTime>,
    /// When it was revoked, if it was.
    pub revoked_at: Option<OffsetDateTime>,
    /// When it was last used.
    pub last_used_at: Option<OffsetDateTime>,
    /// A portal session (extensions §10): it may call only the webhook and endpoint calls.
    pub portal: bool,
}

/// Token lookups on the request path.
///
/// Contract: `find_by_hash` MUST read the token, its user and its partner as they are now (no
/// cache), so a revocation, a deleted user or a deactivated partner acts on the very next request
/// of every instance; it MUST match by the exact keyed hash (the column is unique).
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait TokenRepo: Send + Sync {
    /// The token with this keyed hash, with its user and partner (one indexed lookup).
    async fn find_by_hash(&self, hash: &TokenHash) -> Result<Option<TokenRecord>, RepoError>;

    /// Records a use at `now` unless one was recorded less than a minute before it
    /// (a conditional update, so concurrent instances write at most once a minute).
    async fn touch_last_used(
        &self,
        token_id: TokenId,
        now: OffsetDateTime,
    ) -> Result<(), RepoError>;
}

/// A token about to be stored: its keyed hash, never its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewToken {
    /// The token's id.
    pub id: TokenId,
    /// The keyed hash of its text.
    pub hash: TokenHash,
    /// The first characters of its text, to recognize it by.
    pub prefix: String,
    /// When it was created.
    pub created_at: OffsetDateTime,
    /// When it expires, if ever.
    pub expires_at: Option<OffsetDateTime>,
}

/// How a rotation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RotateOutcome {
    /// The old token is revoked and the new one stored with the old one's expiry.
    Rotated {
        /// The new token's expiry (the old one's).
        expires_at: Option<OffsetDateTime>,
    },
    /// No token has that id.
    NotFound,
    /// The old token is revoked, expired, or its user is deleted.
    NotLive,
}

/// Operator-side storage of partners, users, tokens and feature flags.
///
/// Contract: tokens are stored as keyed hashes only (never their text); every method that says
/// "no such (undeleted) user" MUST treat a soft-deleted user as absent; `rotate_token` MUST
/// revoke the old token and store the new one in one transaction (both or neither).
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait AccountRepo: Send + Sync {
    /// Inserts or replaces the partner; `true` in the pair when it was inserted.
    async fn upsert_partner(
        &self,
        id: &PartnerId,
        settings: &PartnerSettings,
        now: OffsetDateTime,
    ) -> Result<(Partner, bool), RepoError>;
    /// The partner as stored now; `None` when unknown.
    async fn partner(&self, id: &PartnerId) -> Result<Option<Partner>, RepoError>;
    /// The five global Care Services switches (a missing row reads as enabled).
    async fn care_flags(&self) -> Result<CareFlags, RepoError>;
    /// Sets the named switches, leaves the others, and returns all five as they are after it.
    async fn set_care_flags(&self, changes: &[(CareService, bool)])
    -> Result<CareFlags, RepoError>;
    /// The partner's undeleted users, oldest first.
    async fn users_of(&self, partner: &PartnerId) -> Result<Vec<PortalUser>, RepoError>;
    /// `false` when the user's partner does not exist.
    async fn insert_user(&self, user: &PortalUser) -> Result<bool, RepoError>;
    /// `false` when there is no such (undeleted) user.
    async fn delete_user(&self, id: UserId, now: OffsetDateTime) -> Result<bool, RepoError>;
    /// `false` when there is no such (undeleted) user.
    async fn insert_token(&self, user_id: UserId, token: &NewToken) -> Result<bool, RepoError>;
    /// `None` when there is no such (undeleted) user.
    async fn tokens_of(&self, user_id: UserId) -> Result<Option<Vec<ApiTokenInfo>>, RepoError>;
    /// Revokes `old` and stores `new` with `old`'s expiry, unless `old` is unknown or not live.
    async fn rotate_token(
        &self,
        old: TokenId,
        new: &NewToken,
        now: OffsetDateTime,
    ) -> Result<RotateOutcome, RepoError>;
    /// Revokes the token at `now` (an already revoked token keeps its first revocation time);
    /// `false` when there is no such token.
    async fn revoke_token(&self, id: TokenId, now: OffsetDateTime) -> Result<bool, RepoError>;
}

/// Whether partners and their sub-accounts exist: all that a service which only refers to a
/// partner needs of the account store ([`crate::coupon::CouponService`], for one), so it does not
/// depend on the operator's whole [`AccountRepo`]. Another service implements it over its own
/// copy of the partner directory.
///
/// ```
/// use partner_domain::RepoError;
/// use partner_domain::account::ports::PartnerDirectory;
/// use partner_domain::kernel::values::{PartnerId, SubId};
///
/// /// A directory held in memory: partners with their sub-account numbers.
/// #[derive(Debug)]
/// struct Directory(Vec<(PartnerId, Vec<SubId>)>);
///
/// #[async_trait::async_trait]
/// impl PartnerDirectory for Directory {
///     async fn partner_exists(&self, id: &PartnerId) -> Result<bool, RepoError> {
///         Ok(self.0.iter().any(|(p, _)| p == id))
///     }
///     async fn sub_account_exists(&self, id: &PartnerId, sub: SubId) -> Result<bool, RepoError> {
///         Ok(self.0.iter().any(|(p, subs)| p == id && subs.contains(&sub)))
///     }
/// }
/// ```
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait PartnerDirectory: Send + Sync {
    /// Whether a partner with this id exists (active or not).
    async fn partner_exists(&self, id: &PartnerId) -> Result<bool, RepoError>;
    /// Whether the partner has a sub-account with this `subId`.
    async fn sub_account_exists(&self, id: &PartnerId, sub: SubId) -> Result<bool, RepoError>;
}

/// A one-time portal code about to be stored: its keyed hash, never its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPortalCode {
    /// The keyed hash of the code's text.
    pub hash: TokenHash,
    /// The partner token whose holder asked for the code.
    pub minted_by: TokenId,
    /// When it was minted.
    pub created_at: OffsetDateTime,
    /// When it expires.
    pub expires_at: OffsetDateTime,
}

/// Storage of portal codes and the sessions they are exchanged for (extensions §10).
///
/// Contract: `exchange` MUST spend the code and store the session in one transaction, and of
/// concurrent exchanges of one code exactly one may find it unspent (a conditional update); the
/// session is stored only while the token that minted the code is live (not revoked or expired,
/// user not deleted, partner active), as a token of the same user marked as a portal session of
/// that token, expiring no later than it.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait PortalRepo: Send + Sync {
    /// Stores a freshly minted code.
    async fn insert_code(&self, code: &NewPortalCode) -> Result<(), RepoError>;
    /// Spends the code with this hash (unspent and unexpired at `now`) and stores `session`;
    /// the session's expiry as stored, or `None` when no such code or its token is not live.
    async fn exchange(
        &self,
        code: &TokenHash,
        session: &NewToken,
        now: OffsetDateTime,
    ) -> Result<Option<OffsetDateTime>, RepoError>;
}

crate::kernel::debug_port!(TokenRepo, AccountRepo, PartnerDirectory, PortalRepo);
