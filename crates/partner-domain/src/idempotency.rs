//! Idempotent requests (extensions §8.3): the `Idempotency-Key` a `POST` or `PATCH` may carry,
//! what a request is compared by, which answers are kept, and what a repeated key gets.
//!
//! The first request with a key claims it (a row "running" until its answer is kept); its answer
//! is kept for [`KEPT_FOR`] when [`keeps`] says so, else the claim is released so a retry runs
//! again. A request whose key is claimed gets [`Claim::InUse`] while the first runs, then
//! [`Claim::Replay`] when it is the same request, [`Claim::Reused`] when it is not.
//!
//! ```
//! use partner_domain::idempotency::{Fingerprint, IdempotencyKey, keeps};
//!
//! assert!(IdempotencyKey::parse(b"order-2026-11-26-0001").is_ok());
//! assert!(IdempotencyKey::parse(b"has a space").is_err());
//! // The same request, byte for byte, has the same fingerprint.
//! let a = Fingerprint::of("POST", "/api/v1/leads", br#"{"email":"a@b.test"}"#);
//! assert_eq!(a, Fingerprint::of("POST", "/api/v1/leads", br#"{"email":"a@b.test"}"#));
//! assert_ne!(a, Fingerprint::of("POST", "/api/v1/leads", br#"{"email":"c@d.test"}"#));
//! // 2xx-4xx answers are kept (but 429); 5xx invite a retry.
//! assert!(keeps(201) && keeps(422) && !keeps(429) && !keeps(503));
//! ```

use std::sync::Arc;

use async_trait::async_trait;
use time::OffsetDateTime;

use crate::kernel::ambient::Ambient;
use crate::kernel::clock::Clock;
use crate::kernel::error::RepoError;
use crate::kernel::values::{PartnerId, ValueError};

/// How long a kept answer is replayed.
pub const KEPT_FOR: time::Duration = time::Duration::hours(24);
/// How long a claim holds without an answer: past it, the request that claimed the key is taken
/// to have died with its process, and the key may run again (see docs/decisions.md,
/// "Idempotency keys").
pub const CLAIM_LEASE: time::Duration = time::Duration::seconds(60);

/// An `Idempotency-Key` header's value: 1-255 visible ASCII characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// The header's bytes, refused unless they are 1-255 visible ASCII characters.
    pub fn parse(raw: &[u8]) -> Result<Self, ValueError> {
        if raw.is_empty() || raw.len() > 255 || !raw.iter().all(u8::is_ascii_graphic) {
            return Err(ValueError::invalid(
                "Idempotency-Key",
                "1-255 visible ASCII characters",
            ));
        }
        // Every byte is ASCII, so this is always valid UTF-8.
        Ok(Self(String::from_utf8_lossy(raw).into_owned()))
    }

    /// The key's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Whose keys these are: a kept answer is never seen by another caller using the same key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// A partner API token's partner (every token and user of the partner share its keys).
    Partner(PartnerId),
    /// The operator API.
    Operator,
}

impl Caller {
    /// The caller as stored: `partner:<id>` or `operator`.
    pub fn scope(&self) -> String {
        match self {
            Self::Partner(p) => format!("partner:{}", p.as_str()),
            Self::Operator => "operator".to_owned(),
        }
    }
}

/// What a request is compared by: SHA-256 over its method, its path with the query string, and
/// its body, byte for byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint([u8; 32]);

impl Fingerprint {
    /// The fingerprint of a request's method, path with query, and body.
    pub fn of(method: &str, path_and_query: &str, body: &[u8]) -> Self {
        let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
        for part in [method.as_bytes(), path_and_query.as_bytes()] {
            ctx.update(&(part.len() as u64).to_be_bytes());
            ctx.update(part);
        }
        ctx.update(body);
        let mut out = [0u8; 32];
        out.copy_from_slice(ctx.finish().as_ref());
        Self(out)
    }

    /// A fingerprint as stored.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The SHA-256 digest.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

/// A kept answer: replayed byte for byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptAnswer {
    /// The answer's HTTP status.
    pub status: u16,
    /// Its `Content-Type`, if any.
    pub content_type: Option<String>,
    /// Its body, byte for byte.
    pub body: Vec<u8>,
}

/// The start of a sealed kept body ([`KeptAnswer::seal`]): no answer body begins with a NUL.
const SEALED: &[u8] = b"\0sealed-v1\0";
const NONCE_LEN: usize = 12;

