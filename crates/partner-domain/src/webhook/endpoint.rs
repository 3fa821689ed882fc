//! Webhook endpoints: their settings and the rules of each (delay, custom header, secrets,
//! enabled or disabled), as stored and as partners see them.

use std::sync::LazyLock;

use serde::{Serialize, Serializer};
use time::OffsetDateTime;

use crate::events::EventKind;
use crate::kernel::ids::EndpointId;
use crate::kernel::values::{PartnerId, ValueError};
use crate::webhook::signature::WebhookSecret;

/// An account may have at most this many endpoints.
pub const MAX_ENDPOINTS: usize = 10;

/// How long a `lead.created` delivery waits, so the lead can supply a phone first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeadCreatedDelay {
    /// `1m`.
    OneMinute,
    /// `5m`.
    FiveMinutes,
    /// `1h`.
    OneHour,
}

impl LeadCreatedDelay {
    /// The delay of its wire text (`1m`, `5m`, `1h`), if any.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "1m" => Some(Self::OneMinute),
            "5m" => Some(Self::FiveMinutes),
            "1h" => Some(Self::OneHour),
            _ => None,
        }
    }

    /// [`LeadCreatedDelay::parse`] of a request field: `{field} must be null, 1m, 5m or 1h`
    /// otherwise.
    pub fn parse_field(s: &str, field: &'static str) -> Result<Self, ValueError> {
        Self::parse(s).ok_or(ValueError::expected(field, "null, 1m, 5m or 1h"))
    }

    /// The delay's wire text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OneMinute => "1m",
            Self::FiveMinutes => "5m",
            Self::OneHour => "1h",
        }
    }

    /// How long the delivery waits.
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomHeader {
    name: String,
    value: String,
}

/// Names a custom header may not take, compared after [`normalise_header_name`]: those the
/// delivery sets itself (`rulings.md`), hop-by-hop and framing headers, credentials and cookies,
/// and the names proxies use to describe the client (extensions §12).
const RESERVED_HEADERS: [&str; 26] = [
    "content-type",
    "content-length",
    "host",
    "transfer-encoding",
    "connection",
    "user-agent",
    "authorization",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
    "expect",
    "content-encoding",
    "proxy-authorization",
    "cookie",
    "forwarded",
    "x-real-ip",
    // Beyond the ruling's list: names receivers, CGI gateways and CDNs treat specially
    // (`Proxy` becomes `HTTP_PROXY` under CGI: "httpoxy"; client-address and method overrides).
    "proxy",
    "x-forwarded",
    "true-client-ip",
    "x-client-ip",
    "cf-connecting-ip",
    "x-original-url",
    "x-http-method-override",
    "set-cookie",
];

/// Every name starting with one of these (after [`normalise_header_name`]) is reserved too.
const RESERVED_PREFIXES: [&str; 3] = ["x-partner-", "webhook-", "x-forwarded-"];

/// The form in which header names are compared: lower case, `_` read as `-` (a receiver that
/// maps headers to CGI names sees `X_Partner_Signature` and `X-Partner-Signature` as one).
fn normalise_header_name(name: &str) -> String {
    // `.` too: some gateways map it to `_` as well (`X.Partner.Signature`).
    name.to_ascii_lowercase().replace(['_', '.'], "-")
}

/// Whether a delivery may not carry a custom header of this name.
fn is_reserved_header(name: &str) -> bool {
    let n = normalise_header_name(name);
    RESERVED_HEADERS.contains(&n.as_str()) || RESERVED_PREFIXES.iter().any(|p| n.starts_with(p))
}

impl CustomHeader {
    /// The header's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The header's value.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// What answers show instead of the value (extensions §12): `…` and its last 4 characters,
    /// or `…` alone when it has 8 or fewer (the value is ASCII, so characters are bytes).
    pub fn value_hint(&self) -> String {
        let v = self.value.as_str();
        match v.len().checked_sub(4) {
            Some(start) if v.len() > 8 => format!("…{}", v.get(start..).unwrap_or_default()),
            _ => "…".to_owned(),
        }
    }

