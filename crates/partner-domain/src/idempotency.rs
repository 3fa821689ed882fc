//! Idempotent requests (extensions §8.3): the `Idempotency-Key` a `POST` or `PATCH` may carry,
//! what a request is compared by, which answers are kept, and what a repeated key gets.
//!
//! The first request with a key claims it for as long as it runs; its answer is kept for
//! [`KEPT_FOR`] when [`keeps`] says so, else the key is free again once it ends, so a retry runs
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

/// What holds a key a request could not claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Existing {
    /// A request with the key is still running.
    Running,
    /// Answered: the request's fingerprint and its kept answer.
    Answered(Fingerprint, KeptAnswer),
}

/// A keyed request: whose key, which request, and when it came ([`IdempotencyService::ticket`]).
/// Its answer, when kept, is kept from `claimed_at` for [`KEPT_FOR`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ticket {
    /// The caller as stored ([`Caller::scope`]).
    pub caller: String,
    /// The key.
    pub key: String,
    /// The request's fingerprint.
    pub fingerprint: Fingerprint,
    /// When the request came.
    pub claimed_at: OffsetDateTime,
}

/// What a request whose key another request holds or answered gets instead of its own answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The first request with the key is still running: 409 `idempotency_key_in_use`.
    InUse,
    /// The same request was answered: this answer, not run again.
    Replay(KeptAnswer),
    /// Another request was answered under this key: 422 `idempotency_key_reused`.
    Reused,
}

/// How a keyed request that ran ends ([`IdempotencyStore::finish`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End<'a> {
    /// Its answer is kept, committed together with its writes.
    Keep(&'a KeptAnswer),
    /// Its writes commit, its answer is not kept (a 5xx or a 429: a retry runs again).
    Commit,
    /// It failed without an answer: its writes roll back.
    Abandon,
}

impl<'a> End<'a> {
    /// The end of a request that answered `answer`: kept when [`keeps`] says so, else its
    /// writes commit alone.
    pub fn answered(answer: &'a KeptAnswer) -> Self {
        if keeps(answer.status) {
            Self::Keep(answer)
        } else {
            Self::Commit
        }
    }
}

/// The error a request's unit of work fails with when the request's key turns out to be held
/// by another running request, or answered ([`IdempotencyStore::arm`]): its writes are refused,
/// and the idempotency layer answers what [`IdempotencyService::finish`] says instead.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the request's idempotency key is held or answered by another request")]
pub struct KeyTaken;

/// Whether `e`, or an error in its `source()` chain, is [`KeyTaken`].
pub fn is_key_taken(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(err) = next {
        if err.is::<KeyTaken>() {
            return true;
        }
        next = err.source();
    }
    false
}