/// The key that seals a kept answer carrying a secret shown once (a webhook signing secret, a
/// custom header's value, a token's text, a portal link; issue 23, N10): derived (HKDF-SHA256)
/// from the bearer token of the request that made the answer, which the service never stores
/// (only its keyed hash). So the stored row holds no secret in clear, and only a request
/// presenting that same token can have the answer replayed; another token of the partner with
/// the same key and request gets 422, not the secret (docs/decisions.md).
pub struct AnswerKey(ring::aead::LessSafeKey);

impl std::fmt::Debug for AnswerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AnswerKey(..)")
    }
}

impl AnswerKey {
    /// The key of the bearer token `bearer` (its text, as presented).
    pub fn of_bearer(bearer: &[u8]) -> Option<Self> {
        let salt = ring::hkdf::Salt::new(
            ring::hkdf::HKDF_SHA256,
            b"partner-portal idempotent answer v1",
        );
        let prk = salt.extract(bearer);
        let info: [&[u8]; 1] = [b"aes-256-gcm"];
        let okm = prk.expand(&info, &ring::aead::AES_256_GCM).ok()?;
        let key = ring::aead::UnboundKey::from(okm);
        Some(Self(ring::aead::LessSafeKey::new(key)))
    }
}

impl KeptAnswer {
    /// Whether the body is sealed ([`Self::seal`]).
    pub fn is_sealed(&self) -> bool {
        self.body.starts_with(SEALED)
    }

    /// The answer with its body sealed under `key` (AES-256-GCM, a random nonce, the request's
    /// `fingerprint` as associated data); status and content type stay as they are. `None` only
    /// if the system's random source fails.
    pub fn seal(&self, key: &AnswerKey, fingerprint: &Fingerprint) -> Option<Self> {
        use ring::rand::SecureRandom;
        let mut nonce = [0u8; NONCE_LEN];
        ring::rand::SystemRandom::new().fill(&mut nonce).ok()?;
        let mut sealed = self.body.clone();
        key.0
            .seal_in_place_append_tag(
                ring::aead::Nonce::assume_unique_for_key(nonce),
                ring::aead::Aad::from(fingerprint.as_bytes()),
                &mut sealed,
            )
            .ok()?;
        let mut body = Vec::with_capacity(SEALED.len() + NONCE_LEN + sealed.len());
        body.extend_from_slice(SEALED);
        body.extend_from_slice(&nonce);
        body.extend_from_slice(&sealed);
        Some(Self {
            status: self.status,
            content_type: self.content_type.clone(),
            body,
        })
    }

    /// The sealed answer opened with `key`: `None` when it is not sealed, or was sealed under
    /// another key (another token) or for another request.
    pub fn open(&self, key: &AnswerKey, fingerprint: &Fingerprint) -> Option<Self> {
        let rest = self.body.strip_prefix(SEALED)?;
        let (nonce, sealed) = rest.split_at_checked(NONCE_LEN)?;
        let nonce = ring::aead::Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut buf = sealed.to_vec();
        let plain = key
            .0
            .open_in_place(
                nonce,
                ring::aead::Aad::from(fingerprint.as_bytes()),
                &mut buf,
            )
            .ok()?;
        Some(Self {
            status: self.status,
            content_type: self.content_type.clone(),
            body: plain.to_vec(),
        })
    }
}

/// Whether an answer with this status is kept: below 500 and not 429 (those invite a retry).
pub fn keeps(status: u16) -> bool {
    status < 500 && status != 429
}

/// What a store found for a key it could not claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Existing {
    /// Claimed by a request still running (its lease not run out).
    Running,
    /// Answered: the request's fingerprint and its kept answer.
    Answered(Fingerprint, KeptAnswer),
}

/// A claim a request holds: what [`IdempotencyService::finish`] ends. Its fingerprint and
/// instant tell it from a later claim of the same key (one made after its lease ran out), whose
/// row its answer must not overwrite or delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ticket {
    /// The caller as stored ([`Caller::scope`]).
    pub caller: String,
    /// The key.
    pub key: String,
    /// The fingerprint of the request that claimed it.
    pub fingerprint: Fingerprint,
    /// When it claimed it.
    pub claimed_at: OffsetDateTime,
}

/// What a request with a key does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// It claimed the key: run it, then [`IdempotencyService::finish`] the ticket.
    Run(Ticket),
    /// The first request with the key is still running: 409 `idempotency_key_in_use`.
    InUse,
    /// The same request was answered: this answer, not run again.
    Replay(KeptAnswer),
    /// Another request was answered under this key: 422 `idempotency_key_reused`.
    Reused,
}

