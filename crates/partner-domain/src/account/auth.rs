//! Authentication: from an `Authorization` header value to a [`Principal`], or exactly one
//! of the contract's failures.
//!
//! ```
//! use partner_domain::account::auth::bearer;
//!
//! assert_eq!(bearer(Some(&b"Bearer pk_live_abc"[..])), Some(&b"pk_live_abc"[..]));
//! assert_eq!(bearer(Some(&b"bearer\tpk_live_abc "[..])), Some(&b"pk_live_abc"[..]));
//! assert_eq!(bearer(Some(&b"Basic dXNlcg=="[..])), None);
//! assert_eq!(bearer(None), None);
//! ```

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};

use time::{Duration, OffsetDateTime};

use crate::account::ports::{TokenRecord, TokenRepo};
use crate::account::token::{TokenHash, TokenPepper, TokenText};
use crate::kernel::clock::Clock;
use crate::kernel::error::RepoError;
use crate::kernel::ids::{TokenId, UserId};
use crate::kernel::values::PartnerId;

/// Who is calling. Only [`AuthService::open`] makes one, from a token it has just verified,
/// so holding a `Principal` means the request authenticated as that token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    token_id: TokenId,
    /// The portal user the token belongs to (the audit log names it).
    user_id: UserId,
    partner_id: PartnerId,
    admin: bool,
    /// Whether the partner's DNA links endpoint is enabled (an account-state check).
    dna_access: bool,
    /// A portal session's bearer (extensions §10), limited to the webhook and endpoint calls.
    portal: bool,
}

impl Principal {
    /// A principal of `partner_id` (admin or not) for tests of scope rules, outside this crate
    /// too (feature `mocks`): a nil token and user, no DNA access, not a portal session.
    #[cfg(any(test, feature = "mocks"))]
    pub fn for_test(partner_id: PartnerId, admin: bool) -> Self {
        Self {
            token_id: TokenId::from_uuid(uuid::Uuid::nil()),
            user_id: UserId::from_uuid(uuid::Uuid::nil()),
            partner_id,
            admin,
            dna_access: false,
            portal: false,
        }
    }

    /// The token the request authenticated with (the rate limit's key).
    #[must_use]
    pub fn token_id(&self) -> TokenId {
        self.token_id
    }

    /// The portal user the token belongs to.
    #[must_use]
    pub fn user_id(&self) -> UserId {
        self.user_id
    }

    /// Whether reading `partner`'s data is a cross-partner read: an admin token reading a
    /// partner other than its own (extensions §12: each one is audited).
    #[must_use]
    pub fn reads_another_partner(&self, partner: &PartnerId) -> bool {
        &self.partner_id != partner
    }

    /// The partner the token acts for: every partner read and write is scoped by it.
    #[must_use]
    pub fn partner_id(&self) -> &PartnerId {
        &self.partner_id
    }

    /// Whether the token's user is an admin (admin-only operations and scopes).
    #[must_use]
    pub fn admin(&self) -> bool {
        self.admin
    }

    /// Whether the token is a portal session's (extensions §10): it may call only the webhook
    /// calls and the endpoint calls, anything else answers 403.
    #[must_use]
    pub fn portal(&self) -> bool {
        self.portal
    }

    /// Whether the token is a partner's own API token (not a portal session).
    #[must_use]
    pub fn not_portal(&self) -> bool {
        !self.portal
    }

    /// Whether the partner may use the DNA links endpoint (else 403
    /// [`crate::links::DNA_DISABLED`]). The one place this rule is decided.
    pub fn may_use_dna_links(&self) -> bool {
        self.dna_access
    }
}

/// The contract's authentication failures, in the order they are checked.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// No `Authorization` header, another scheme, or `Bearer` with nothing after it.
    #[error("Authorization: Bearer <token> is required")]
    MissingBearer,
    /// No pepper is configured, so no token can be verified.
    #[error("API keys cannot be verified in this environment")]
    KeysUnavailable,
    /// Wrong shape, unknown, revoked or expired.
    #[error("the bearer token is invalid, revoked or expired")]
    InvalidToken,
    /// The token is live but its user was deleted.
    #[error("no portal user matches this token")]
    UnknownUser,
    /// The partner account is inactive.
    #[error("the partner account is inactive")]
    Forbidden,
    /// The store failed.
    #[error(transparent)]
    Repo(#[from] RepoError),
}