/// Where keys and kept answers live, shared by every instance.
///
/// A key is claimed inside the transaction of the request's first unit of work, with the
/// read of its kept answer, in the round trip that begins that transaction; the answer is kept
/// in the same transaction, in the round trip that commits it (docs/decisions.md, "Idempotency
/// keys: claimed and kept inside the write's transaction"). A claim lasts as long as that
/// transaction: a request that fails, or whose process dies, frees its key as its transaction
/// ends.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait IdempotencyStore: Send + Sync {
    /// Arms `ambient`, in which the request of `ticket` is about to run ([`Ambient::scope`]):
    /// the first unit of work the request begins there claims the key in its transaction. When
    /// another running request holds the key, or an answer is kept under it, that unit of work
    /// fails with [`KeyTaken`] and so does every later one: the request writes nothing.
    fn arm(&self, ambient: &Ambient, ticket: &Ticket);
    /// Ends the request of `ticket`, armed in `ambient`, as `end` says, committing or rolling
    /// back the writes its units of work made. A request that wrote nothing and whose answer is
    /// kept claims the key now, in a transaction of its own. `Ok(None)`: its answer stands.
    /// `Ok(Some(_))`: what holds the key (the request's writes, if any, rolled back); its answer
    /// must not be sent. `Err`: its writes are not stored, nor its answer kept.
    async fn finish<'a>(
        &self,
        ambient: &Ambient,
        ticket: &Ticket,
        end: End<'a>,
    ) -> Result<Option<Existing>, RepoError>;
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

    /// The ticket of the request with `fingerprint` and `key` of `caller`, coming now.
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

    /// Arms `ambient` for the request of `ticket`, before it runs there
    /// ([`IdempotencyStore::arm`]).
    pub fn arm(&self, ambient: &Ambient, ticket: &Ticket) {
        self.store.arm(ambient, ticket);
    }

    /// Ends the request of `ticket` that ran in `ambient` as `end` says ([`End::answered`] for
    /// a request that answered). `Ok(None)`: send the answer. `Ok(Some(claim))`: another
    /// request holds or answered the key; answer `claim` instead. `Err`: the request's writes
    /// are not stored; its answer must not be sent.
    pub async fn finish(
        &self,
        ambient: &Ambient,
        ticket: &Ticket,
        end: End<'_>,
    ) -> Result<Option<Claim>, RepoError> {
        let found = self.store.finish(ambient, ticket, end).await?;
        Ok(found.map(|existing| decide(existing, &ticket.fingerprint)))
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

/// The rule: a running request holds its key whatever the request; an answer is replayed to the
/// same request only.
fn decide(found: Existing, fingerprint: &Fingerprint) -> Claim {
    match found {
        Existing::Running => Claim::InUse,
        Existing::Answered(kept, answer) if kept == *fingerprint => Claim::Replay(answer),
        Existing::Answered(..) => Claim::Reused,
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
        assert_eq!(decide(Existing::Running, &fp), Claim::InUse);
        assert_eq!(
            decide(Existing::Answered(fp, answer()), &fp),
            Claim::Replay(answer())
        );
        assert_eq!(
            decide(Existing::Answered(fp, answer()), &other),
            Claim::Reused
        );
    }

    #[test]
    fn finish_keeps_2xx_4xx_commits_5xx_alone_and_rolls_back_a_failure() {
        let now = datetime!(2026-11-26 10:00 UTC);
        let svc = |end: fn(&End<'_>) -> bool, found: Option<Existing>| {
            let mut store = MockIdempotencyStore::new();
            store.expect_arm().times(1).return_const(());
            store
                .expect_finish()
                .withf(move |_, t, e| t.caller == "partner:acme" && t.key == "k1" && end(e))
                .times(1)
                .returning(move |_, _, _| Ok(found.clone()));
            IdempotencyService::new(Arc::new(store), Arc::new(FixedClock::new(now)))
        };
        let caller = Caller::Partner(PartnerId::parse("acme").expect("id"));
        let key = IdempotencyKey::parse(b"k1").expect("key");
        let fp = Fingerprint::of("POST", "/x", b"{}");
        let run = |svc: IdempotencyService, answer: Option<KeptAnswer>| {
            let ticket = svc.ticket(&caller, &key, &fp);
            assert_eq!(ticket.claimed_at, now);
            let ambient = Ambient::new();
            svc.arm(&ambient, &ticket);
            let end = answer.as_ref().map_or(End::Abandon, End::answered);
            svc.finish(&ambient, &ticket, end)
                .now_or_never()
                .expect("ready")
                .expect("finish")
        };
        let kept = |e: &End<'_>| matches!(e, End::Keep(a) if a.status == 201);
        assert_eq!(run(svc(kept, None), Some(answer())), None);
        let failed = KeptAnswer {
            status: 503,
            ..answer()
        };
        let commit = |e: &End<'_>| *e == End::Commit;
        assert_eq!(run(svc(commit, None), Some(failed)), None);
        let abandon = |e: &End<'_>| *e == End::Abandon;
        assert_eq!(run(svc(abandon, None), None), None);
        // Another request answered the key: its answer, not this one's.
        assert_eq!(
            run(
                svc(kept, Some(Existing::Answered(fp, answer()))),
                Some(answer())
            ),
            Some(Claim::Replay(answer()))
        );
        assert_eq!(
            run(svc(abandon, Some(Existing::Running)), None),
            Some(Claim::InUse)
        );
    }

    #[test]
    fn key_taken_is_found_through_the_errors_that_wrap_it() {
        #[derive(Debug, thiserror::Error)]
        #[error("creating the sub-account failed")]
        struct Wrapper(#[source] RepoError);
        let e = Wrapper(RepoError::new(KeyTaken));
        assert!(is_key_taken(&e));
        assert!(!is_key_taken(&RepoError::new("duplicate key")));
    }
}