/// Where keys and kept answers live, shared by every instance.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait IdempotencyStore: Send + Sync {
    /// Claims `(caller, key)` for a request with `fingerprint` unless a live claim or answer
    /// holds it (an answer past `expires_at`, or a claim past its lease, no longer does):
    /// `None` when claimed, else what holds it. Of concurrent claims at most one succeeds.
    async fn claim(
        &self,
        caller: &str,
        key: &str,
        fingerprint: &Fingerprint,
        now: OffsetDateTime,
        lease_until: OffsetDateTime,
        expires_at: OffsetDateTime,
    ) -> Result<Option<Existing>, RepoError>;
    /// Keeps `answer` for the claim of `ticket`, if the key is still that claim's.
    async fn keep(&self, ticket: &Ticket, answer: &KeptAnswer) -> Result<(), RepoError>;
    /// Drops the claim of `ticket` (its answer is not kept), so the key may run again; nothing
    /// if the key is no longer that claim's.
    async fn release(&self, ticket: &Ticket) -> Result<(), RepoError>;
    /// Ends the claim of `ticket` inside the transaction the store holds open in `ambient`
    /// (the request's units of work, committed there: [`crate::kernel::ambient`]), and commits
    /// it: keeps `answer`, or releases the key when `None`, together with the request's writes.
    /// `Ok(false)` when it holds none (the request committed nothing in it); the caller then
    /// ends the claim with [`Self::keep`] or [`Self::release`]. `Err`: the transaction did not
    /// commit, so the request's writes are not stored.
    async fn finish_held<'a>(
        &self,
        ambient: &Ambient,
        ticket: &Ticket,
        answer: Option<&'a KeptAnswer>,
    ) -> Result<bool, RepoError>;
    /// Deletes up to `batch` keys whose answers expired at or before `now`, the earliest expiry
    /// first, from `from` on (the expiry the previous step of the same walk returned; `None`:
    /// the earliest), walking only the keys it deletes: how many, and the latest expiry deleted.
    async fn prune(
        &self,
        now: OffsetDateTime,
        from: Option<OffsetDateTime>,
        batch: u32,
    ) -> Result<(u64, Option<OffsetDateTime>), RepoError>;
}

crate::kernel::debug_port!(IdempotencyStore);

/// Idempotent requests over an [`IdempotencyStore`].
#[derive(Debug, Clone)]
pub struct IdempotencyService {
    store: Arc<dyn IdempotencyStore>,
    clock: Arc<dyn Clock>,
}

impl IdempotencyService {
    /// The service over its store and clock.
    pub fn new(store: Arc<dyn IdempotencyStore>, clock: Arc<dyn Clock>) -> Self {
        Self { store, clock }
    }

    /// What the request with `fingerprint` and `key` of `caller` does ([`Self::ticket`], then
    /// [`Self::claim`]).
    pub async fn begin(
        &self,
        caller: &Caller,
        key: &IdempotencyKey,
        fingerprint: &Fingerprint,
    ) -> Result<Claim, RepoError> {
        self.claim(self.ticket(caller, key, fingerprint)).await
    }

    /// The claim the request with `fingerprint` and `key` of `caller` makes now. Known before
    /// [`Self::claim`] runs, so a caller whose claim failed midway (the database stopped
    /// answering: its statement may still commit when it comes back) can release it later.
    pub fn ticket(
        &self,
        caller: &Caller,
        key: &IdempotencyKey,
        fingerprint: &Fingerprint,
    ) -> Ticket {
        Ticket {
            caller: caller.scope(),
            key: key.as_str().to_owned(),
            fingerprint: *fingerprint,
            claimed_at: self.clock.now(),
        }
    }

    /// Makes the claim of `ticket` ([`Self::ticket`]): what the request does.
    pub async fn claim(&self, ticket: Ticket) -> Result<Claim, RepoError> {
        let now = ticket.claimed_at;
        let fingerprint = &ticket.fingerprint;
        let found = self
            .store
            .claim(
                &ticket.caller,
                &ticket.key,
                fingerprint,
                now,
                now + CLAIM_LEASE,
                now + KEPT_FOR,
            )
            .await?;
        Ok(decide(found, ticket))
    }

    /// Ends the claim of a request that ran: keeps its answer when [`keeps`] says so, else
    /// releases the key.
    pub async fn finish(
        &self,
        ticket: &Ticket,
        answer: Option<&KeptAnswer>,
    ) -> Result<(), RepoError> {
        match answer {
            Some(a) if keeps(a.status) => self.store.keep(ticket, a).await,
            _ => self.store.release(ticket).await,
        }
    }