/// A successful authentication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authenticated {
    /// Who is calling.
    pub principal: Principal,
    /// Whether `lastUsedAt` is due to be written (it is written at most once a minute, and the
    /// caller does it off the request's critical path with [`AuthService::touch`]).
    pub touch_due: bool,
}

/// A bearer token that passed the checks needing no storage ([`AuthService::present`]): the
/// keyed hash to look up. Only the service makes one.
#[derive(Debug, Clone)]
pub struct Presented {
    hash: TokenHash,
}

impl Presented {
    /// The token's keyed hash.
    pub fn hash(&self) -> &TokenHash {
        &self.hash
    }
}

/// What a repository reads for a presented token in the same round trip as its record: the
/// keyed hash (the statement takes the partner from the token with this hash, never from the
/// caller) and the instant the read is made at (no rows for a token already expired then).
/// Made by [`AuthService::key`].
#[derive(Debug, Clone, Copy)]
pub struct TokenKey {
    /// The presented token's keyed hash.
    pub hash: TokenHash,
    /// The instant of the read.
    pub now: OffsetDateTime,
}

/// Data read in the same database round trip as the token record it was read for (e.g. a page
/// whose partner the statement resolved from the token hash). Its content is private: the only
/// way to it is [`AuthService::open`], which first decides authentication from `token`, so no
/// code path can use the data of a request whose authentication failed.
#[derive(Debug)]
pub struct Sealed<T> {
    token: Option<TokenRecord>,
    content: T,
}

impl<T> Sealed<T> {
    /// What a repository read: the token record (`None`: no token has that hash) and the data.
    pub fn new(token: Option<TokenRecord>, content: T) -> Self {
        Self { token, content }
    }

    /// What was read, unchecked: for unit tests of what a service seals.
    #[cfg(test)]
    pub(crate) fn into_content_for_test(self) -> T {
        self.content
    }

    /// The content made into something else, still sealed with the same token record (e.g. rows
    /// rendered into the answer's shape); `f` gets nothing out of the seal.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Sealed<U> {
        Sealed {
            token: self.token,
            content: f(self.content),
        }
    }
}

/// How stale `lastUsedAt` may get before it is written again.
pub const LAST_USED_RESOLUTION: Duration = Duration::MINUTE;

/// Verifies bearer tokens.
#[derive(Debug, Clone)]
pub struct AuthService {
    tokens: Arc<dyn TokenRepo>,
    pepper: Option<TokenPepper>,
    clock: Arc<dyn Clock>,
    seen: Arc<SeenTokens>,
    touching: Arc<Touching>,
}

/// The tokens whose `lastUsedAt` write is in flight in this process: when a token's touch falls
/// due, every request of it in flight would otherwise send the same `UPDATE`, each holding a
/// pooled connection while they queue on the token's row behind one slow commit, until the pool
/// runs out (found by the soak of issue 22: 56 answers 503 in one stalled second).
#[derive(Debug, Default)]
struct Touching(Mutex<HashSet<TokenId>>);

impl Touching {
    fn set(&self) -> std::sync::MutexGuard<'_, HashSet<TokenId>> {
        // A panic while holding this lock leaves a set that is still sound.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Takes a token out of [`Touching`] when its write ends, however it ends (even cancelled).
struct TouchInFlight<'a>(&'a Touching, TokenId);

impl Drop for TouchInFlight<'_> {
    fn drop(&mut self) {
        self.0.set().remove(&self.1);
    }
}

/// What each keyed hash last authenticated as in this process, so the rate limit can be asked
/// about a presented token, and the 403s its principal already gives can be decided, before the
/// token is looked up ([`AuthService::seen`]). Bounded: emptied when it would hold more than
/// [`SEEN_TOKENS_MAX`] (only tokens that authenticated get in, so its size is that of the live
/// tokens in use).
#[derive(Default)]
struct SeenTokens(RwLock<HashMap<[u8; 32], Principal>>);

