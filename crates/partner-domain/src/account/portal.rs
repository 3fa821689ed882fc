//! The partner's webhook portal (extensions §10): one-time codes, minted by a partner token and
//! exchanged once for a portal session, a bearer that may call only the webhook and endpoint
//! calls of its partner and expires after `PARTNER_PORTAL_SESSION_TTL`.
//!
//! ```
//! use partner_domain::account::portal::PortalTtl;
//! use partner_domain::time::Duration;
//!
//! let ttl = PortalTtl::default();
//! assert_eq!((ttl.code, ttl.session), (Duration::minutes(10), Duration::hours(1)));
//! ```

use std::sync::Arc;

use time::{Duration, OffsetDateTime};

use crate::account::auth::Principal;
use crate::account::ports::{NewPortalCode, NewToken, PortalRepo};
use crate::account::token::{TokenPepper, TokenText};
use crate::kernel::clock::Clock;
use crate::kernel::error::RepoError;
use crate::kernel::ids::TokenId;
use crate::kernel::random::{Random, random_string};

const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/// Base62 characters of a minted code (about 256 bits of entropy).
pub(crate) const CODE_LEN: usize = 43;

/// How long codes and sessions live (`PARTNER_PORTAL_CODE_TTL`, `PARTNER_PORTAL_SESSION_TTL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortalTtl {
    /// How long a code may be exchanged.
    pub code: Duration,
    /// How long a session lasts.
    pub session: Duration,
}

impl Default for PortalTtl {
    fn default() -> Self {
        Self {
            code: Duration::minutes(10),
            session: Duration::hours(1),
        }
    }
}

/// A minted one-time code: the text goes into the link once and is never stored or logged.
#[derive(Clone)]
pub struct PortalCode {
    code: String,
    expires_at: OffsetDateTime,
}

impl PortalCode {
    /// The code's text, for the link's fragment only.
    pub fn expose(&self) -> &str {
        &self.code
    }

    /// Until when it may be exchanged.
    pub fn expires_at(&self) -> OffsetDateTime {
        self.expires_at
    }
}

impl std::fmt::Debug for PortalCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PortalCode")
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

/// A portal session's bearer, handed to the page once.
#[derive(Debug, Clone)]
pub struct PortalSession {
    token: TokenText,
    expires_at: OffsetDateTime,
}

impl PortalSession {
    /// The session's bearer token.
    pub fn token(&self) -> &TokenText {
        &self.token
    }

    /// When the session ends.
    pub fn expires_at(&self) -> OffsetDateTime {
        self.expires_at
    }
}

/// Errors of [`PortalService::mint`].
#[derive(Debug, thiserror::Error)]
pub enum MintCodeError {
    /// A portal session cannot open another portal.
    #[error("a portal session cannot open another portal")]
    FromPortal,
    /// No pepper is configured.
    #[error("no token pepper is configured, so portal links cannot be issued")]
    KeysUnavailable,
    /// The store failed.
    #[error(transparent)]
    Repo(#[from] RepoError),
}

/// Errors of [`PortalService::exchange`].
#[derive(Debug, thiserror::Error)]
pub enum ExchangeCodeError {
    /// Unknown, used or expired (one answer for all, so a caller learns nothing about codes).
    #[error("the portal link is invalid, already used or expired; ask for a new one")]
    InvalidCode,
    /// No pepper is configured.
    #[error("no token pepper is configured, so portal links cannot be used")]
    KeysUnavailable,
    /// The store failed.
    #[error(transparent)]
    Repo(#[from] RepoError),
}

/// Mints portal codes and exchanges them for sessions.
#[derive(Debug, Clone)]
pub struct PortalService {
    repo: Arc<dyn PortalRepo>,
    pepper: Option<TokenPepper>,
    clock: Arc<dyn Clock>,
    rng: Arc<dyn Random>,
    ttl: PortalTtl,
}

impl PortalService {
    /// The service over its port, the pepper (`None`: nothing is minted or exchanged), clock, randomness and lifetimes.
    pub fn new(
        repo: Arc<dyn PortalRepo>,
        pepper: Option<TokenPepper>,
        clock: Arc<dyn Clock>,
        rng: Arc<dyn Random>,
        ttl: PortalTtl,
    ) -> Self {
        Self {
            repo,
            pepper,
            clock,
            rng,
            ttl,
        }
    }

