//! Webhooks: endpoint settings and their rules, the signature (`t=<unix>,v1=<hex>`, HMAC-SHA256
//! of `"<t>.<raw body>"` under the endpoint secret, the scheme Stripe's SDKs verify), which
//! addresses count as internal, and the retry schedule.

pub mod ports;

use std::net::IpAddr;
use std::time::Duration;

use ring::hmac;
use serde::{Serialize, Serializer};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::account::auth::{Sealed, TokenKey};
use crate::kernel::error::RepoError;
use crate::kernel::ids::{DeliveryId, EndpointId};

pub use crate::events::EventKind;
use crate::kernel::compare::constant_time_eq;
use crate::kernel::random::{Random, random_string};
use crate::kernel::values::{PartnerId, ValueError};
use crate::kernel::wire;

/// An account may have at most this many endpoints.
pub const MAX_ENDPOINTS: usize = 10;
/// Receivers reject deliveries whose timestamp is older than this.
pub const SIGNATURE_TOLERANCE: Duration = Duration::from_secs(300);

/// How long a `lead.created` delivery waits, so the lead can supply a phone first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeadCreatedDelay {
    OneMinute,
    FiveMinutes,
    OneHour,
}

impl LeadCreatedDelay {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "1m" => Some(Self::OneMinute),
            "5m" => Some(Self::FiveMinutes),
            "1h" => Some(Self::OneHour),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::OneMinute => "1m",
            Self::FiveMinutes => "5m",
            Self::OneHour => "1h",
        }
    }

    pub fn duration(self) -> time::Duration {
        match self {
            Self::OneMinute => time::Duration::minutes(1),
            Self::FiveMinutes => time::Duration::minutes(5),
            Self::OneHour => time::Duration::hours(1),
        }
    }
}

impl Serialize for LeadCreatedDelay {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// The one custom header an endpoint may attach to every delivery. Only
/// [`CustomHeader::parse`] makes one, so a name or value that is not a legal, unreserved
/// header cannot reach a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CustomHeader {
    name: String,
    value: String,
}

const RESERVED_HEADERS: [&str; 7] = [
    "content-type",
    "content-length",
    "host",
    "transfer-encoding",
    "connection",
    "user-agent",
    "authorization",
];

impl CustomHeader {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn value(&self) -> &str {
        &self.value
    }

    /// The name: an HTTP token of 1-64 characters, not one the delivery sets itself
    /// (`Content-Type`, `Content-Length`, `Host`, `Transfer-Encoding`, `Connection`,
    /// `User-Agent`, `Authorization`, any `X-Partner-*`), compared case-insensitively. The value:
    /// at most 1,024 printable ASCII characters and spaces.
    pub fn parse(name: &str, value: &str) -> Result<Self, ValueError> {
        let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
        if name.is_empty() || name.len() > 64 || !name.bytes().all(tchar) {
            return Err(ValueError::invalid(
                "customHeader.name",
                "an HTTP header name of 1-64 characters",
            ));
        }
        let lower = name.to_ascii_lowercase();
        if RESERVED_HEADERS.contains(&lower.as_str()) || lower.starts_with("x-partner-") {
            return Err(ValueError::invalid(
                "customHeader.name",
                "that header is set by the delivery itself",
            ));
        }
        if value.len() > 1024 || !value.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
            return Err(ValueError::invalid(
                "customHeader.value",
                "at most 1024 printable ASCII characters",
            ));
        }
        Ok(Self {
            name: name.to_owned(),
            value: value.to_owned(),
        })
    }
}

/// Whether `ip` is anything but a global unicast address: loopback, private, link-local,
/// shared, reserved, documentation, multicast, and for IPv6 everything outside `2000::/3` (so
/// IPv4-mapped and -translated forms, NAT64 `64:ff9b::/96` and `64:ff9b:1::/48`, site-local
/// `fec0::/10`, unique local, discard `100::/64`) plus the tunnelling and special blocks inside it
/// (Teredo `2001::/32`, 6to4 `2002::/16`, ORCHID, benchmarking, documentation). A tunnel or
/// translation prefix can reach an internal IPv4 host, so it is refused whatever it embeds.
pub fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..=127).contains(&b)) // carrier-grade NAT
                || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
                || (a == 192 && b == 88 && c == 99) // 6to4 relay anycast
                || (a == 198 && (18..=19).contains(&b)) // benchmarking
                || a >= 240 // reserved
        }
        IpAddr::V6(v6) => {
            let [s0, s1, ..] = v6.segments();
            let global_unicast = (s0 & 0xe000) == 0x2000;
            !global_unicast
                || (s0 == 0x2001 && s1 < 0x0200) // IETF protocol assignments: Teredo, ORCHID, benchmarking…
                || (s0 == 0x2001 && s1 == 0x0db8) // documentation
                || s0 == 0x2002 // 6to4
                || (s0 == 0x3fff && s1 < 0x1000) // documentation (3fff::/20)
        }
    }
}

/// An endpoint URL: absolute `https`, a host, no credentials, at most 2,048 characters. When
/// `allow_private` is false a literal internal IP address is refused here; names are checked when
/// resolved (at save where possible, and at every send).
pub fn parse_endpoint_url(s: &str, allow_private: bool) -> Result<url::Url, ValueError> {
    let bad = |reason| ValueError::invalid("url", reason);
    if s.len() > 2048 || s.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(bad("must be an absolute https URL"));
    }
    let u = url::Url::parse(s).map_err(|_| bad("must be an absolute https URL"))?;
    if u.scheme() != "https" {
        return Err(bad("only https URLs are accepted"));
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Err(bad(
            "credentials in the URL are not accepted; use customHeader",
        ));
    }
    let internal = match u.host() {
        None => return Err(bad("must have a host")),
        Some(url::Host::Ipv4(ip)) => is_internal(IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => is_internal(IpAddr::V6(ip)),
        Some(url::Host::Domain(d)) => {
            // `localhost.` is the same name as `localhost`.
            let d = d.trim_end_matches('.').to_ascii_lowercase();
            d == "localhost" || d.ends_with(".localhost")
        }
    };
    if internal && !allow_private {
        return Err(bad(
            "must not point at a loopback, private or internal address",
        ));
    }
    Ok(u)
}