/// At most this many hashes are remembered by [`SeenTokens`] (about 16 MB: a principal and its
/// partner id, about 160 bytes an entry).
pub(crate) const SEEN_TOKENS_MAX: usize = 100_000;

/// What a presented token authenticated as the last time it did in this process
/// ([`AuthService::seen`]): a hint, never a caller (the token may have been revoked, or its
/// account changed, since; the token check that follows decides).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen(Principal);

impl Seen {
    /// The token id: the key of the token's rate-limit budget.
    #[must_use]
    pub fn token_id(&self) -> TokenId {
        self.0.token_id
    }

    /// The principal of that authentication: who the caller was then. Its portal flag never
    /// changes for a token; its account flags (DNA access) may have since.
    #[must_use]
    pub fn then(&self) -> &Principal {
        &self.0
    }
}

impl SeenTokens {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<[u8; 32], Principal>> {
        match self.0.read() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<[u8; 32], Principal>> {
        match self.0.write() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

impl std::fmt::Debug for SeenTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The hashes are not shown.
        f.debug_struct("SeenTokens")
            .field("len", &self.read().len())
            .finish()
    }
}

impl AuthService {
    /// The service over the token store, the pepper (`None`: no token verifies) and the clock.
    pub fn new(
        tokens: Arc<dyn TokenRepo>,
        pepper: Option<TokenPepper>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            tokens,
            pepper,
            clock,
            seen: Arc::default(),
            touching: Arc::default(),
        }
    }

    /// What the token `presented` last authenticated as in this process, if it did: the key of
    /// its rate-limit budget, known before any lookup (extensions §12: a request over budget is
    /// answered from the token check alone, so a read that folds the lookup into its own
    /// statement is charged with this id before it runs), and the principal of then, so a 403
    /// it already gives (a portal session outside its scope, an endpoint the account may not
    /// use) is decided from the token check alone, before any read (issue 23, N11). A hint,
    /// never a caller: the token may have been revoked since, which the token check that
    /// follows decides (and a charge made for it is refunded).
    pub fn seen(&self, presented: &Presented) -> Option<Seen> {
        let hash: [u8; 32] = presented.hash.as_bytes().try_into().ok()?;
        self.seen.read().get(&hash).cloned().map(Seen)
    }

    fn remember(&self, presented: &Presented, principal: &Principal) {
        let Ok(hash) = <[u8; 32]>::try_from(presented.hash.as_bytes()) else {
            return;
        };
        if self.seen.read().get(&hash) == Some(principal) {
            return;
        }
        let mut map = self.seen.write();
        if map.len() >= SEEN_TOKENS_MAX {
            map.clear();
        }
        map.insert(hash, principal.clone());
    }

    /// Forgets what `presented` authenticated as: it failed since. The write lock is taken only
    /// when there is something to forget (an unknown token fails on every request).
    fn forget(&self, presented: &Presented) {
        let Ok(hash) = <[u8; 32]>::try_from(presented.hash.as_bytes()) else {
            return;
        };
        if self.seen.read().contains_key(&hash) {
            self.seen.write().remove(&hash);
        }
    }

    /// Authenticates the raw `Authorization` header value (absent: `None`). A token of the
    /// wrong shape is rejected without touching storage; a well-formed one costs one lookup.
    pub async fn authenticate(
        &self,
        authorization: Option<&[u8]>,
    ) -> Result<Authenticated, AuthError> {
        let presented = self.present(authorization)?;
        let sealed = self.lookup(&presented).await?;
        self.open(&presented, sealed).map(|(a, ())| a)
    }

    /// The checks that need no storage: a bearer is present, keys can be verified, the token has
    /// the right shape. What passes is the keyed hash to look up, with the token lookup alone
    /// ([`Self::lookup`]) or folded into a read's own statement (a repository returning
    /// [`Sealed`] data).
    pub fn present(&self, authorization: Option<&[u8]>) -> Result<Presented, AuthError> {
        let raw = bearer(authorization).ok_or(AuthError::MissingBearer)?;
        let pepper = self.pepper.as_ref().ok_or(AuthError::KeysUnavailable)?;
        let token = std::str::from_utf8(raw)
            .ok()
            .and_then(TokenText::parse)
            .ok_or(AuthError::InvalidToken)?;
        Ok(Presented {
            hash: pepper.hash(&token),
        })
    }

