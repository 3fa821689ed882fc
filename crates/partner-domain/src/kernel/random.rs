//! Injected randomness: ids, token text and (later) secrets and coupon codes.
//!
//! ```
//! use partner_domain::kernel::random::random_string;
//! use partner_domain::SystemRandom;
//!
//! let code = random_string(&SystemRandom::new(), b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789", 12);
//! assert_eq!(code.len(), 12);
//! ```

use uuid::Uuid;

/// A cryptographically secure random source.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
pub trait Random: Send + Sync {
    /// Fills `buf` with random bytes. A CSPRNG failure is unrecoverable, so it is not modelled
    /// as an error here: implementations abort loudly rather than hand out weak secrets.
    fn fill(&self, buf: &mut [u8]);
}

impl std::fmt::Debug for dyn Random {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Random")
    }
}

/// A random (version 4) UUID drawn from `rng`.
pub(crate) fn new_id(rng: &dyn Random) -> Uuid {
    let mut b = [0u8; 16];
    rng.fill(&mut b);
    uuid::Builder::from_random_bytes(b).into_uuid()
}

/// A time-ordered (version 7, RFC 9562) UUID: the 48 bits of `at`'s Unix milliseconds, then 74
/// bits drawn from `rng`. Ids of rows written at a high rate into big tables (leads, coupons,
/// orders' analytics events, payouts, ping deliveries) sort by creation, so each insert lands at
/// the right edge of the primary key's B-tree rather than on a random leaf of it
/// (docs/decisions.md, "Time-ordered lead ids"). The same layout as the database's `uuid_v7()`.
pub(crate) fn new_time_ordered_id(rng: &dyn Random, at: time::OffsetDateTime) -> Uuid {
    let mut b = [0u8; 10];
    rng.fill(&mut b);
    let millis = u64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap_or(0);
    uuid::Builder::from_unix_timestamp_millis(millis, &b).into_uuid()
}

/// Uniform characters of `alphabet`, by rejection sampling so no character is favoured.
/// `alphabet` must hold 1-256 ASCII characters (callers pass constants); any other alphabet
/// gives an empty string rather than a panic.
pub fn random_string(rng: &dyn Random, alphabet: &[u8], len: usize) -> String {
    if alphabet.is_empty() || alphabet.len() > 256 || !alphabet.is_ascii() {
        return String::new();
    }
    let limit = 256 - (256 % alphabet.len());
    let mut out = String::with_capacity(len);
    let mut buf = [0u8; 64];
    while out.len() < len {
        rng.fill(&mut buf);
        for &b in &buf {
            if let Some(&c) = alphabet
                .get(b as usize % alphabet.len())
                .filter(|_| (b as usize) < limit)
            {
                out.push(c as char);
                if out.len() == len {
                    break;
                }
            }
        }
    }
    out
}

/// The operating system's CSPRNG, through `ring`.
#[derive(Debug)]
pub struct SystemRandom(ring::rand::SystemRandom);

impl SystemRandom {
    /// The operating system CSPRNG.
    pub fn new() -> Self {
        Self(ring::rand::SystemRandom::new())
    }
}

impl Default for SystemRandom {
    fn default() -> Self {
        Self::new()
    }
}

impl Random for SystemRandom {
    #[allow(clippy::expect_used)]
    fn fill(&self, buf: &mut [u8]) {
        use ring::rand::SecureRandom;
        self.0
            .fill(buf)
            .expect("the operating system CSPRNG failed");
    }
}

/// A deterministic [`Random`] for tests (feature `mocks`): the same seed gives the same ids,
/// codes and secrets on every run. Never for production: its bytes are predictable.
#[cfg(any(test, feature = "mocks"))]
#[derive(Debug)]
pub struct SeededRandom(std::sync::Mutex<u64>);

#[cfg(any(test, feature = "mocks"))]
impl SeededRandom {
    /// A sequence determined by `seed`.
    pub fn new(seed: u64) -> Self {
        Self(std::sync::Mutex::new(seed))
    }
}

#[cfg(any(test, feature = "mocks"))]
impl Random for SeededRandom {
    fn fill(&self, buf: &mut [u8]) {
        let mut state = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for chunk in buf.chunks_mut(8) {
            // splitmix64: a full-period sequence, good enough to look random in tests.
            *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = *state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            let bytes = z.to_le_bytes();
            let n = chunk.len();
            chunk.copy_from_slice(bytes.get(..n).unwrap_or(&bytes));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seeded_random_repeats_its_sequence() {
        let (a, b) = (SeededRandom::new(7), SeededRandom::new(7));
        let (mut x, mut y) = ([0u8; 13], [0u8; 13]);
        a.fill(&mut x);
        b.fill(&mut y);
        assert_eq!(x, y);
        assert_ne!(x, [0u8; 13]);
        assert_ne!(
            random_string(&a, b"AB", 16),
            random_string(&SeededRandom::new(8), b"AB", 16)
        );
    }

    #[test]
    fn random_string_uses_only_the_alphabet_and_length() {
        let s = random_string(&SystemRandom::new(), b"ABC", 500);
        assert_eq!(s.len(), 500);
        assert!(s.bytes().all(|b| b"ABC".contains(&b)));
        assert!(s.contains('A') && s.contains('B') && s.contains('C'));
    }

    #[test]
    fn ids_are_v4() {
        let id = new_id(&SystemRandom::new());
        assert_eq!(id.get_version_num(), 4);
    }

    #[test]
    fn time_ordered_ids_are_v7_and_sort_by_their_instant() {
        let rng = SystemRandom::new();
        let at = time::macros::datetime!(2026-11-27 09:30:00.123 UTC);
        let id = new_time_ordered_id(&rng, at);
        assert_eq!(id.get_version_num(), 7);
        assert_eq!(id.get_variant(), uuid::Variant::RFC4122);
        let (secs, nanos) = id
            .get_timestamp()
            .expect("a v7 UUID has a timestamp")
            .to_unix();
        assert_eq!((secs, nanos / 1_000_000), (1_795_771_800, 123));
        // A later millisecond sorts after, whatever the random bits.
        let later = new_time_ordered_id(&rng, at + time::Duration::milliseconds(1));
        assert!(later > id);
        assert_ne!(new_time_ordered_id(&rng, at), id);
    }
}
