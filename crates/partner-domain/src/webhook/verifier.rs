//! The receiver's one entry point: a [`WebhookVerifier`] built from the endpoint's secrets checks a
//! delivery from its headers and raw body, whichever of our two signature forms it carries
//! (`X-Partner-Signature`, Stripe's scheme; or the Standard Webhooks `webhook-*` headers of
//! extensions §9), with one error type.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use time::OffsetDateTime;

use super::signature::{
    SIGNATURE_TOLERANCE, SignatureError, WebhookSecret, standard_signature, verify,
};
use crate::kernel::compare::constant_time_eq;

/// Why a delivery is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// The verifier was given no secret, or an empty one.
    #[error("no secret to verify with")]
    NoSecret,
    /// Neither `X-Partner-Signature` nor the three `webhook-*` headers are present.
    #[error("the delivery carries no signature header")]
    Unsigned,
    /// A signature header is malformed.
    #[error("the signature headers are malformed")]
    Malformed,
    /// The signed timestamp is outside the tolerance.
    #[error("the timestamp is outside the tolerance")]
    TooOld,
    /// No signature matches any secret.
    #[error("no signature matches")]
    Mismatch,
}

impl From<SignatureError> for VerifyError {
    fn from(e: SignatureError) -> Self {
        match e {
            SignatureError::Malformed => VerifyError::Malformed,
            SignatureError::TooOld => VerifyError::TooOld,
            SignatureError::Mismatch => VerifyError::Mismatch,
        }
    }
}

/// Verifies deliveries as a receiver does, with every secret it currently accepts (during a
/// rotation, the new and the old one).
///
/// ```
/// use partner_domain::webhook::{WebhookSecret, WebhookVerifier, signature_header, VerifyError};
/// use time::OffsetDateTime;
///
/// let secret = WebhookSecret::from_stored("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into());
/// let verifier = WebhookVerifier::new([secret.clone()]).unwrap();
/// let body = br#"{"id":"6c1f","event":"ping","created_at":"2026-11-23T10:00:00.000Z","data":{}}"#;
/// let now = OffsetDateTime::from_unix_timestamp(1_795_000_000).unwrap();
/// let header = signature_header(&secret, now.unix_timestamp(), body);
/// // Header names in any case, as a receiver's framework hands them over.
/// let headers = [("X-Partner-Signature", header.as_str()), ("Content-Type", "application/json")];
/// assert_eq!(verifier.verify(headers, body, now), Ok(()));
/// assert_eq!(verifier.verify(headers, b"{}", now), Err(VerifyError::Mismatch));
/// assert_eq!(verifier.verify([("Content-Type", "application/json")], body, now), Err(VerifyError::Unsigned));
/// ```
#[derive(Clone)]
pub struct WebhookVerifier {
    secrets: Vec<WebhookSecret>,
    tolerance: Duration,
}

impl std::fmt::Debug for WebhookVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookVerifier")
            .field("secrets", &self.secrets.len())
            .field("tolerance", &self.tolerance)
            .finish()
    }
}

impl WebhookVerifier {
    /// A verifier accepting any of `secrets`, with the default tolerance
    /// ([`SIGNATURE_TOLERANCE`], 5 minutes). No secret, or an empty one, is refused.
    pub fn new(secrets: impl IntoIterator<Item = WebhookSecret>) -> Result<Self, VerifyError> {
        let secrets: Vec<WebhookSecret> = secrets.into_iter().collect();
        if secrets.is_empty() || secrets.iter().any(|s| s.expose().is_empty()) {
            return Err(VerifyError::NoSecret);
        }
        Ok(Self {
            secrets,
            tolerance: SIGNATURE_TOLERANCE,
        })
    }

    /// The same verifier with another tolerance for the signed timestamp.
    pub fn with_tolerance(mut self, tolerance: Duration) -> Self {
        self.tolerance = tolerance;
        self
    }