/// An endpoint secret, shown once when generated.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecret(String);

impl WebhookSecret {
    const PREFIX: &'static str = "whsec_";

    pub fn generate(rng: &dyn Random) -> Self {
        const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
        Self(format!(
            "{}{}",
            Self::PREFIX,
            random_string(rng, BASE62, 43)
        ))
    }

    /// A secret as stored.
    pub fn from_stored(s: String) -> Self {
        Self(s)
    }

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
pub enum SignatureError {
    #[error("the signature header is malformed")]
    Malformed,
    #[error("the timestamp is outside the tolerance")]
    TooOld,
    #[error("no v1 signature matches")]
    Mismatch,
}

/// What a receiver does, with the default tolerance of [`SIGNATURE_TOLERANCE`] and one secret.
pub fn verify_signature(
    header: &str,
    body: &[u8],
    secret: &str,
    now_unix: i64,
) -> Result<(), SignatureError> {
    let now = OffsetDateTime::from_unix_timestamp(now_unix).map_err(|_| SignatureError::TooOld)?;
    verify(header, body, &[secret], now, SIGNATURE_TOLERANCE)
}

/// Verifies an `X-Partner-Signature` header as a receiver does: parses `t` and every `v1`,
/// rejects a `t` more than `tolerance` away from `now`, and accepts when any `v1` equals the
/// HMAC-SHA256 of `"<t>.<raw_body>"` under any of `secrets` (compared in constant time). Several
/// secrets serve a rotation: during the overlap a receiver may hold the old secret, the new one,
/// or both.
///
/// ```
/// use partner_domain::webhook::{signature_header_with, verify, SignatureError, WebhookSecret};
/// use std::time::Duration;
/// use time::OffsetDateTime;
///
/// let (new, old) = (
///     WebhookSecret::from_stored("whsec_new".into()),
///     WebhookSecret::from_stored("whsec_old".into()),
/// );
/// let body = br#"{"id":"6c1f","event":"ping","created_at":"2026-11-23T10:00:00.000Z","data":{}}"#;
/// let now = OffsetDateTime::from_unix_timestamp(1_795_000_000).unwrap();
/// // During a rotation's overlap a delivery carries both signatures.
/// let header = signature_header_with(&[&new, &old], now.unix_timestamp(), body);
/// let five_minutes = Duration::from_secs(300);
/// assert_eq!(verify(&header, body, &["whsec_old"], now, five_minutes), Ok(()));
/// assert_eq!(verify(&header, body, &["whsec_new", "whsec_old"], now, five_minutes), Ok(()));
/// assert_eq!(
///     verify(&header, b"{}", &["whsec_new"], now, five_minutes),
///     Err(SignatureError::Mismatch)
/// );
/// let later = now + time::Duration::minutes(6);
/// assert_eq!(verify(&header, body, &["whsec_new"], later, five_minutes), Err(SignatureError::TooOld));
/// ```
pub fn verify(
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
    if (now.unix_timestamp() - t).unsigned_abs() > tolerance.as_secs() {
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

/// When attempt number `attempts + 1` happens, after `attempts` failed ones (`None`: give up).
/// The schedule lists the delays after the first, second… attempt; each gets ±10 % jitter from
/// `jitter` (a value in 0..=1), so retries of many deliveries do not arrive in lockstep.
pub fn next_retry(schedule: &[Duration], attempts: u32, jitter: f64) -> Option<Duration> {
    let base = *schedule.get(usize::try_from(attempts).ok()?.checked_sub(1)?)?;
    let factor = 0.9 + 0.2 * jitter.clamp(0.0, 1.0);
    Some(base.mul_f64(factor))
}

/// Why an endpoint was disabled by the service (`None` when a partner disabled it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisabledReason {
    /// An attempt was answered `410 Gone`.
    Gone,
    /// Every attempt failed for `PARTNER_WEBHOOK_DISABLE_AFTER`.
    Failing,
}

impl DisabledReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Gone => "gone",
            Self::Failing => "failing",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "gone" => Some(Self::Gone),
            "failing" => Some(Self::Failing),
            _ => None,
        }
    }
}

impl Serialize for DisabledReason {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// The `lastError` of deliveries ended because their endpoint was disabled.
pub const ENDPOINT_DISABLED: &str = "endpoint disabled";

/// A configured endpoint. Made by [`WebhookService`] when a partner creates one, or by
/// [`WebhookEndpoint::new`] from what the store holds; only the service changes it afterwards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookEndpoint {
    id: EndpointId,
    partner_id: PartnerId,
    url: String,
    events: Vec<EventKind>,
    lead_created_delay: Option<LeadCreatedDelay>,
    custom_header: Option<CustomHeader>,
    secret: Option<WebhookSecret>,
    /// The secret a rotation replaced, still signing until `previous_secret_expires_at`.
    previous_secret: Option<WebhookSecret>,
    previous_secret_expires_at: Option<OffsetDateTime>,
    /// Set while the endpoint is disabled: no deliveries are queued for it.
    disabled_at: Option<OffsetDateTime>,
    disabled_reason: Option<DisabledReason>,
    created_at: OffsetDateTime,
    updated_at: OffsetDateTime,
}

/// A stored endpoint's fields, for [`WebhookEndpoint::new`]. The pairs the table's CHECK
/// constraints tie together are pairs here, so no endpoint has an overlap end without the
/// previous secret, or a reason without being disabled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointParts {
    pub id: EndpointId,
    pub partner_id: PartnerId,
    /// The stored address, not re-checked: it was checked when it was set.
    pub url: String,
    pub events: Vec<EventKind>,
    pub lead_created_delay: Option<LeadCreatedDelay>,
    pub custom_header: Option<CustomHeader>,
    pub secret: Option<WebhookSecret>,
    /// The secret a rotation replaced and until when it still signs.
    pub previous_secret: Option<(WebhookSecret, OffsetDateTime)>,
    /// Since when the endpoint is disabled, and why (`None`: the partner disabled it).
    pub disabled: Option<(OffsetDateTime, Option<DisabledReason>)>,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

