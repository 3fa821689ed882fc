//! API token text, minting, the keyed hash that is all the database ever stores, and
//! constant-time comparison.
//!
//! ```
//! use partner_domain::account::token::{TokenPepper, TokenText};
//! use partner_domain::SystemRandom;
//!
//! let token = TokenText::mint(&SystemRandom::new());
//! assert!(token.expose().starts_with("pk_live_"));
//! assert!(TokenText::parse(token.expose()).is_some());
//! assert!(TokenText::parse("pk_live_short").is_none());
//! // Only the keyed hash is ever stored; the same pepper gives the same hash.
//! let pepper = TokenPepper::new(b"a server secret of 32 bytes or more");
//! assert_eq!(pepper.hash(&token), pepper.hash(&token));
//! ```

use std::fmt;

use ring::hmac;

use crate::kernel::compare::constant_time_eq;
use crate::kernel::random::{Random, random_string};

/// The fixed live-token prefix.
pub(crate) const TOKEN_PREFIX: &str = "pk_live_";
/// Base62 characters after the prefix in minted tokens (about 256 bits of entropy).
pub(crate) const MINTED_LEN: usize = 43;
const MIN_SECRET_LEN: usize = 40;
const MAX_SECRET_LEN: usize = 128;
const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/// How many leading characters of a token are kept in clear to identify it in listings.
const DISPLAY_PREFIX_LEN: usize = TOKEN_PREFIX.len() + 4;

/// Text that has the shape of a live token: `pk_live_` then 40-128 base62 characters.
/// A string without that shape never reaches the database.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenText(String);

impl TokenText {
    /// Text of a token's shape, if it has it.
    pub fn parse(s: &str) -> Option<Self> {
        let rest = s.strip_prefix(TOKEN_PREFIX)?;
        let ok_len = (MIN_SECRET_LEN..=MAX_SECRET_LEN).contains(&rest.len());
        (ok_len && rest.bytes().all(|b| b.is_ascii_alphanumeric())).then(|| Self(s.to_owned()))
    }

    /// A new token from a CSPRNG.
    pub fn mint(rng: &dyn Random) -> Self {
        Self(format!(
            "{TOKEN_PREFIX}{}",
            random_string(rng, BASE62, MINTED_LEN)
        ))
    }

    /// The whole secret. Show it once, at creation or rotation; never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The non-secret leading part (`pk_live_` + 4 characters) that identifies a token in lists.
    pub(crate) fn display_prefix(&self) -> String {
        self.0.chars().take(DISPLAY_PREFIX_LEN).collect()
    }
}

impl fmt::Debug for TokenText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TokenText({}…)", self.display_prefix())
    }
}

/// The server's key for hashing tokens (`PARTNER_TOKEN_PEPPER`).
#[derive(Clone)]
pub struct TokenPepper(hmac::Key);

impl TokenPepper {
    /// The pepper from its secret bytes.
    pub fn new(secret: &[u8]) -> Self {
        Self(hmac::Key::new(hmac::HMAC_SHA256, secret))
    }

    /// HMAC-SHA256 of the token text under the pepper: what the database stores and indexes.
    pub fn hash(&self, token: &TokenText) -> TokenHash {
        let tag = hmac::sign(&self.0, token.0.as_bytes());
        let mut out = [0u8; 32];
        out.copy_from_slice(tag.as_ref());
        TokenHash(out)
    }
}

impl TokenPepper {
    /// A 32-byte key for another purpose (`label`), derived from the pepper, so that every
    /// instance sharing the pepper shares the key and no second secret needs configuring.
    pub fn derive(&self, label: &str) -> [u8; 32] {
        let tag = hmac::sign(&self.0, format!("derive:{label}").as_bytes());
        let mut out = [0u8; 32];
        out.copy_from_slice(tag.as_ref());
        out
    }
}

impl TokenPepper {
    /// The keyed hash of a portal code (extensions §10), under a label of its own so that no
    /// code ever hashes to an API token's hash.
    pub(crate) fn hash_code(&self, code: &str) -> TokenHash {
        let tag = hmac::sign(&self.0, format!("portal-code:{code}").as_bytes());
        let mut out = [0u8; 32];
        out.copy_from_slice(tag.as_ref());
        TokenHash(out)
    }
}

impl fmt::Debug for TokenPepper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenPepper(..)")
    }
}

/// A keyed token hash.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TokenHash([u8; 32]);

impl TokenHash {
    /// A hash as stored; `None` unless 32 bytes.
    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        <[u8; 32]>::try_from(b).ok().map(Self)
    }

    /// The 32 bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Constant-time equality, so a comparison never leaks how many leading bytes matched.
    pub(crate) fn ct_eq(&self, other: &TokenHash) -> bool {
        constant_time_eq(&self.0, &other.0)
    }
}

impl fmt::Debug for TokenHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenHash(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::random::SystemRandom;

    #[test]
    fn minted_tokens_have_the_live_shape_and_differ() {
        let rng = SystemRandom::new();
        let a = TokenText::mint(&rng);
        let b = TokenText::mint(&rng);
        assert_ne!(a, b);
        assert!(a.expose().starts_with("pk_live_"));
        assert_eq!(a.expose().len(), 8 + 43);
        assert_eq!(TokenText::parse(a.expose()), Some(a.clone()));
        assert_eq!(a.display_prefix().len(), 12);
        assert!(!format!("{a:?}").contains(&a.expose()[12..]));
    }

    #[test]
    fn parse_rejects_other_shapes() {
        let body = "a".repeat(40);
        assert!(TokenText::parse(&format!("pk_live_{body}")).is_some());
        for bad in [
            String::new(),
            format!("pk_test_{body}"),
            format!("pk_live_{}", "a".repeat(39)),
            format!("pk_live_{}", "a".repeat(129)),
            format!("pk_live_{}-", "a".repeat(40)),
            format!("PK_LIVE_{body}"),
            format!(" pk_live_{body}"),
        ] {
            assert!(TokenText::parse(&bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn hash_is_keyed() {
        let t = TokenText::mint(&SystemRandom::new());
        let h1 = TokenPepper::new(b"one").hash(&t);
        let h2 = TokenPepper::new(b"two").hash(&t);
        assert!(!h1.ct_eq(&h2));
        assert!(h1.ct_eq(&TokenPepper::new(b"one").hash(&t)));
    }
}