    /// Verifies a delivery from its headers (names in any case) and its raw body at `now`:
    /// `X-Partner-Signature` when present, else the Standard Webhooks headers.
    pub fn verify<'a>(
        &self,
        headers: impl IntoIterator<Item = (&'a str, &'a str)>,
        raw_body: &[u8],
        now: OffsetDateTime,
    ) -> Result<(), VerifyError> {
        let (mut partner, mut id, mut timestamp, mut signature) = (None, None, None, None);
        for (name, value) in headers {
            if name.eq_ignore_ascii_case("x-partner-signature") {
                partner = Some(value);
            } else if name.eq_ignore_ascii_case("webhook-id") {
                id = Some(value);
            } else if name.eq_ignore_ascii_case("webhook-timestamp") {
                timestamp = Some(value);
            } else if name.eq_ignore_ascii_case("webhook-signature") {
                signature = Some(value);
            }
        }
        if let Some(header) = partner {
            return self.verify_partner_signature(header, raw_body, now);
        }
        match (id, timestamp, signature) {
            (Some(id), Some(t), Some(sig)) => self.verify_standard(id, t, sig, raw_body, now),
            (None, None, None) => Err(VerifyError::Unsigned),
            _ => Err(VerifyError::Malformed),
        }
    }

    /// Verifies an `X-Partner-Signature` value (`t=…,v1=…[,v1=…]`).
    pub fn verify_partner_signature(
        &self,
        header: &str,
        raw_body: &[u8],
        now: OffsetDateTime,
    ) -> Result<(), VerifyError> {
        let secrets: Vec<&str> = self.secrets.iter().map(WebhookSecret::expose).collect();
        Ok(verify(header, raw_body, &secrets, now, self.tolerance)?)
    }

    /// Verifies the Standard Webhooks headers: `webhook-signature` holds space-separated
    /// `v1,<base64>` values; any of them under any secret of the `whsec_<base64>` form matches.
    pub fn verify_standard(
        &self,
        id: &str,
        timestamp: &str,
        signature: &str,
        raw_body: &[u8],
        now: OffsetDateTime,
    ) -> Result<(), VerifyError> {
        let t: i64 = timestamp
            .trim()
            .parse()
            .map_err(|_| VerifyError::Malformed)?;
        let given: Vec<Vec<u8>> = signature
            .split(' ')
            .filter_map(|v| v.strip_prefix("v1,"))
            .filter_map(|b| BASE64.decode(b).ok())
            .collect();
        if given.is_empty() {
            return Err(VerifyError::Malformed);
        }
        // `t` is the sender's: checked, so an extreme value is refused instead of overflowing.
        let age = now.unix_timestamp().checked_sub(t).map(i64::unsigned_abs);
        if age.is_none_or(|age| age > self.tolerance.as_secs()) {
            return Err(VerifyError::TooOld);
        }
        let matched = self.secrets.iter().filter(|s| s.is_standard()).any(|s| {
            standard_signature(&[s], id, t, raw_body)
                .and_then(|v| v.strip_prefix("v1,").and_then(|b| BASE64.decode(b).ok()))
                .is_some_and(|expected| given.iter().any(|g| constant_time_eq(g, &expected)))
        });
        if matched {
            Ok(())
        } else {
            Err(VerifyError::Mismatch)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::random::SystemRandom;
    use crate::webhook::signature::signature_header_with;
    use proptest::prelude::*;

    const T: i64 = 1_795_000_000;

    fn at(t: i64) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(t).expect("time")
    }

    /// Both header forms for `body` signed with `secrets` (current first) at `T`.
    fn signed(secrets: &[&WebhookSecret], body: &[u8]) -> Vec<(String, String)> {
        let mut h = vec![(
            "X-Partner-Signature".to_owned(),
            signature_header_with(secrets, T, body),
        )];
        if let Some(sig) = standard_signature(secrets, "d-1", T, body) {
            h.push(("webhook-id".into(), "d-1".into()));
            h.push(("webhook-timestamp".into(), T.to_string()));
            h.push(("webhook-signature".into(), sig));
        }
        h
    }

    fn refs(h: &[(String, String)]) -> Vec<(&str, &str)> {
        h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
    }

    #[test]
    fn no_secret_or_an_empty_one_is_refused() {
        assert_eq!(
            WebhookVerifier::new(Vec::new()).map(|_| ()),
            Err(VerifyError::NoSecret)
        );
        assert_eq!(
            WebhookVerifier::new([WebhookSecret::from_stored(String::new())]).map(|_| ()),
            Err(VerifyError::NoSecret)
        );
    }

    #[test]
    fn either_form_verifies_alone_and_during_a_rotation_either_secret_does() {
        let rng = SystemRandom::new();
        let (new, old) = (WebhookSecret::generate(&rng), WebhookSecret::generate(&rng));
        let body = br#"{"id":"d-1"}"#;
        let headers = signed(&[&new, &old], body);
        let standard_only: Vec<_> = headers
            .iter()
            .filter(|(k, _)| k.starts_with("webhook-"))
            .cloned()
            .collect();
        for s in [&new, &old] {
            let v = WebhookVerifier::new([s.clone()]).expect("verifier");
            assert_eq!(v.verify(refs(&headers), body, at(T)), Ok(()));
            assert_eq!(v.verify(refs(&standard_only), body, at(T)), Ok(()));
            assert_eq!(
                v.verify(refs(&standard_only), b"{}", at(T)),
                Err(VerifyError::Mismatch)
            );
            assert_eq!(
                v.verify(refs(&standard_only), body, at(T + 301)),
                Err(VerifyError::TooOld)
            );
        }
        let stranger = WebhookVerifier::new([WebhookSecret::generate(&rng)]).expect("verifier");
        assert_eq!(
            stranger.verify(refs(&standard_only), body, at(T)),
            Err(VerifyError::Mismatch)
        );
        assert_eq!(
            stranger.verify([("webhook-id", "x")], body, at(T)),
            Err(VerifyError::Malformed)
        );
    }

    proptest! {
        /// What we sign verifies, under each form, and a flipped body byte never does.
        #[test]
        fn what_is_signed_verifies_and_tampering_does_not(body in proptest::collection::vec(any::<u8>(), 1..256), flip in any::<usize>()) {
            let secret = WebhookSecret::generate(&SystemRandom::new());
            let v = WebhookVerifier::new([secret.clone()]).expect("verifier");
            let headers = signed(&[&secret], &body);
            prop_assert_eq!(v.verify(refs(&headers), &body, at(T)), Ok(()));
            let mut tampered = body.clone();
            let i = flip % tampered.len();
            if let Some(b) = tampered.get_mut(i) {
                *b ^= 0x01;
            }
            prop_assert!(v.verify(refs(&headers), &tampered, at(T)).is_err());
            let standard: Vec<_> = headers.iter().filter(|(k, _)| k.starts_with("webhook-")).cloned().collect();
            prop_assert!(v.verify(refs(&standard), &tampered, at(T)).is_err());
        }

        /// Arbitrary header values never panic and never verify.
        #[test]
        fn arbitrary_headers_are_refused_without_panicking(id in ".{0,40}", t in ".{0,24}", sig in ".{0,120}", partner in proptest::option::of(".{0,120}")) {
            let v = WebhookVerifier::new([WebhookSecret::generate(&SystemRandom::new())]).expect("verifier");
            let mut headers = vec![("webhook-id", id.as_str()), ("webhook-timestamp", t.as_str()), ("webhook-signature", sig.as_str())];
            if let Some(p) = &partner {
                headers.push(("x-partner-signature", p.as_str()));
            }
            let refused = v.verify(headers, b"{}", at(T)).is_err();
            prop_assert!(refused);
        }
    }
}