    /// A one-time code for the caller's partner, valid for the code TTL. Only stored hashed.
    pub async fn mint(&self, caller: &Principal) -> Result<PortalCode, MintCodeError> {
        if caller.portal() {
            return Err(MintCodeError::FromPortal);
        }
        let pepper = self.pepper.as_ref().ok_or(MintCodeError::KeysUnavailable)?;
        let now = self.clock.now();
        let code = random_string(self.rng.as_ref(), BASE62, CODE_LEN);
        let expires_at = now + self.ttl.code;
        self.repo
            .insert_code(&NewPortalCode {
                hash: pepper.hash_code(&code),
                minted_by: caller.token_id(),
                created_at: now,
                expires_at,
            })
            .await?;
        Ok(PortalCode { code, expires_at })
    }

    /// Spends `code` and opens a portal session: exactly one exchange of a code succeeds, and
    /// only within its TTL and while the token that minted it is live.
    pub async fn exchange(&self, code: &str) -> Result<PortalSession, ExchangeCodeError> {
        let pepper = self
            .pepper
            .as_ref()
            .ok_or(ExchangeCodeError::KeysUnavailable)?;
        if !well_formed(code) {
            return Err(ExchangeCodeError::InvalidCode);
        }
        let now = self.clock.now();
        let token = TokenText::mint(self.rng.as_ref());
        let session = NewToken {
            id: TokenId::generate(self.rng.as_ref()),
            hash: pepper.hash(&token),
            prefix: token.display_prefix(),
            created_at: now,
            expires_at: Some(now + self.ttl.session),
        };
        let expires_at = self
            .repo
            .exchange(&pepper.hash_code(code), &session, now)
            .await?
            .ok_or(ExchangeCodeError::InvalidCode)?;
        Ok(PortalSession { token, expires_at })
    }
}

/// The shape of a minted code; anything else never reaches storage.
fn well_formed(code: &str) -> bool {
    code.len() == CODE_LEN && code.bytes().all(|b| b.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::account::ports::MockPortalRepo;
    use crate::kernel::clock::FixedClock;
    use crate::kernel::random::SystemRandom;
    use crate::kernel::values::PartnerId;
    use futures_util::FutureExt;
    use time::macros::datetime;

    const NOW: OffsetDateTime = datetime!(2026-11-26 10:00 UTC);

    fn service(repo: MockPortalRepo) -> PortalService {
        PortalService::new(
            Arc::new(repo),
            Some(TokenPepper::new(b"pepper")),
            Arc::new(FixedClock::new(NOW)),
            Arc::new(SystemRandom::new()),
            PortalTtl::default(),
        )
    }

    #[test]
    fn a_code_is_stored_hashed_and_expires_after_the_ttl() {
        let mut repo = MockPortalRepo::new();
        repo.expect_insert_code()
            .withf(|c| c.expires_at == NOW + Duration::minutes(10) && c.created_at == NOW)
            .times(1)
            .returning(|_| Ok(()));
        let me = Principal::for_test(PartnerId::parse("acme").expect("id"), false);
        let code = service(repo)
            .mint(&me)
            .now_or_never()
            .expect("ready")
            .expect("minted");
        assert_eq!(code.expose().len(), CODE_LEN);
        assert!(!format!("{code:?}").contains(code.expose()));
        assert_eq!(code.expires_at(), NOW + Duration::minutes(10));
    }

    #[test]
    fn a_malformed_code_never_reaches_storage_and_a_spent_one_is_invalid() {
        let mut repo = MockPortalRepo::new();
        repo.expect_exchange()
            .times(1)
            .returning(|_, _, _| Ok(None));
        let svc = service(repo);
        for bad in [
            "",
            "short",
            &"a".repeat(44),
            &format!("{}-", "a".repeat(42)),
        ] {
            let r = svc.exchange(bad).now_or_never().expect("ready");
            assert!(matches!(r, Err(ExchangeCodeError::InvalidCode)), "{bad}");
        }
        let r = svc.exchange(&"a".repeat(43)).now_or_never().expect("ready");
        assert!(matches!(r, Err(ExchangeCodeError::InvalidCode)));
    }

    #[test]
    fn an_exchange_asks_for_a_session_of_the_session_ttl() {
        let mut repo = MockPortalRepo::new();
        repo.expect_exchange()
            .withf(|_, s, now| *now == NOW && s.expires_at == Some(NOW + Duration::hours(1)))
            .returning(|_, s, _| Ok(s.expires_at));
        let s = service(repo)
            .exchange(&"a".repeat(43))
            .now_or_never()
            .expect("ready")
            .expect("session");
        assert_eq!(s.expires_at(), NOW + Duration::hours(1));
        assert!(s.token().expose().starts_with("pk_live_"));
    }
}