/// An endpoint as partners see it: never the secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointRow {
    pub id: EndpointId,
    pub url: String,
    pub events: Vec<EventKind>,
    pub lead_created_delay: Option<LeadCreatedDelay>,
    pub custom_header: Option<CustomHeader>,
    pub has_secret: bool,
    #[serde(serialize_with = "wire::ts")]
    pub created_at: OffsetDateTime,
    /// `enabled` or `disabled`.
    pub status: &'static str,
    pub disabled_reason: Option<DisabledReason>,
    #[serde(serialize_with = "wire::ts_opt")]
    pub disabled_at: Option<OffsetDateTime>,
    /// Until when the secret a rotation replaced still signs (`null`: no overlap).
    #[serde(serialize_with = "wire::ts_opt")]
    pub previous_secret_expires_at: Option<OffsetDateTime>,
    /// Present only in the answer that generated it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

impl WebhookEndpoint {
    /// An endpoint as stored.
    pub fn new(parts: EndpointParts) -> Self {
        let EndpointParts {
            id,
            partner_id,
            url,
            events,
            lead_created_delay,
            custom_header,
            secret,
            previous_secret,
            disabled,
            created_at,
            updated_at,
        } = parts;
        let (previous_secret, previous_secret_expires_at) = previous_secret.unzip();
        let (disabled_at, disabled_reason) = disabled.unzip();
        Self {
            id,
            partner_id,
            url,
            events,
            lead_created_delay,
            custom_header,
            secret,
            previous_secret,
            previous_secret_expires_at,
            disabled_at,
            disabled_reason: disabled_reason.flatten(),
            created_at,
            updated_at,
        }
    }

    #[must_use]
    pub fn id(&self) -> EndpointId {
        self.id
    }

    #[must_use]
    pub fn partner_id(&self) -> &PartnerId {
        &self.partner_id
    }

    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }

    #[must_use]
    pub fn events(&self) -> &[EventKind] {
        &self.events
    }

    #[must_use]
    pub fn lead_created_delay(&self) -> Option<LeadCreatedDelay> {
        self.lead_created_delay
    }

    #[must_use]
    pub fn custom_header(&self) -> Option<&CustomHeader> {
        self.custom_header.as_ref()
    }

    /// The current signing secret.
    #[must_use]
    pub fn secret(&self) -> Option<&WebhookSecret> {
        self.secret.as_ref()
    }

    /// The secret a rotation replaced, whether or not its overlap has ended (the store keeps
    /// it until the next change); [`Self::previous_secret_at`] is the one that signs.
    #[must_use]
    pub fn previous_secret(&self) -> Option<&WebhookSecret> {
        self.previous_secret.as_ref()
    }

    #[must_use]
    pub fn previous_secret_expires_at(&self) -> Option<OffsetDateTime> {
        self.previous_secret_expires_at
    }

    #[must_use]
    pub fn disabled_at(&self) -> Option<OffsetDateTime> {
        self.disabled_at
    }

    #[must_use]
    pub fn disabled_reason(&self) -> Option<DisabledReason> {
        self.disabled_reason
    }

    #[must_use]
    pub fn created_at(&self) -> OffsetDateTime {
        self.created_at
    }

    #[must_use]
    pub fn updated_at(&self) -> OffsetDateTime {
        self.updated_at
    }

    /// The previous secret, while its overlap lasts at `now`.
    pub fn previous_secret_at(&self, now: OffsetDateTime) -> Option<&WebhookSecret> {
        match self.previous_secret_expires_at {
            Some(until) if until > now => self.previous_secret.as_ref(),
            _ => None,
        }
    }

    /// The endpoint as shown at `now`.
    pub fn row(&self, now: OffsetDateTime) -> EndpointRow {
        EndpointRow {
            id: self.id,
            url: self.url.clone(),
            events: self.events.clone(),
            lead_created_delay: self.lead_created_delay,
            custom_header: self.custom_header.clone(),
            has_secret: self.secret.is_some(),
            created_at: self.created_at,
            status: if self.disabled_at.is_some() {
                "disabled"
            } else {
                "enabled"
            },
            disabled_reason: self.disabled_reason,
            disabled_at: self.disabled_at,
            previous_secret_expires_at: self
                .previous_secret_at(now)
                .and(self.previous_secret_expires_at),
            secret: None,
        }
    }

    /// The row with the secret shown (once, after generating it).
    pub fn row_with_secret(&self, now: OffsetDateTime) -> EndpointRow {
        EndpointRow {
            secret: self.secret.as_ref().map(|s| s.expose().to_owned()),
            ..self.row(now)
        }
    }
}