    /// Ends the claim of a request that ran in `ambient` ([`Ambient::scope`]): when the store
    /// held the request's writes open there, its answer is kept (or the key released) in their
    /// transaction, which then commits; else as [`Self::finish`]. `Err`: the request's writes
    /// are not stored (its answer must not be sent) and the key is released.
    pub async fn finish_within(
        &self,
        ambient: &Ambient,
        ticket: &Ticket,
        answer: Option<&KeptAnswer>,
    ) -> Result<(), RepoError> {
        let kept = answer.filter(|a| keeps(a.status));
        match self.store.finish_held(ambient, ticket, kept).await {
            Ok(true) => Ok(()),
            Ok(false) => self.finish(ticket, answer).await,
            Err(e) => {
                // Should the release fail too, the claim holds until its lease ends: the error
                // answered is the commit's.
                let _released = self.store.release(ticket).await;
                Err(e)
            }
        }
    }

    /// Deletes expired keys in batches of `batch`, at most `rounds` statements, each starting
    /// where the previous one stopped; how many.
    pub async fn prune(&self, batch: u32, rounds: u32) -> Result<u64, RepoError> {
        let now = self.clock.now();
        let mut total = 0;
        let mut from = None;
        for _ in 0..rounds {
            let (n, last) = self.store.prune(now, from, batch).await?;
            total += n;
            if n < u64::from(batch) {
                break;
            }
            from = last;
        }
        Ok(total)
    }
}