    /// The token lookup alone (one round trip), sealed like any other read for the token.
    pub async fn lookup(&self, presented: &Presented) -> Result<Sealed<()>, AuthError> {
        let rec = self.tokens.find_by_hash(&presented.hash).await?;
        Ok(Sealed::new(rec, ()))
    }

    /// The instant reads for a token are made at: repositories that fold the lookup into a read
    /// skip the read for a token already expired then (the decision is still [`Self::open`]'s).
    pub fn now(&self) -> OffsetDateTime {
        self.clock.now()
    }

    /// The key a repository reads with for `presented`, at the clock's instant.
    pub fn key(&self, presented: &Presented) -> TokenKey {
        TokenKey {
            hash: presented.hash,
            now: self.clock.now(),
        }
    }

    /// Decides authentication from the token record read with `sealed`, and only when it passed
    /// hands out what was read with it. Errors in the contract's order: 401 `invalid_token`
    /// (unknown, revoked, expired), 401 for a deleted user, 403 for an inactive partner.
    ///
    /// A token that fails is no longer [`Self::seen`] (issue 23, N11b): a revoked or rotated
    /// token, or one of a deactivated partner, then takes the token check alone on its next
    /// request, as a token never seen does, instead of a charged full read refunded after it.
    pub fn open<T>(
        &self,
        presented: &Presented,
        sealed: Sealed<T>,
    ) -> Result<(Authenticated, T), AuthError> {
        let Sealed { token, content } = sealed;
        match self.decide(presented, token) {
            Ok(authenticated) => {
                self.remember(presented, &authenticated.principal);
                Ok((authenticated, content))
            }
            Err(e) => {
                self.forget(presented);
                Err(e)
            }
        }
    }

    /// [`Self::open`]'s decision from the token record alone.
    fn decide(
        &self,
        presented: &Presented,
        token: Option<TokenRecord>,
    ) -> Result<Authenticated, AuthError> {
        let rec = token.ok_or(AuthError::InvalidToken)?;
        let now = self.clock.now();
        // The index found it by hash; the constant-time check keeps a faulty adapter honest.
        if !rec.hash.ct_eq(&presented.hash)
            || rec.revoked_at.is_some()
            || rec.expires_at.is_some_and(|e| e <= now)
        {
            return Err(AuthError::InvalidToken);
        }
        if rec.user_deleted {
            return Err(AuthError::UnknownUser);
        }
        if !rec.partner_active {
            return Err(AuthError::Forbidden);
        }
        Ok(Authenticated {
            touch_due: touch_due(rec.last_used_at, now),
            principal: Principal {
                token_id: rec.token_id,
                user_id: rec.user_id,
                partner_id: rec.partner_id,
                admin: rec.admin,
                dna_access: rec.partner_dna_access,
                portal: rec.portal,
            },
        })
    }

    /// Records that the token was used now (throttled in storage as well). At most one write per
    /// token is in flight in this process: a call while one is returns at once, as that write
    /// records the same use to within [`LAST_USED_RESOLUTION`].
    pub async fn touch(&self, token_id: TokenId) -> Result<(), RepoError> {
        if !self.touching.set().insert(token_id) {
            return Ok(());
        }
        let _in_flight = TouchInFlight(&self.touching, token_id);
        self.tokens
            .touch_last_used(token_id, self.clock.now())
            .await
    }
}

fn touch_due(last: Option<OffsetDateTime>, now: OffsetDateTime) -> bool {
    last.is_none_or(|t| now - t >= LAST_USED_RESOLUTION)
}