/// The event list: a non-empty subset of the four kinds (duplicates dropped).
pub fn parse_events(items: &[String]) -> Result<Vec<EventKind>, ValueError> {
    let mut out = Vec::new();
    for i in items {
        let k = EventKind::parse(i).ok_or(ValueError::invalid(
            "events",
            "entries must be lead.created, lead.enriched, order.created or payout.created",
        ))?;
        if !out.contains(&k) {
            out.push(k);
        }
    }
    if out.is_empty() {
        return Err(ValueError::Missing("events"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::random::SystemRandom;

    /// A delivery page read for a token at a cursor's unverified position is used only when the
    /// cursor verifies for the authenticated partner.
    #[test]
    fn a_delivery_page_read_for_a_token_needs_the_partners_own_cursor() {
        let svc = WebhookService::new(
            std::sync::Arc::new(crate::webhook::ports::MockWebhookRepo::new()),
            std::sync::Arc::new(crate::webhook::ports::MockAddressCheck::new()),
            std::sync::Arc::new(crate::kernel::clock::FixedClock::new(
                OffsetDateTime::UNIX_EPOCH,
            )),
            std::sync::Arc::new(SystemRandom::new()),
            false,
            crate::kernel::cursor::CursorKey::new(b"deliveries"),
        );
        let acme = PartnerId::parse("acme").expect("id");
        let beta = PartnerId::parse("beta").expect("id");
        let pos = crate::kernel::cursor::Position {
            created_at: OffsetDateTime::UNIX_EPOCH,
            id: Uuid::nil(),
        };
        let cursor = crate::kernel::cursor::CursorKey::new(b"deliveries").encode(&acme, pos);
        let q = DeliveryQuery {
            limit: 2,
            cursor: Some(cursor),
            ..DeliveryQuery::default()
        };
        assert_eq!(
            svc.finish_deliveries(&acme, &q, Vec::new())
                .expect("its own cursor")
                .items,
            Vec::new()
        );
        assert!(matches!(
            svc.finish_deliveries(&beta, &q, Vec::new()),
            Err(EndpointError::BadCursor)
        ));
        let forged = DeliveryQuery {
            cursor: Some(crate::kernel::cursor::CursorKey::new(b"leads").encode(&acme, pos)),
            ..q
        };
        assert!(matches!(
            svc.finish_deliveries(&acme, &forged, Vec::new()),
            Err(EndpointError::BadCursor)
        ));
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

    #[test]
    fn internal_addresses() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fc00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "255.255.255.255",
            "224.0.0.1",
            "192.88.99.1",
            // extensions.md §7: IPv6 forms that can reach an internal IPv4 host, and the rest of
            // what is not global unicast.
            "64:ff9b::a00:1",
            "64:ff9b::7f00:1",
            "64:ff9b:1::a00:1",
            "2002:7f00:1::1",
            "2002:808:808::1",
            "2001::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "::ffff:0:7f00:1",
            "::ffff:0:808:808",
            "::ffff:8.8.8.8",
            "fec0::1",
            "100::1",
            "::127.0.0.1",
            "2001:db8::1",
            "3fff::1",
            "2001:2::1",
            "2001:10::1",
            "ff02::1",
        ] {
            assert!(is_internal(ip.parse().expect("ip")), "{ip}");
        }
        for ip in [
            "93.184.216.34",
            "8.8.8.8",
            "2606:4700::1111",
            "2a00:1450:4001:80b::200e",
            "2001:4860:4860::8888",
        ] {
            assert!(!is_internal(ip.parse().expect("ip")), "{ip}");
        }
    }

    #[test]
    fn endpoint_urls() {
        assert!(parse_endpoint_url("https://hooks.example.com/partner", false).is_ok());
        for bad in [
            "http://hooks.example.com",
            "ftp://x.test",
            "https://user:pw@x.test",
            "https://127.0.0.1/h",
            "https://[::1]/h",
            "https://10.0.0.5/h",
            "https://localhost./h",
            "https://a.localhost./h",
            "https://[64:ff9b::a00:1]/h",
            "https://[2002:7f00:1::1]/h",
            "https://localhost/h",
            "https://a.localhost/h",
            "not a url",
        ] {
            assert!(parse_endpoint_url(bad, false).is_err(), "{bad}");
        }
        assert!(
            parse_endpoint_url("https://127.0.0.1:8443/h", true).is_ok(),
            "allowed for tests"
        );
        assert!(
            parse_endpoint_url("http://127.0.0.1/h", true).is_err(),
            "https only, always"
        );
    }

    #[test]
    fn custom_header_rules() {
        assert!(CustomHeader::parse("X-Api-Key", "abc 123").is_ok());
        for (n, v) in [
            ("Authorization", "x"),
            ("x-partner-event", "x"),
            ("X-PARTNER-Anything", "x"),
            ("Content-Type", "x"),
            ("Bad Name", "x"),
            ("", "x"),
            ("X-Ok", "a\nb"),
            ("X-Ok", "é"),
        ] {
            assert!(CustomHeader::parse(n, v).is_err(), "{n}: {v}");
        }
        assert!(CustomHeader::parse(&"x".repeat(65), "v").is_err());
        assert!(CustomHeader::parse("X-Ok", &"v".repeat(1025)).is_err());
    }

    #[test]
    fn retry_schedule_with_jitter() {
        let s = [Duration::from_secs(10), Duration::from_secs(60)];
        assert_eq!(next_retry(&s, 1, 0.5), Some(Duration::from_secs(10)));
        assert_eq!(next_retry(&s, 1, 0.0), Some(Duration::from_secs(9)));
        assert_eq!(next_retry(&s, 2, 1.0), Some(Duration::from_secs(66)));
        assert_eq!(next_retry(&s, 3, 0.5), None, "schedule exhausted");
        assert_eq!(next_retry(&s, 0, 0.5), None);
    }

    #[test]
    fn retry_after_in_seconds_or_as_an_http_date_capped_at_a_day() {
        let now = OffsetDateTime::from_unix_timestamp(784_111_777).expect("t"); // Sun, 06 Nov 1994 08:49:37 GMT
        assert_eq!(
            parse_retry_after("120", now),
            Some(time::Duration::seconds(120))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:50:37 GMT", now),
            Some(time::Duration::seconds(60))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now),
            Some(time::Duration::ZERO),
            "a date in the past: no wait"
        );
        assert_eq!(parse_retry_after("999999", now), Some(RETRY_AFTER_CAP));
        assert_eq!(parse_retry_after("soon", now), None);
        let schedule = NextStep::RetryAt(now + time::Duration::seconds(10));
        assert_eq!(
            honour_retry_after(schedule, now, Some(time::Duration::seconds(60))),
            NextStep::RetryAt(now + time::Duration::seconds(60))
        );
        assert_eq!(
            honour_retry_after(schedule, now, Some(time::Duration::seconds(5))),
            schedule,
            "the schedule's later time stands"
        );
        assert_eq!(
            honour_retry_after(NextStep::GiveUp, now, Some(time::Duration::seconds(5))),
            NextStep::GiveUp
        );
    }

    #[test]
    fn events_lists() {
        assert_eq!(
            parse_events(&["order.created".into(), "order.created".into()]),
            Ok(vec![EventKind::OrderCreated])
        );
        assert!(parse_events(&[]).is_err());
        assert!(parse_events(&["lead.deleted".into()]).is_err());
    }
}

/// A new endpoint, already parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEndpoint {
    pub url: url::Url,
    pub events: Vec<EventKind>,
    pub lead_created_delay: Option<LeadCreatedDelay>,
    pub custom_header: Option<CustomHeader>,
    /// Generate a secret (returned once).
    pub secret: bool,
}

