//! The delivery signatures: `X-Partner-Signature: t=<unix>,v1=<hex>`, HMAC-SHA256 of
//! `"<t>.<raw body>"` under the endpoint secret, the scheme Stripe's SDKs verify, with one `v1` per
//! secret during a rotation; and, for secrets of the `whsec_<base64>` form, the Standard Webhooks
//! (v1.0.0) `webhook-signature` its official libraries verify (extensions §9).

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ring::hmac;
use time::OffsetDateTime;

use crate::kernel::compare::constant_time_eq;
use crate::kernel::random::Random;

/// Receivers reject deliveries whose timestamp is older than this.
pub const SIGNATURE_TOLERANCE: Duration = Duration::from_secs(300);

/// An endpoint secret, shown once when generated.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecret(String);

impl WebhookSecret {
    const PREFIX: &'static str = "whsec_";

    /// Random bytes in a new secret: 192 bits, the Standard Webhooks recommendation.
    const KEY_BYTES: usize = 24;

    /// `whsec_` and the standard base64 of 24 random bytes (32 characters), the form the
    /// Standard Webhooks libraries take.
    pub fn generate(rng: &dyn Random) -> Self {
        let mut key = [0u8; Self::KEY_BYTES];
        rng.fill(&mut key);
        Self(format!("{}{}", Self::PREFIX, BASE64.encode(key)))
    }

    /// The Standard Webhooks key: the decoded part after `whsec_`, for secrets of the form
    /// [`WebhookSecret::generate`] makes. `None` for the older form (`whsec_` and 43 base62
    /// characters), whose endpoints keep only `X-Partner-Signature` until rotated.
    pub(crate) fn standard_key(&self) -> Option<Vec<u8>> {
        let rest = self.0.strip_prefix(Self::PREFIX)?;
        if rest.len() != 32 {
            return None;
        }
        BASE64
            .decode(rest)
            .ok()
            .filter(|k| k.len() == Self::KEY_BYTES)
    }

    /// Whether deliveries signed with this secret also carry the Standard Webhooks headers.
    pub fn is_standard(&self) -> bool {
        self.standard_key().is_some()
    }

    /// A secret as stored.
    pub fn from_stored(s: String) -> Self {
        Self(s)
    }

    /// The secret text (`whsec_…`), to store or to show once.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookSecret(..)")
    }
}

/// `t=<t>,v1=<hex HMAC-SHA256 of "<t>.<body>">`.
pub fn signature_header(secret: &WebhookSecret, t: i64, body: &[u8]) -> String {
    signature_header_with(&[secret], t, body)
}

/// `t=<t>,v1=<hex>,v1=<hex>…`: one `v1` per secret, in the order given (the current secret first,
/// then the one a rotation replaced, while it overlaps). Lowercase hex, integer seconds, no
/// spaces: what Stripe's `verify_header` parses.
pub fn signature_header_with(secrets: &[&WebhookSecret], t: i64, body: &[u8]) -> String {
    let mut h = format!("t={t}");
    for s in secrets {
        h.push_str(",v1=");
        h.push_str(&hex(&sign(s.expose().as_bytes(), t, body)));
    }
    h
}

/// The Standard Webhooks `webhook-signature` value: `v1,<base64 HMAC-SHA256 of
/// "<msg_id>.<t>.<body>">` under each secret's decoded key, space-separated, the current secret
/// first. `None` when the current secret is of the older form (no Standard Webhooks headers at
/// all); a previous secret of the older form adds no value.
///
/// ```
/// use partner_domain::webhook::{WebhookSecret, standard_signature};
///
/// // The example of the Standard Webhooks specification.
/// let secret = WebhookSecret::from_stored("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into());
/// let sig = standard_signature(
///     &[&secret],
///     "msg_p5jXN8AQM9LWM0D4loKWxJek",
///     1_614_265_330,
///     br#"{"test": 2432232314}"#,
/// );
/// assert_eq!(sig.as_deref(), Some("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="));
/// ```
pub fn standard_signature(
    secrets: &[&WebhookSecret],
    msg_id: &str,
    t: i64,
    body: &[u8],
) -> Option<String> {
    let current = secrets.first()?;
    current.standard_key()?;
    let values: Vec<String> = secrets
        .iter()
        .filter_map(|s| s.standard_key())
        .map(|key| {
            let k = hmac::Key::new(hmac::HMAC_SHA256, &key);
            let mut ctx = hmac::Context::with_key(&k);
            ctx.update(msg_id.as_bytes());
            ctx.update(b".");
            ctx.update(t.to_string().as_bytes());
            ctx.update(b".");
            ctx.update(body);
            format!("v1,{}", BASE64.encode(ctx.sign().as_ref()))
        })
        .collect();
    Some(values.join(" "))
}