    /// The name: an HTTP token of 1-64 characters, not one the delivery sets itself
    /// (`Content-Type`, `Content-Length`, `Host`, `Transfer-Encoding`, `Connection`,
    /// `User-Agent`, `Authorization`, any `X-Partner-*`), nor a hop-by-hop, credential or proxy
    /// header (`webhook-*`, `Connection`, `Keep-Alive`, `Proxy-Connection`, `TE`, `Trailer`,
    /// `Upgrade`, `Expect`, `Content-Encoding`, `Proxy-Authorization`, `Cookie`, `Forwarded`,
    /// `X-Forwarded-*`, `X-Real-IP`), compared case-insensitively after `_` becomes `-`. The value:
    /// at most 1,024 printable ASCII characters and spaces.
    pub fn parse(name: &str, value: &str) -> Result<Self, ValueError> {
        let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
        if name.is_empty() || name.len() > 64 || !name.bytes().all(tchar) {
            return Err(ValueError::invalid(
                "customHeader.name",
                "an HTTP header name of 1-64 characters",
            ));
        }
        if is_reserved_header(name) {
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

/// Why an endpoint was disabled by the service (`None` when a partner disabled it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisabledReason {
    /// An attempt was answered `410 Gone`.
    Gone,
    /// Every attempt failed for `PARTNER_WEBHOOK_DISABLE_AFTER`.
    Failing,
}

impl DisabledReason {
    /// The reason's wire text (`gone`, `failing`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Gone => "gone",
            Self::Failing => "failing",
        }
    }

    /// The reason of its wire text, if any.
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

/// A configured endpoint. Made by [`crate::webhook::WebhookService`] when a partner creates one, or by
/// [`WebhookEndpoint::new`] from what the store holds; only the service changes it afterwards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookEndpoint {
    pub(super) id: EndpointId,
    pub(super) partner_id: PartnerId,
    pub(super) url: String,
    pub(super) events: Vec<EventKind>,
    pub(super) lead_created_delay: Option<LeadCreatedDelay>,
    pub(super) custom_header: Option<CustomHeader>,
    pub(super) secret: Option<WebhookSecret>,
    /// The secret a rotation replaced, still signing until `previous_secret_expires_at`.
    pub(super) previous_secret: Option<WebhookSecret>,
    pub(super) previous_secret_expires_at: Option<OffsetDateTime>,
    /// Set while the endpoint is disabled: no deliveries are queued for it.
    pub(super) disabled_at: Option<OffsetDateTime>,
    pub(super) disabled_reason: Option<DisabledReason>,
    pub(super) created_at: OffsetDateTime,
    pub(super) updated_at: OffsetDateTime,
}

/// A stored endpoint's fields, for [`WebhookEndpoint::new`]. The pairs the table's CHECK
/// constraints tie together are pairs here, so no endpoint has an overlap end without the
/// previous secret, or a reason without being disabled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointParts {
    /// The endpoint's id.
    pub id: EndpointId,
    /// The partner it belongs to.
    pub partner_id: PartnerId,
    /// The stored address, not re-checked: it was checked when it was set.
    pub url: String,
    /// The kinds of events it receives.
    pub events: Vec<EventKind>,
    /// How long `lead.created` deliveries wait, if at all.
    pub lead_created_delay: Option<LeadCreatedDelay>,
    /// A header sent on every delivery.
    pub custom_header: Option<CustomHeader>,
    /// The current signing secret (`None`: deliveries are unsigned).
    pub secret: Option<WebhookSecret>,
    /// The secret a rotation replaced and until when it still signs.
    pub previous_secret: Option<(WebhookSecret, OffsetDateTime)>,
    /// Since when the endpoint is disabled, and why (`None`: the partner disabled it).
    pub disabled: Option<(OffsetDateTime, Option<DisabledReason>)>,
    /// When it was created.
    pub created_at: OffsetDateTime,
    /// When it was last changed.
    pub updated_at: OffsetDateTime,
}