/// A partial update. `Some(None)` clears a nullable field; `secret: Some(true)` generates a new
/// secret (returned once), `Some(false)` removes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointPatch {
    pub url: Option<url::Url>,
    pub events: Option<Vec<EventKind>>,
    pub lead_created_delay: Option<Option<LeadCreatedDelay>>,
    pub custom_header: Option<Option<CustomHeader>>,
    pub secret: Option<bool>,
    /// `Some(true)` re-enables the endpoint; `Some(false)` disables it (reason `null`).
    pub enabled: Option<bool>,
    /// `Some(true)` ends the overlap of the previous secret at once.
    pub expire_previous: Option<bool>,
}

/// Errors of the endpoint calls of [`WebhookService`].
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    #[error("an account may have at most 10 webhook endpoints")]
    TooMany,
    #[error("url must not resolve to a loopback, private or internal address")]
    InternalAddress,
    #[error("no such webhook endpoint")]
    NotFound,
    #[error("no partner with that partnerId")]
    UnknownPartner,
    #[error("no such webhook delivery")]
    DeliveryNotFound,
    #[error("cursor is invalid: pass the nextCursor of a previous page unchanged")]
    BadCursor,
    #[error("since must be within the last 7 days and not in the future")]
    BadSince,
    #[error(
        "the webhook endpoint is disabled; re-enable it with PATCH {{ \"enabled\": true }} first"
    )]
    Disabled,
    #[error(transparent)]
    Repo(#[from] crate::kernel::error::RepoError),
}

/// Managing a partner's endpoints (for partners and the operator alike).
#[derive(Debug, Clone)]
pub struct WebhookService {
    repo: std::sync::Arc<dyn crate::webhook::ports::WebhookRepo>,
    addresses: std::sync::Arc<dyn crate::webhook::ports::AddressCheck>,
    clock: std::sync::Arc<dyn crate::kernel::clock::Clock>,
    rng: std::sync::Arc<dyn Random>,
    allow_private: bool,
    cursors: crate::kernel::cursor::CursorKey,
    secret_overlap: time::Duration,
}

impl WebhookService {
    /// `cursors` signs the delivery listing's cursors (use a key of its own, not the leads').
    pub fn new(
        repo: std::sync::Arc<dyn crate::webhook::ports::WebhookRepo>,
        addresses: std::sync::Arc<dyn crate::webhook::ports::AddressCheck>,
        clock: std::sync::Arc<dyn crate::kernel::clock::Clock>,
        rng: std::sync::Arc<dyn Random>,
        allow_private: bool,
        cursors: crate::kernel::cursor::CursorKey,
    ) -> Self {
        Self {
            repo,
            addresses,
            clock,
            rng,
            allow_private,
            cursors,
            secret_overlap: time::Duration::hours(24),
        }
    }

    /// How long a rotated-out secret keeps signing (`PARTNER_WEBHOOK_SECRET_OVERLAP`; zero ends
    /// it at once). 24 hours unless set.
    pub fn with_secret_overlap(mut self, overlap: std::time::Duration) -> Self {
        self.secret_overlap = time::Duration::try_from(overlap).unwrap_or(time::Duration::MAX);
        self
    }

    pub fn allow_private(&self) -> bool {
        self.allow_private
    }

    /// Refuses a host name that resolves to an internal address now. (One that does not resolve
    /// yet is accepted; every send checks again.)
    async fn check_address(&self, url: &url::Url) -> Result<(), EndpointError> {
        if self.allow_private {
            return Ok(());
        }
        if let Some(url::Host::Domain(host)) = url.host()
            && self
                .addresses
                .resolves_internal(host, url.port_or_known_default().unwrap_or(443))
                .await
        {
            return Err(EndpointError::InternalAddress);
        }
        Ok(())
    }

    pub async fn list(&self, partner: &PartnerId) -> Result<Vec<EndpointRow>, EndpointError> {
        let now = self.clock.now();
        Ok(self
            .repo
            .endpoints(partner)
            .await?
            .iter()
            .map(|e| e.row(now))
            .collect())
    }

    /// What [`Self::list`] reads, for the partner of the token of `key`, read with the token's
    /// record in one round trip and sealed until authentication passes; [`Self::rows`] renders
    /// what it opens to.
    pub async fn list_for_token(
        &self,
        key: TokenKey,
    ) -> Result<Sealed<Vec<WebhookEndpoint>>, RepoError> {
        self.repo.endpoints_for_token(key).await
    }

    /// The listing of `endpoints`, as [`Self::list`] answers it.
    pub fn rows(&self, endpoints: &[WebhookEndpoint]) -> Vec<EndpointRow> {
        let now = self.clock.now();
        endpoints.iter().map(|e| e.row(now)).collect()
    }

    pub async fn create(
        &self,
        partner: &PartnerId,
        new: NewEndpoint,
    ) -> Result<EndpointRow, EndpointError> {
        self.check_address(&new.url).await?;
        let now = self.clock.now();
        let e = WebhookEndpoint {
            id: EndpointId::generate(self.rng.as_ref()),
            partner_id: partner.clone(),
            url: new.url.into(),
            events: new.events,
            lead_created_delay: new.lead_created_delay,
            custom_header: new.custom_header,
            secret: new
                .secret
                .then(|| WebhookSecret::generate(self.rng.as_ref())),
            previous_secret: None,
            previous_secret_expires_at: None,
            disabled_at: None,
            disabled_reason: None,
            created_at: now,
            updated_at: now,
        };
        match self.repo.insert_endpoint(&e, MAX_ENDPOINTS).await? {
            crate::webhook::ports::InsertEndpoint::Inserted => Ok(e.row_with_secret(now)),
            crate::webhook::ports::InsertEndpoint::TooMany => Err(EndpointError::TooMany),
            crate::webhook::ports::InsertEndpoint::UnknownPartner => {
                Err(EndpointError::UnknownPartner)
            }
        }
    }