fn sign(key: &[u8], t: i64, body: &[u8]) -> Vec<u8> {
    let k = hmac::Key::new(hmac::HMAC_SHA256, key);
    let mut ctx = hmac::Context::with_key(&k);
    ctx.update(t.to_string().as_bytes());
    ctx.update(b".");
    ctx.update(body);
    ctx.sign().as_ref().to_vec()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Why a receiver rejects a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SignatureError {
    #[error("the signature header is malformed")]
    Malformed,
    #[error("the timestamp is outside the tolerance")]
    TooOld,
    #[error("no v1 signature matches")]
    Mismatch,
}

/// Verifies an `X-Partner-Signature` header as a receiver does: parses `t` and every `v1`,
/// rejects a `t` more than `tolerance` away from `now`, and accepts when any `v1` equals the
/// HMAC-SHA256 of `"<t>.<raw_body>"` under any of `secrets` (compared in constant time). Several
/// secrets serve a rotation: during the overlap a receiver may hold the old secret, the new one,
/// or both. Receivers call it through [`WebhookVerifier`](crate::webhook::WebhookVerifier).
pub(crate) fn verify(
    header: &str,
    raw_body: &[u8],
    secrets: &[&str],
    now: OffsetDateTime,
    tolerance: Duration,
) -> Result<(), SignatureError> {
    let mut t = None;
    let mut v1 = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", v)) => t = v.parse::<i64>().ok(),
            Some(("v1", v)) => v1.push(v.to_owned()),
            _ => {}
        }
    }
    let t = t.ok_or(SignatureError::Malformed)?;
    if v1.is_empty() {
        return Err(SignatureError::Malformed);
    }
    // `t` is the sender's: checked, so an extreme value is refused instead of overflowing.
    let age = now.unix_timestamp().checked_sub(t).map(i64::unsigned_abs);
    if age.is_none_or(|age| age > tolerance.as_secs()) {
        return Err(SignatureError::TooOld);
    }
    let matched = secrets.iter().any(|secret| {
        let expected = hex(&sign(secret.as_bytes(), t, raw_body));
        v1.iter()
            .any(|v| constant_time_eq(v.as_bytes(), expected.as_bytes()))
    });
    if matched {
        Ok(())
    } else {
        Err(SignatureError::Mismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::random::SystemRandom;

    /// What a receiver does with one secret and the default tolerance.
    fn verify_signature(
        header: &str,
        body: &[u8],
        secret: &str,
        now_unix: i64,
    ) -> Result<(), SignatureError> {
        let now =
            OffsetDateTime::from_unix_timestamp(now_unix).map_err(|_| SignatureError::TooOld)?;
        verify(header, body, &[secret], now, SIGNATURE_TOLERANCE)
    }

    #[test]
    fn an_extreme_timestamp_is_refused_without_overflowing() {
        let now = OffsetDateTime::from_unix_timestamp(1_795_000_000).expect("time");
        for t in [i64::MIN, i64::MAX, -1] {
            let header = format!("t={t},v1=00");
            assert_eq!(
                verify(&header, b"{}", &["whsec_x"], now, SIGNATURE_TOLERANCE),
                Err(SignatureError::TooOld),
                "t={t}"
            );
        }
    }

    mod signature_properties {
        use super::*;
        use proptest::prelude::*;

        const T: i64 = 1_700_000_000;

        fn at(t: i64) -> OffsetDateTime {
            OffsetDateTime::from_unix_timestamp(t).expect("time")
        }

        proptest! {
            /// Any header text, however malformed, is answered (never a panic), and without
            /// the right HMAC it is never accepted.
            #[test]
            fn arbitrary_headers_are_refused_without_panicking(header in ".{0,200}", body in proptest::collection::vec(any::<u8>(), 0..64)) {
                let ok = verify(&header, &body, &["whsec_test"], at(T), SIGNATURE_TOLERANCE);
                prop_assert!(ok.is_err());
            }

            /// Structured but wrong: the right timestamp with any `v1` that is not the HMAC.
            #[test]
            fn a_wrong_v1_is_refused(v1 in "[0-9a-f]{0,80}", extra in "(,[a-z0-9]{1,3}=[^,]{0,10}){0,3}") {
                let body = b"{}";
                let right = hex(&sign(b"whsec_test", T, body));
                prop_assume!(v1 != right);
                let header = format!("t={T},v1={v1}{extra}");
                prop_assert!(verify(&header, body, &["whsec_test"], at(T), SIGNATURE_TOLERANCE).is_err());
            }

            /// What we sign verifies, for any body and any secret among several, and stops
            /// verifying when one byte of the body changes.
            #[test]
            fn what_is_signed_verifies_and_tampering_does_not(body in proptest::collection::vec(any::<u8>(), 1..256), flip in any::<usize>()) {
                let a = WebhookSecret::from_stored("whsec_a".into());
                let b = WebhookSecret::from_stored("whsec_b".into());
                let header = signature_header_with(&[&a, &b], T, &body);
                prop_assert!(verify(&header, &body, &["whsec_b"], at(T), SIGNATURE_TOLERANCE).is_ok());
                let mut tampered = body.clone();
                let i = flip % tampered.len();
                if let Some(byte) = tampered.get_mut(i) {
                    *byte ^= 0x01;
                }
                prop_assert!(verify(&header, &tampered, &["whsec_a", "whsec_b"], at(T), SIGNATURE_TOLERANCE).is_err());
            }
        }
    }

    #[test]
    fn signatures_round_trip_and_reject_tampering() {
        let secret = WebhookSecret::generate(&SystemRandom::new());
        assert!(secret.expose().starts_with("whsec_"));
        let body = br#"{"id":"x","event":"lead.created"}"#;
        let h = signature_header(&secret, 1_700_000_000, body);
        assert!(h.starts_with("t=1700000000,v1="));
        assert_eq!(h.len(), "t=1700000000,v1=".len() + 64);
        assert_eq!(
            verify_signature(&h, body, secret.expose(), 1_700_000_100),
            Ok(())
        );
        assert_eq!(
            verify_signature(&h, b"{}", secret.expose(), 1_700_000_100),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify_signature(&h, body, "whsec_other", 1_700_000_100),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify_signature(&h, body, secret.expose(), 1_700_000_301),
            Err(SignatureError::TooOld)
        );
        assert_eq!(
            verify_signature("v1=abc", body, secret.expose(), 0),
            Err(SignatureError::Malformed)
        );
    }

    #[test]
    fn new_secrets_have_the_standard_form_and_old_ones_sign_only_the_stripe_way() {
        let new = WebhookSecret::generate(&SystemRandom::new());
        assert_eq!(new.expose().len(), "whsec_".len() + 32);
        assert!(new.is_standard());
        let old = WebhookSecret::from_stored(format!("whsec_{}", "a".repeat(43)));
        assert!(!old.is_standard());
        let body = b"{}";
        // Rotated from the older form: one value, the current secret's.
        let one = standard_signature(&[&new, &old], "d1", 1, body).expect("standard");
        assert_eq!(one.split(' ').count(), 1);
        assert_eq!(
            Some(one),
            standard_signature(&[&new], "d1", 1, body),
            "the older previous secret adds nothing"
        );
        // Both of the new form: two values, the current secret's first.
        let newer = WebhookSecret::generate(&SystemRandom::new());
        let two = standard_signature(&[&newer, &new], "d1", 1, body).expect("standard");
        let parts: Vec<&str> = two.split(' ').collect();
        assert_eq!(parts.len(), 2);
        assert_eq!(
            Some(parts[0].to_owned()),
            standard_signature(&[&newer], "d1", 1, body)
        );
        assert_eq!(standard_signature(&[&old, &new], "d1", 1, body), None);
        assert_eq!(standard_signature(&[], "d1", 1, body), None);
    }

    #[test]
    fn a_known_vector() {
        // HMAC-SHA256("whsec_test", "1614556800.{}"), as Stripe's SDKs compute it.
        let h = signature_header(
            &WebhookSecret::from_stored("whsec_test".into()),
            1_614_556_800,
            b"{}",
        );
        let k = hmac::Key::new(hmac::HMAC_SHA256, b"whsec_test");
        let expected = hex(hmac::sign(&k, b"1614556800.{}").as_ref());
        assert_eq!(h, format!("t=1614556800,v1={expected}"));
    }
}