/// An endpoint as one answer shows it (extensions §12): at an instant (a rotation's overlap is
/// shown only while it lasts), with the secret only in the answer that generated it, and the
/// custom header's value only in the answer to the request that set it (a hint otherwise).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShownEndpoint {
    /// The endpoint.
    pub endpoint: WebhookEndpoint,
    /// The instant it is shown at.
    pub at: OffsetDateTime,
    reveal_secret: bool,
    reveal_header_value: bool,
}

impl ShownEndpoint {
    /// As every listing and read shows it: no secret, the header's value as a hint.
    pub fn listed(endpoint: WebhookEndpoint, at: OffsetDateTime) -> Self {
        Self {
            endpoint,
            at,
            reveal_secret: false,
            reveal_header_value: false,
        }
    }

    /// The same, revealing the secret (the answer that generated it) and the header's value
    /// (the answer to the request that set it) where told to.
    #[must_use]
    pub(crate) fn revealing(self, secret: bool, header_value: bool) -> Self {
        Self {
            reveal_secret: secret,
            reveal_header_value: header_value,
            ..self
        }
    }

    /// The generated secret, in the answer that generated it.
    pub fn secret(&self) -> Option<&str> {
        self.reveal_secret
            .then(|| self.endpoint.secret.as_ref().map(WebhookSecret::expose))
            .flatten()
    }

    /// The custom header's value, in the answer to the request that set it.
    pub fn header_value(&self) -> Option<&str> {
        self.reveal_header_value
            .then(|| {
                self.endpoint
                    .custom_header
                    .as_ref()
                    .map(CustomHeader::value)
            })
            .flatten()
    }

    /// Until when the replaced secret still signs, while it does.
    pub fn previous_secret_expires_at(&self) -> Option<OffsetDateTime> {
        self.endpoint
            .previous_secret_at(self.at)
            .and(self.endpoint.previous_secret_expires_at)
    }

    /// Whether deliveries are queued for it (it is not disabled).
    pub fn is_enabled(&self) -> bool {
        self.endpoint.disabled_at.is_none()
    }
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

    /// The endpoint's id.
    #[must_use]
    pub fn id(&self) -> EndpointId {
        self.id
    }

    /// The partner it belongs to.
    #[must_use]
    pub fn partner_id(&self) -> &PartnerId {
        &self.partner_id
    }

    /// Its URL.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The kinds of events it receives.
    #[must_use]
    pub fn events(&self) -> &[EventKind] {
        &self.events
    }

    /// How long `lead.created` deliveries wait, if at all.
    #[must_use]
    pub fn lead_created_delay(&self) -> Option<LeadCreatedDelay> {
        self.lead_created_delay
    }

    /// The header sent on every delivery, if any.
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

    /// Until when the replaced secret signs (stored, whether or not that has passed).
    #[must_use]
    pub fn previous_secret_expires_at(&self) -> Option<OffsetDateTime> {
        self.previous_secret_expires_at
    }

    /// Since when it is disabled, if it is.
    #[must_use]
    pub fn disabled_at(&self) -> Option<OffsetDateTime> {
        self.disabled_at
    }

    /// Why the service disabled it (`None`: enabled, or disabled by the partner).
    #[must_use]
    pub fn disabled_reason(&self) -> Option<DisabledReason> {
        self.disabled_reason
    }

    /// When it was created.
    #[must_use]
    pub fn created_at(&self) -> OffsetDateTime {
        self.created_at
    }

    /// When it was last changed.
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
}

/// The event list: a non-empty subset of [`EventKind::SUBSCRIBABLE`] (duplicates dropped).
pub fn parse_events(items: &[String]) -> Result<Vec<EventKind>, ValueError> {
    static REASON: LazyLock<String> =
        LazyLock::new(|| format!("entries must be {}", EventKind::SUBSCRIBABLE_NAMES));
    let mut out = Vec::new();
    for i in items {
        let k = EventKind::parse(i).ok_or(ValueError::invalid("events", REASON.as_str()))?;
        if !out.contains(&k) {
            out.push(k);
        }
    }
    if out.is_empty() {
        return Err(ValueError::Missing("events"));
    }
    Ok(out)
}