    pub async fn update(
        &self,
        partner: &PartnerId,
        id: EndpointId,
        patch: EndpointPatch,
    ) -> Result<EndpointRow, EndpointError> {
        let mut e = self
            .repo
            .endpoint(partner, id)
            .await?
            .ok_or(EndpointError::NotFound)?;
        if let Some(u) = &patch.url {
            self.check_address(u).await?;
            e.url = u.to_string();
        }
        if let Some(ev) = patch.events {
            e.events = ev;
        }
        if let Some(d) = patch.lead_created_delay {
            e.lead_created_delay = d;
        }
        if let Some(h) = patch.custom_header {
            e.custom_header = h;
        }
        let now = self.clock.now();
        let new_secret = patch.secret == Some(true);
        match patch.secret {
            Some(true) => {
                // The replaced secret keeps signing for the overlap, next to the new one.
                let old = e.secret.take();
                e.secret = Some(WebhookSecret::generate(self.rng.as_ref()));
                match old {
                    Some(old) if self.secret_overlap > time::Duration::ZERO => {
                        e.previous_secret = Some(old);
                        e.previous_secret_expires_at = now.checked_add(self.secret_overlap);
                    }
                    _ => {
                        e.previous_secret = None;
                        e.previous_secret_expires_at = None;
                    }
                }
            }
            Some(false) => {
                e.secret = None;
                e.previous_secret = None;
                e.previous_secret_expires_at = None;
            }
            None => {}
        }
        if patch.expire_previous == Some(true) || e.previous_secret_expires_at.is_none() {
            e.previous_secret = None;
            e.previous_secret_expires_at = None;
        }
        match (patch.enabled, e.disabled_at) {
            (Some(true), Some(_)) => {
                e.disabled_at = None;
                e.disabled_reason = None;
            }
            (Some(false), None) => e.disabled_at = Some(self.clock.now()),
            _ => {}
        }
        e.updated_at = self.clock.now();
        if !self.repo.update_endpoint(&e).await? {
            return Err(EndpointError::NotFound);
        }
        Ok(if new_secret {
            e.row_with_secret(now)
        } else {
            e.row(now)
        })
    }

    pub async fn delete(&self, partner: &PartnerId, id: EndpointId) -> Result<(), EndpointError> {
        if self.repo.delete_endpoint(partner, id).await? {
            Ok(())
        } else {
            Err(EndpointError::NotFound)
        }
    }

    /// A page of the partner's deliveries, newest first.
    pub async fn deliveries(
        &self,
        partner: &PartnerId,
        q: &DeliveryQuery,
    ) -> Result<crate::kernel::page::Page<DeliveryInfo>, EndpointError> {
        let after = match &q.cursor {
            None => None,
            Some(c) => Some(
                self.cursors
                    .decode(partner, c)
                    .ok_or(EndpointError::BadCursor)?,
            ),
        };
        let filter = DeliveryFilter {
            endpoint_id: q.endpoint_id,
            statuses: q.statuses.clone(),
            event: q.event,
            after,
            limit: q.limit.saturating_add(1),
        };
        let rows = self.repo.deliveries(partner, &filter).await?;
        Ok(self.deliveries_page(partner, q, rows))
    }

    /// The rows [`Self::deliveries`] reads, for the partner of the token of `key`, read with the
    /// token's record in one round trip and sealed until authentication passes; then
    /// [`Self::finish_deliveries`] checks the cursor against the authenticated partner. The
    /// cursor's position is read unverified ([`crate::kernel::cursor::peek`]), within the token's own
    /// partner's rows; a cursor that is not even well-formed reads no rows.
    pub async fn deliveries_for_token(
        &self,
        key: TokenKey,
        q: &DeliveryQuery,
    ) -> Result<Sealed<Vec<DeliveryInfo>>, RepoError> {
        let (after, limit) = match &q.cursor {
            None => (None, q.limit.saturating_add(1)),
            Some(c) => match crate::kernel::cursor::peek(c) {
                Some(pos) => (Some(pos), q.limit.saturating_add(1)),
                None => (None, 0),
            },
        };
        let filter = DeliveryFilter {
            endpoint_id: q.endpoint_id,
            statuses: q.statuses.clone(),
            event: q.event,
            after,
            limit,
        };
        self.repo.deliveries_for_token(key, &filter).await
    }

    /// The answer of [`Self::deliveries_for_token`] once the request is authenticated as
    /// `partner`: 400 unless the cursor verifies for that partner (a verified cursor names the
    /// position it was read at: the same bytes).
    pub fn finish_deliveries(
        &self,
        partner: &PartnerId,
        q: &DeliveryQuery,
        rows: Vec<DeliveryInfo>,
    ) -> Result<crate::kernel::page::Page<DeliveryInfo>, EndpointError> {
        if let Some(c) = &q.cursor
            && self.cursors.decode(partner, c).is_none()
        {
            return Err(EndpointError::BadCursor);
        }
        Ok(self.deliveries_page(partner, q, rows))
    }

    /// A page of `rows` (read with one more than `q.limit`, to learn whether a next page exists).
    fn deliveries_page(
        &self,
        partner: &PartnerId,
        q: &DeliveryQuery,
        mut rows: Vec<DeliveryInfo>,
    ) -> crate::kernel::page::Page<DeliveryInfo> {
        let more = rows.len() > usize::from(q.limit);
        rows.truncate(usize::from(q.limit));
        let next_cursor = more.then(|| rows.last()).flatten().map(|d| {
            self.cursors.encode(
                partner,
                crate::kernel::cursor::Position {
                    created_at: d.created_at,
                    id: d.id.as_uuid(),
                },
            )
        });
        crate::kernel::page::Page {
            items: rows,
            next_cursor,
            limit: q.limit,
        }
    }