/// The rule: a running claim is in use whatever the request; an answer is replayed to the same
/// request only.
fn decide(found: Option<Existing>, ticket: Ticket) -> Claim {
    match found {
        None => Claim::Run(ticket),
        Some(Existing::Running) => Claim::InUse,
        Some(Existing::Answered(kept, answer)) if kept == ticket.fingerprint => {
            Claim::Replay(answer)
        }
        Some(Existing::Answered(..)) => Claim::Reused,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_answer_opens_only_with_the_same_token_and_request() {
        let answer = KeptAnswer {
            status: 201,
            content_type: Some("application/json".into()),
            body: br#"{"data":{"secret":"whsec_abc"}}"#.to_vec(),
        };
        let fp = Fingerprint::of("POST", "/api/v1/webhook-endpoints", b"{}");
        let mine = AnswerKey::of_bearer(b"pp_live_token_one").expect("key");
        let theirs = AnswerKey::of_bearer(b"pp_live_token_two").expect("key");
        assert!(!answer.is_sealed());
        let sealed = answer.seal(&mine, &fp).expect("sealed");
        assert!(sealed.is_sealed());
        assert_eq!(
            (sealed.status, &sealed.content_type),
            (201, &answer.content_type)
        );
        assert!(
            !sealed.body.windows(9).any(|w| w == b"whsec_abc"),
            "no secret in clear"
        );
        assert_eq!(sealed.open(&mine, &fp), Some(answer.clone()));
        assert_eq!(sealed.open(&theirs, &fp), None, "another token");
        let other = Fingerprint::of("POST", "/api/v1/webhook-endpoints", b"{ }");
        assert_eq!(sealed.open(&mine, &other), None, "another request");
        assert_eq!(answer.open(&mine, &fp), None, "not sealed");
        assert_ne!(
            answer.seal(&mine, &fp).expect("sealed").body,
            sealed.body,
            "a fresh nonce each time"
        );
    }
    use crate::kernel::clock::FixedClock;
    use futures_util::FutureExt;
    use time::macros::datetime;

    #[test]
    fn a_key_is_1_to_255_visible_ascii_characters() {
        assert!(IdempotencyKey::parse(b"a").is_ok());
        assert!(IdempotencyKey::parse(&[b'~'; 255]).is_ok());
        assert!(IdempotencyKey::parse(b"").is_err());
        assert!(IdempotencyKey::parse(&[b'a'; 256]).is_err());
        assert!(IdempotencyKey::parse(b"has space").is_err());
        assert!(IdempotencyKey::parse(b"tab\t").is_err());
        assert!(IdempotencyKey::parse("é".as_bytes()).is_err());
    }

    #[test]
    fn the_fingerprint_covers_method_path_and_body() {
        let a = Fingerprint::of("POST", "/x?a=1", b"{}");
        assert_eq!(a, Fingerprint::of("POST", "/x?a=1", b"{}"));
        assert_ne!(a, Fingerprint::of("PATCH", "/x?a=1", b"{}"));
        assert_ne!(a, Fingerprint::of("POST", "/x?a=2", b"{}"));
        assert_ne!(a, Fingerprint::of("POST", "/x?a=1", b"{ }"));
        // The parts are length-prefixed, so moving bytes between them changes it.
        assert_ne!(a, Fingerprint::of("POST", "/x?a=1{", b"}"));
    }

    #[test]
    fn answers_below_500_except_429_are_kept() {
        for s in [200, 201, 202, 400, 404, 409, 422] {
            assert!(keeps(s), "{s}");
        }
        for s in [429, 500, 503] {
            assert!(!keeps(s), "{s}");
        }
    }

    fn answer() -> KeptAnswer {
        KeptAnswer {
            status: 201,
            content_type: Some("application/json".into()),
            body: b"{}".to_vec(),
        }
    }

    #[test]
    fn a_running_key_is_in_use_and_an_answered_one_replays_the_same_request_only() {
        let fp = Fingerprint::of("POST", "/x", b"{}");
        let other = Fingerprint::of("POST", "/x", b"{\"a\":1}");
        let ticket = |fingerprint| Ticket {
            caller: "operator".into(),
            key: "k".into(),
            fingerprint,
            claimed_at: datetime!(2026-11-26 10:00 UTC),
        };
        assert_eq!(decide(None, ticket(fp)), Claim::Run(ticket(fp)));
        assert_eq!(decide(Some(Existing::Running), ticket(fp)), Claim::InUse);
        assert_eq!(
            decide(Some(Existing::Answered(fp, answer())), ticket(fp)),
            Claim::Replay(answer())
        );
        assert_eq!(
            decide(Some(Existing::Answered(fp, answer())), ticket(other)),
            Claim::Reused
        );
    }

    #[test]
    fn begin_claims_for_the_lease_and_keeps_for_24_hours_and_finish_releases_5xx() {
        let now = datetime!(2026-11-26 10:00 UTC);
        let mut store = MockIdempotencyStore::new();
        store
            .expect_claim()
            .withf(move |caller, key, _, at, lease, expires| {
                caller == "partner:acme"
                    && key == "k1"
                    && *at == now
                    && *lease == now + CLAIM_LEASE
                    && *expires == now + time::Duration::hours(24)
            })
            .returning(|_, _, _, _, _, _| Ok(None));
        store
            .expect_release()
            .withf(move |t| t.caller == "partner:acme" && t.key == "k1" && t.claimed_at == now)
            .times(1)
            .returning(|_| Ok(()));
        store
            .expect_keep()
            .withf(|_, a| a.status == 201)
            .times(1)
            .returning(|_, _| Ok(()));
        let svc = IdempotencyService::new(Arc::new(store), Arc::new(FixedClock::new(now)));
        let caller = Caller::Partner(PartnerId::parse("acme").expect("id"));
        let key = IdempotencyKey::parse(b"k1").expect("key");
        let fp = Fingerprint::of("POST", "/x", b"{}");
        let Claim::Run(ticket) = svc
            .begin(&caller, &key, &fp)
            .now_or_never()
            .expect("ready")
            .expect("claim")
        else {
            panic!("the key is claimed");
        };
        let failed = KeptAnswer {
            status: 503,
            ..answer()
        };
        svc.finish(&ticket, Some(&failed))
            .now_or_never()
            .expect("ready")
            .expect("release");
        svc.finish(&ticket, Some(&answer()))
            .now_or_never()
            .expect("ready")
            .expect("keep");
    }

    #[test]
    fn finish_within_keeps_in_the_held_transaction_else_alone_and_releases_when_it_fails() {
        let ticket = Ticket {
            caller: "operator".into(),
            key: "k".into(),
            fingerprint: Fingerprint::of("POST", "/x", b"{}"),
            claimed_at: datetime!(2026-11-27 03:00 UTC),
        };
        let run = |held: Result<bool, &'static str>, keeps_alone: usize, releases: usize| {
            let mut store = MockIdempotencyStore::new();
            store
                .expect_finish_held()
                .withf(|_, _, a| a.is_some_and(|a| a.status == 201))
                .times(1)
                .returning(move |_, _, _| held.map_err(RepoError::new));
            store
                .expect_keep()
                .times(keeps_alone)
                .returning(|_, _| Ok(()));
            store.expect_release().times(releases).returning(|_| Ok(()));
            let svc = IdempotencyService::new(
                Arc::new(store),
                Arc::new(FixedClock::new(ticket.claimed_at)),
            );
            svc.finish_within(&Ambient::default(), &ticket, Some(&answer()))
                .now_or_never()
                .expect("ready")
        };
        // Kept with the writes: nothing more.
        assert!(run(Ok(true), 0, 0).is_ok());
        // Nothing held (nothing written): kept on its own.
        assert!(run(Ok(false), 1, 0).is_ok());
        // The held transaction did not commit: the key is released, the error answered.
        assert!(run(Err("commit failed"), 0, 1).is_err());
    }
}