/// The token part of `Bearer <token>`; `None` for no header, another scheme, or nothing after it.
/// The scheme is matched case-insensitively (RFC 9110 §11.1). The one parser of the
/// `Authorization` header: partner tokens and the operator token are read by the same rules.
pub fn bearer(header: Option<&[u8]>) -> Option<&[u8]> {
    let h = header?;
    let h = h.trim_ascii();
    let (scheme, rest) = h.split_at_checked(6)?;
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        return None;
    }
    if !rest.first().is_some_and(|b| *b == b' ' || *b == b'\t') {
        return None;
    }
    let token = rest.trim_ascii();
    (!token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::account::ports::{MockTokenRepo, TokenRecord};
    use crate::kernel::clock::FixedClock;
    use crate::kernel::ids::UserId;
    use crate::kernel::random::SystemRandom;
    use futures_util::FutureExt;
    use time::macros::datetime;
    use uuid::Uuid;

    const NOW: OffsetDateTime = datetime!(2026-11-21 10:00 UTC);

    fn record(hash: crate::account::token::TokenHash) -> TokenRecord {
        TokenRecord {
            token_id: TokenId::from_uuid(Uuid::from_u128(1)),
            hash,
            user_id: UserId::from_uuid(Uuid::from_u128(2)),
            user_deleted: false,
            partner_id: PartnerId::parse("acme").expect("id"),
            partner_active: true,
            partner_dna_access: true,
            admin: false,
            expires_at: None,
            revoked_at: None,
            last_used_at: None,
            portal: false,
        }
    }

    /// Runs `authenticate` against a repository holding one token shaped by `edit`.
    fn run(
        header: Option<String>,
        edit: impl Fn(&mut TokenRecord) + Send + 'static,
    ) -> Result<Authenticated, AuthError> {
        let pepper = TokenPepper::new(b"pepper");
        let mut repo = MockTokenRepo::new();
        let p2 = pepper.clone();
        repo.expect_find_by_hash().returning(move |h| {
            let mut r = record(*h);
            edit(&mut r);
            // Only the one token is known.
            Ok(Some(r).filter(|r| r.hash.ct_eq(&p2.hash(&known()))))
        });
        let svc = AuthService::new(Arc::new(repo), Some(pepper), Arc::new(FixedClock::new(NOW)));
        svc.authenticate(header.as_deref().map(str::as_bytes))
            .now_or_never()
            .expect("ready")
    }

    #[test]
    fn a_touch_while_one_of_the_same_token_is_in_flight_writes_nothing() {
        let token = TokenId::from_uuid(Uuid::from_u128(1));
        let other = TokenId::from_uuid(Uuid::from_u128(3));
        let mut repo = MockTokenRepo::new();
        // Only the other token's touch and the one after the first ended reach the store.
        repo.expect_touch_last_used()
            .times(2)
            .returning(|_, _| Ok(()));
        let svc = AuthService::new(Arc::new(repo), None, Arc::new(FixedClock::new(NOW)));
        svc.touching.set().insert(token);
        svc.touch(token).now_or_never().expect("ready").expect("ok");
        svc.touch(other).now_or_never().expect("ready").expect("ok");
        assert!(
            !svc.touching.set().contains(&other),
            "a finished touch leaves the set"
        );
        svc.touching.set().remove(&token);
        svc.touch(token).now_or_never().expect("ready").expect("ok");
        assert!(svc.touching.set().is_empty());
    }

    fn known() -> TokenText {
        TokenText::parse(&format!("pk_live_{}", "K".repeat(43))).expect("shape")
    }

    fn bearer_known() -> Option<String> {
        Some(format!("Bearer {}", known().expose()))
    }

    #[test]
    fn a_live_token_authenticates() {
        let a = run(bearer_known(), |_| {}).expect("ok");
        assert_eq!(a.principal.partner_id.as_str(), "acme");
        assert!(a.touch_due);
        let a = run(Some(format!("bearer   {}  ", known().expose())), |r| {
            r.last_used_at = Some(NOW - Duration::seconds(59))
        })
        .expect("ok");
        assert!(!a.touch_due, "used 59 s ago: not due");
        let a = run(bearer_known(), |r| {
            r.last_used_at = Some(NOW - Duration::seconds(60))
        })
        .expect("ok");
        assert!(a.touch_due);
    }

    #[test]
    fn missing_bearer_cases() {
        for h in [
            None,
            Some(""),
            Some("Basic abc"),
            Some("Bearer"),
            Some("Bearer   "),
            Some("Bearerx abc"),
            Some("Token pk_live_x"),
        ] {
            let r = run(h.map(str::to_owned), |_| {});
            assert!(matches!(r, Err(AuthError::MissingBearer)), "{h:?}: {r:?}");
        }
    }

    #[test]
    fn invalid_token_cases_without_storage() {
        // The mock would answer `None` for unknown hashes anyway; malformed ones must not reach it.
        let svc = AuthService::new(
            Arc::new(MockTokenRepo::new()),
            Some(TokenPepper::new(b"p")),
            Arc::new(FixedClock::new(NOW)),
        );
        for h in [
            "Bearer abc",
            "Bearer pk_live_short",
            "Bearer pk_test_0123456789012345678901234567890123456789",
            "Bearer \u{e9}",
        ] {
            let r = svc
                .authenticate(Some(h.as_bytes()))
                .now_or_never()
                .expect("ready");
            assert!(matches!(r, Err(AuthError::InvalidToken)), "{h}");
        }
        let r = svc
            .authenticate(Some(b"Bearer \xff\xfe"))
            .now_or_never()
            .expect("ready");
        assert!(matches!(r, Err(AuthError::InvalidToken)));
    }

    #[test]
    fn unknown_revoked_expired_are_invalid() {
        let other = TokenText::mint(&SystemRandom::new());
        assert!(matches!(
            run(Some(format!("Bearer {}", other.expose())), |_| {}),
            Err(AuthError::InvalidToken)
        ));
        assert!(matches!(
            run(bearer_known(), |r| r.revoked_at = Some(NOW)),
            Err(AuthError::InvalidToken)
        ));
        assert!(matches!(
            run(bearer_known(), |r| r.expires_at = Some(NOW)),
            Err(AuthError::InvalidToken)
        ));
        assert!(
            run(bearer_known(), |r| r.expires_at =
                Some(NOW + Duration::SECOND))
            .is_ok()
        );
    }

    #[test]
    fn deleted_user_then_inactive_partner() {
        assert!(matches!(
            run(bearer_known(), |r| r.user_deleted = true),
            Err(AuthError::UnknownUser)
        ));
        assert!(matches!(
            run(bearer_known(), |r| r.partner_active = false),
            Err(AuthError::Forbidden)
        ));
        // A revoked token of a deleted user is simply invalid.
        assert!(matches!(
            run(bearer_known(), |r| {
                r.user_deleted = true;
                r.revoked_at = Some(NOW)
            }),
            Err(AuthError::InvalidToken)
        ));
    }

    /// Data read with the token comes out only for a request that authenticates, and with the
    /// same error as the token lookup alone otherwise.
    #[test]
    fn sealed_data_is_handed_out_only_after_authentication() {
        let pepper = TokenPepper::new(b"pepper");
        let svc = AuthService::new(
            Arc::new(MockTokenRepo::new()),
            Some(pepper.clone()),
            Arc::new(FixedClock::new(NOW)),
        );
        let header = bearer_known().expect("header");
        let presented = svc.present(Some(header.as_bytes())).expect("well-formed");
        let live = record(pepper.hash(&known()));
        let (a, page) = svc
            .open(&presented, Sealed::new(Some(live.clone()), vec![1, 2, 3]))
            .expect("live");
        assert_eq!(page, vec![1, 2, 3]);
        assert_eq!(a.principal.partner_id.as_str(), "acme");
        let other = record(pepper.hash(&TokenText::mint(&SystemRandom::new())));
        type Expect = fn(&AuthError) -> bool;
        let cases: [(Option<TokenRecord>, Expect); 6] = [
            (None, |e| matches!(e, AuthError::InvalidToken)),
            (Some(other), |e| matches!(e, AuthError::InvalidToken)),
            (
                Some(TokenRecord {
                    revoked_at: Some(NOW),
                    ..live.clone()
                }),
                |e| matches!(e, AuthError::InvalidToken),
            ),
            (
                Some(TokenRecord {
                    expires_at: Some(NOW),
                    ..live.clone()
                }),
                |e| matches!(e, AuthError::InvalidToken),
            ),
            (
                Some(TokenRecord {
                    user_deleted: true,
                    ..live.clone()
                }),
                |e| matches!(e, AuthError::UnknownUser),
            ),
            (
                Some(TokenRecord {
                    partner_active: false,
                    ..live.clone()
                }),
                |e| matches!(e, AuthError::Forbidden),
            ),
        ];
        for (rec, expected) in cases {
            let r = svc.open(&presented, Sealed::new(rec, vec![1, 2, 3]));
            assert!(r.as_ref().is_err_and(expected), "{r:?}");
        }
    }

    #[test]
    fn a_token_is_seen_once_it_authenticated() {
        let pepper = TokenPepper::new(b"pepper");
        let svc = AuthService::new(
            Arc::new(MockTokenRepo::new()),
            Some(pepper.clone()),
            Arc::new(FixedClock::new(NOW)),
        );
        let header = bearer_known().expect("header");
        let presented = svc.present(Some(header.as_bytes())).expect("well-formed");
        let live = record(pepper.hash(&known()));
        assert_eq!(svc.seen(&presented), None, "never authenticated");
        let revoked = TokenRecord {
            revoked_at: Some(NOW),
            ..live.clone()
        };
        assert!(
            svc.open(&presented, Sealed::new(Some(revoked), ()))
                .is_err()
        );
        assert_eq!(svc.seen(&presented), None, "a failed check teaches nothing");
        svc.open(&presented, Sealed::new(Some(live.clone()), ()))
            .expect("live");
        let seen = svc.seen(&presented).expect("seen");
        assert_eq!(seen.token_id(), live.token_id);
        assert!(seen.then().may_use_dna_links() && !seen.then().portal());
        assert_eq!(
            svc.clone().seen(&presented).map(|s| s.token_id()),
            Some(live.token_id),
            "clones share what they saw"
        );
        // What it authenticates as next replaces what it did (the account changed since).
        svc.open(
            &presented,
            Sealed::new(
                Some(TokenRecord {
                    partner_dna_access: false,
                    ..live.clone()
                }),
                (),
            ),
        )
        .expect("live");
        assert!(
            !svc.seen(&presented)
                .expect("seen")
                .then()
                .may_use_dna_links()
        );
        // Issue 23, N11b: a seen token that fails (revoked, rotated, its partner deactivated,
        // its user deleted) is forgotten, so its next request takes the token check alone.
        let failing = [
            TokenRecord {
                revoked_at: Some(NOW),
                ..live.clone()
            },
            TokenRecord {
                partner_active: false,
                ..live.clone()
            },
            TokenRecord {
                user_deleted: true,
                ..live.clone()
            },
        ];
        for rec in failing {
            svc.open(&presented, Sealed::new(Some(live.clone()), ()))
                .expect("live");
            assert!(svc.seen(&presented).is_some());
            assert!(svc.open(&presented, Sealed::new(Some(rec), ())).is_err());
            assert_eq!(svc.seen(&presented), None, "forgotten once it failed");
        }
        svc.open(&presented, Sealed::new(Some(live.clone()), ()))
            .expect("live");
        assert!(svc.open(&presented, Sealed::new(None, ())).is_err());
        assert_eq!(svc.seen(&presented), None, "no record: forgotten too");
    }

    #[test]
    fn no_pepper_means_503_for_any_bearer_but_401_without() {
        let svc = AuthService::new(
            Arc::new(MockTokenRepo::new()),
            None,
            Arc::new(FixedClock::new(NOW)),
        );
        for h in ["Bearer x", "Bearer pk_live_abc"] {
            let r = svc
                .authenticate(Some(h.as_bytes()))
                .now_or_never()
                .expect("ready");
            assert!(matches!(r, Err(AuthError::KeysUnavailable)));
        }
        let r = svc.authenticate(None).now_or_never().expect("ready");
        assert!(matches!(r, Err(AuthError::MissingBearer)));
    }
}