    /// The partner's endpoint, which must be enabled for anything to be sent to it.
    async fn enabled_endpoint(
        &self,
        partner: &PartnerId,
        id: EndpointId,
    ) -> Result<WebhookEndpoint, EndpointError> {
        let e = self
            .repo
            .endpoint(partner, id)
            .await?
            .ok_or(EndpointError::NotFound)?;
        if e.disabled_at.is_some() {
            return Err(EndpointError::Disabled);
        }
        Ok(e)
    }

    /// One delivery with its last [`ATTEMPT_LOG_LIMIT`] attempts.
    pub async fn delivery(
        &self,
        partner: &PartnerId,
        id: DeliveryId,
    ) -> Result<DeliveryDetail, EndpointError> {
        self.repo
            .delivery(partner, id, ATTEMPT_LOG_LIMIT)
            .await?
            .ok_or(EndpointError::DeliveryNotFound)
    }

    /// What [`Self::delivery`] reads, for the partner of the token of `key`, read with the
    /// token's record in one round trip and sealed until authentication passes;
    /// [`Self::found`] answers for what it opens to.
    pub async fn delivery_for_token(
        &self,
        key: TokenKey,
        id: DeliveryId,
    ) -> Result<Sealed<Option<DeliveryDetail>>, RepoError> {
        self.repo
            .delivery_for_token(key, id, ATTEMPT_LOG_LIMIT)
            .await
    }

    /// [`Self::delivery`]'s answer for what was read: 404 when nothing was.
    pub fn found(detail: Option<DeliveryDetail>) -> Result<DeliveryDetail, EndpointError> {
        detail.ok_or(EndpointError::DeliveryNotFound)
    }

    /// Sends a delivery again: pending, due now, with a fresh retry budget; same id.
    pub async fn resend(
        &self,
        partner: &PartnerId,
        id: DeliveryId,
    ) -> Result<DeliveryInfo, EndpointError> {
        self.repo
            .resend(partner, id, self.clock.now())
            .await?
            .ok_or(EndpointError::DeliveryNotFound)
    }

    /// Queues a `ping` delivery to the endpoint.
    pub async fn ping(
        &self,
        partner: &PartnerId,
        endpoint: EndpointId,
    ) -> Result<DeliveryInfo, EndpointError> {
        self.enabled_endpoint(partner, endpoint).await?;
        let id = DeliveryId::generate(self.rng.as_ref());
        self.repo
            .ping(partner, endpoint, id, self.clock.now())
            .await?
            .ok_or(EndpointError::NotFound)
    }

    /// Requeues the endpoint's failed deliveries created at or after `since` (at most 7 days
    /// ago, not in the future). Returns how many.
    pub async fn recover(
        &self,
        partner: &PartnerId,
        endpoint: EndpointId,
        since: OffsetDateTime,
    ) -> Result<u64, EndpointError> {
        let now = self.clock.now();
        if since > now || since < now - RECOVER_WINDOW {
            return Err(EndpointError::BadSince);
        }
        self.enabled_endpoint(partner, endpoint).await?;
        self.repo
            .recover(partner, endpoint, since, now)
            .await?
            .ok_or(EndpointError::NotFound)
    }
}

/// A delivery as partners and the operator see it (`WebhookDelivery`, extensions.md §1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryInfo {
    /// The `X-Partner-Delivery` value.
    pub id: DeliveryId,
    pub endpoint_id: EndpointId,
    pub event: String,
    /// `pending`, `delivered` or `failed` (retries exhausted).
    pub status: String,
    /// Attempts made so far (all of them, across resends).
    pub attempts: i32,
    #[serde(serialize_with = "wire::ts_opt")]
    pub next_attempt_at: Option<OffsetDateTime>,
    #[serde(serialize_with = "wire::ts_opt")]
    pub last_attempt_at: Option<OffsetDateTime>,
    pub last_status_code: Option<i32>,
    pub last_error: Option<String>,
    #[serde(serialize_with = "wire::ts")]
    pub created_at: OffsetDateTime,
    #[serde(serialize_with = "wire::ts_opt")]
    pub delivered_at: Option<OffsetDateTime>,
}

/// One attempt of a delivery, as its log shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AttemptLogEntry {
    #[serde(serialize_with = "wire::ts")]
    pub attempted_at: OffsetDateTime,
    /// `null` when the receiver did not answer.
    pub status_code: Option<i32>,
    /// `null` when no request was made (the event's record was gone).
    pub duration_ms: Option<i32>,
    pub error: Option<String>,
}

/// How many attempts a delivery's log shows at most (the last ones).
pub const ATTEMPT_LOG_LIMIT: u16 = 20;

/// A delivery with its attempt log, oldest attempt first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryDetail {
    #[serde(flatten)]
    pub delivery: DeliveryInfo,
    pub attempt_log: Vec<AttemptLogEntry>,
}

/// The statuses a delivery can have.
pub const DELIVERY_STATUSES: [&str; 3] = ["pending", "delivered", "failed"];

/// What a delivery listing asks for (already validated, see [`parse_statuses`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeliveryQuery {
    pub endpoint_id: Option<EndpointId>,
    /// Empty: any status.
    pub statuses: Vec<&'static str>,
    pub event: Option<EventKind>,
    pub limit: u16,
    pub cursor: Option<String>,
}

/// What the store is asked for: `limit` rows after `after` (newest first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryFilter {
    pub endpoint_id: Option<EndpointId>,
    pub statuses: Vec<&'static str>,
    pub event: Option<EventKind>,
    pub after: Option<crate::kernel::cursor::Position>,
    pub limit: u16,
}

/// `status`: a comma-separated, non-empty subset of `pending`, `delivered`, `failed`.
pub fn parse_statuses(s: &str) -> Result<Vec<&'static str>, ValueError> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let st = DELIVERY_STATUSES
            .into_iter()
            .find(|x| *x == part)
            .ok_or(ValueError::invalid(
                "status",
                "a comma-separated list of pending, delivered and failed",
            ))?;
        if !out.contains(&st) {
            out.push(st);
        }
    }
    Ok(out)
}