/// A new endpoint, already parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEndpoint {
    /// Its URL, checked by [`crate::webhook::parse_endpoint_url`].
    pub url: url::Url,
    /// The kinds of events it receives (at least one).
    pub events: Vec<EventKind>,
    /// How long `lead.created` deliveries wait, if at all.
    pub lead_created_delay: Option<LeadCreatedDelay>,
    /// A header sent on every delivery.
    pub custom_header: Option<CustomHeader>,
    /// Generate a secret (returned once).
    pub secret: bool,
}

/// A partial update. `Some(None)` clears a nullable field; `secret: Some(true)` generates a new
/// secret (returned once), `Some(false)` removes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointPatch {
    /// A new URL.
    pub url: Option<url::Url>,
    /// New kinds of events (at least one).
    pub events: Option<Vec<EventKind>>,
    /// A new delay, or none.
    pub lead_created_delay: Option<Option<LeadCreatedDelay>>,
    /// A new custom header, or none.
    pub custom_header: Option<Option<CustomHeader>>,
    /// Generate a new secret, or remove it.
    pub secret: Option<bool>,
    /// `Some(true)` re-enables the endpoint; `Some(false)` disables it (reason `null`).
    pub enabled: Option<bool>,
    /// `Some(true)` ends the overlap of the previous secret at once.
    pub expire_previous: Option<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;

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
            ("X_Partner_Signature", "x"),
            ("x_partner_event", "x"),
            ("webhook-signature", "x"),
            ("Webhook_Id", "x"),
            ("Keep-Alive", "x"),
            ("Proxy-Connection", "x"),
            ("TE", "x"),
            ("Trailer", "x"),
            ("Upgrade", "x"),
            ("Expect", "x"),
            ("Content-Encoding", "x"),
            ("Content_Type", "x"),
            ("Proxy-Authorization", "x"),
            ("Cookie", "x"),
            ("Forwarded", "x"),
            ("X-Forwarded-For", "x"),
            ("x_forwarded_host", "x"),
            ("X-Real-IP", "x"),
            ("X_REAL_IP", "x"),
            ("Connection", "x"),
        ] {
            assert!(CustomHeader::parse(n, v).is_err(), "{n}: {v}");
        }
        for ok in [
            "X-Api-Key",
            "X_Api_Key",
            "Webhooks-Token",
            "X-Forwarder",
            "Tea",
            "Cookies",
        ] {
            assert!(CustomHeader::parse(ok, "v").is_ok(), "{ok}");
        }
        assert!(CustomHeader::parse(&"x".repeat(65), "v").is_err());
        assert!(CustomHeader::parse("X-Ok", &"v".repeat(1025)).is_err());
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

    #[test]
    fn a_header_value_is_hinted_by_its_last_four_characters_beyond_eight() {
        let hint = |v: &str| {
            CustomHeader::parse("X-Api-Key", v)
                .expect("header")
                .value_hint()
        };
        assert_eq!(hint("12345678"), "…");
        assert_eq!(hint("a"), "…");
        assert_eq!(hint("Bearer sk_live_9f3a"), "…9f3a");
        assert_eq!(hint("123456789"), "…6789");
    }

    #[test]
    fn the_events_message_lists_every_kind() {
        let err = parse_events(&["refund.created".into()]).map_err(|e| e.to_string());
        assert_eq!(
            err,
            Err(
                "events is invalid: entries must be lead.created, lead.enriched, \
                 order.created or payout.created"
                    .into()
            )
        );
        assert_eq!(
            parse_events(&EventKind::SUBSCRIBABLE.map(|k| k.as_str().to_owned())),
            Ok(EventKind::SUBSCRIBABLE.to_vec())
        );
    }
}