/// `event`: one of the four kinds or `ping`.
pub fn parse_event_filter(s: &str) -> Result<EventKind, ValueError> {
    EventKind::parse_delivered(s).ok_or(ValueError::invalid(
        "event",
        "one of lead.created, lead.enriched, order.created, payout.created or ping",
    ))
}

/// How far back `recover` reaches.
pub const RECOVER_WINDOW: time::Duration = time::Duration::days(7);

/// What a worker asks for when it claims due deliveries. Fairness is decided here, not by the
/// store: no endpoint gets more than its room, so one endpoint's backlog never takes every slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRequest {
    pub now: OffsetDateTime,
    /// Claimed deliveries are leased to this worker until then; after it they are due again.
    pub lease_until: OffsetDateTime,
    /// Deliveries in all.
    pub limit: u32,
    /// Deliveries per endpoint, for endpoints not listed in `room`.
    pub per_endpoint: u32,
    /// Endpoints with less room than `per_endpoint`: busy in this worker, or backed off (0).
    pub room: Vec<(EndpointId, u32)>,
    /// Deliveries that already made this many attempts are not claimed: their budget is spent
    /// (a worker died during the last one) and [`crate::webhook::ports::DeliveryRepo::fail_exhausted`]
    /// ends them.
    pub max_attempts: u32,
}

/// A claimed delivery with everything needed to send it. Claiming counts the attempt, so a
/// delivery whose worker keeps dying still ends after its budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedDelivery {
    pub id: DeliveryId,
    pub endpoint_id: EndpointId,
    /// The fencing token of this claim: an outcome is recorded only while the row still holds it.
    pub lease: Uuid,
    /// The number of this attempt (1 for the first).
    pub attempt: u32,
    pub kind: EventKind,
    pub event_created_at: OffsetDateTime,
    pub subject: String,
    pub extra: serde_json::Value,
    pub url: String,
    pub secret: Option<WebhookSecret>,
    /// The secret a rotation replaced, while its overlap lasts: deliveries carry both signatures.
    pub previous_secret: Option<WebhookSecret>,
    pub custom_header: Option<CustomHeader>,
}

/// Where a delivery goes after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextStep {
    Delivered,
    RetryAt(OffsetDateTime),
    /// The retry budget is spent (or retrying cannot help): the delivery ends `failed`.
    GiveUp,
}

/// How an attempt ended, to be recorded under its claim's lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptOutcome {
    pub id: DeliveryId,
    pub lease: Uuid,
    pub at: OffsetDateTime,
    /// The receiver's status, `None` when it did not answer.
    pub status_code: Option<u16>,
    /// A short reason (`timeout`, `status 500`…), never a URL, secret or receiver body.
    pub error: Option<String>,
    /// How long the request took; `None` when none was made (the event's record was gone).
    pub duration_ms: Option<u32>,
    pub next: NextStep,
}

/// The longest wait a receiver's `Retry-After` can impose.
pub const RETRY_AFTER_CAP: time::Duration = time::Duration::hours(24);

/// The wait a `Retry-After` value asks for (delay in seconds, or an HTTP date), at most
/// [`RETRY_AFTER_CAP`]; `None` when the value is malformed.
pub fn parse_retry_after(value: &str, now: OffsetDateTime) -> Option<time::Duration> {
    let value = value.trim();
    let wait = if let Ok(secs) = value.parse::<u64>() {
        time::Duration::seconds(i64::try_from(secs).unwrap_or(i64::MAX))
    } else {
        let format = time::format_description::parse_borrowed::<1>(
            "[weekday repr:short], [day] [month repr:short] [year] [hour]:[minute]:[second] GMT",
        )
        .ok()?;
        let at = time::PrimitiveDateTime::parse(value, &format)
            .ok()?
            .assume_utc();
        (at - now).max(time::Duration::ZERO)
    };
    Some(wait.min(RETRY_AFTER_CAP))
}

/// The step after a failed attempt that asked to wait `retry_after`: no earlier than that, unless
/// the schedule already waits longer or gives up.
pub fn honour_retry_after(
    next: NextStep,
    at: OffsetDateTime,
    retry_after: Option<time::Duration>,
) -> NextStep {
    match (next, retry_after) {
        (NextStep::RetryAt(t), Some(wait)) => NextStep::RetryAt(t.max(at + wait)),
        (next, _) => next,
    }
}

/// Attempts a delivery may make: the first, and one per delay of the schedule.
pub fn attempt_budget(schedule: &[Duration]) -> u32 {
    u32::try_from(schedule.len()).unwrap_or(u32::MAX - 1) + 1
}

/// The step after attempt number `attempt` failed (`jitter` in 0..=1, see [`next_retry`]).
pub fn after_failure(
    schedule: &[Duration],
    attempt: u32,
    jitter: f64,
    now: OffsetDateTime,
) -> NextStep {
    // A delay past the end of time (a misconfigured schedule) gives up rather than panics.
    next_retry(schedule, attempt, jitter)
        .and_then(|d| time::Duration::try_from(d).ok())
        .and_then(|d| now.checked_add(d))
        .map_or(NextStep::GiveUp, NextStep::RetryAt)
}

/// The delivery body `{ id, event, created_at, data }`, serialized once: these exact bytes are
/// signed and sent.
pub fn delivery_body(
    id: DeliveryId,
    kind: EventKind,
    created_at: OffsetDateTime,
    data: serde_json::Value,
) -> Vec<u8> {
    #[derive(Serialize)]
    struct Body<'a> {
        id: DeliveryId,
        event: EventKind,
        created_at: String,
        data: &'a serde_json::Value,
    }
    serde_json::to_vec(&Body {
        id,
        event: kind,
        created_at: wire::format_timestamp(created_at),
        data: &data,
    })
    .unwrap_or_default()
}
