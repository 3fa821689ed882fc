//! Webhooks: partners' endpoints and the deliveries of events to them.
//!
//! - `endpoint`: an endpoint's settings and their rules, as stored and as shown;
//! - `address`: which addresses count as internal (never delivered to), and the URLs accepted;
//! - `signature`: `t=<unix>,v1=<hex>`, HMAC-SHA256 of `"<t>.<raw body>"` under the endpoint
//!   secret, the scheme Stripe's SDKs verify;
//! - `retry`: the retry schedule and a receiver's `Retry-After`;
//! - `delivery`: a delivery's status and log, what a worker claims and records, the signed body;
//! - `feed`: the events feed (extensions.md §8.1): its pages, cursors and retention;
//! - `payload`: a delivery's `data`, from the record its event is about;
//! - `health`: when the service disables an endpoint by itself;
//! - `budget`: how many webhook actions (`test`, `resend`, `recover`) a partner may call;
//! - `service`: managing endpoints and the delivery log, for partners and the operator.
//!
//! This module sits above the aggregates whose events it delivers (lead, order, payout): it reads
//! their records to build payloads; they know only `events`.
//!
//! ```
//! use partner_domain::webhook::{LeadCreatedDelay, is_internal, parse_endpoint_url};
//!
//! assert!(parse_endpoint_url("https://hooks.acme.test/partner", false).is_ok());
//! assert!(parse_endpoint_url("http://hooks.acme.test/partner", false).is_err()); // https only
//! assert!(is_internal("10.0.0.7".parse()?));
//! assert_eq!(LeadCreatedDelay::parse("5m").map(LeadCreatedDelay::duration),
//!     Some(partner_domain::time::Duration::minutes(5)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub(crate) mod address;
pub(crate) mod budget;
pub(crate) mod delivery;
pub(crate) mod endpoint;
pub mod feed;
pub(crate) mod health;
pub mod hourly;
pub(crate) mod payload;
pub mod ports;
pub(crate) mod retry;
pub mod service;
pub(crate) mod signature;
pub(crate) mod verifier;

pub use address::{is_internal, parse_endpoint_url};
pub use budget::{ACTION_CALLS, ACTION_WINDOW, ActionBudget};
pub use delivery::{
    ATTEMPT_LOG_LIMIT, AttemptLogEntry, AttemptOutcome, ClaimBatch, ClaimRequest, ClaimedDelivery,
    DeliveryDetail, DeliveryFilter, DeliveryInfo, DeliveryQuery, DeliveryStatus, RECOVER_LIMIT,
    RECOVER_WINDOW, RowHint, SUBJECT_UNREADABLE, UnreadableDelivery, delivery_body,
    parse_event_filter, parse_statuses,
};
pub use endpoint::{
    CustomHeader, DisabledReason, ENDPOINT_DISABLED, EndpointParts, EndpointPatch,
    LeadCreatedDelay, MAX_ENDPOINTS, NewEndpoint, ShownEndpoint, WebhookEndpoint, parse_events,
};
pub use feed::{EventFeed, FeedError, FeedEvent, FeedPage, FeedQuery, FeedRead};
pub use health::{Attempted, EndpointHealth, HealthChange};
pub use payload::{Payload, SubjectIds, Subjects};
pub use retry::{
    NextStep, RETRY_AFTER_CAP, after_failure, attempt_budget, honour_retry_after, next_retry,
    parse_retry_after,
};
pub use service::{EndpointError, WebhookService};
pub use signature::{
    SIGNATURE_TOLERANCE, WebhookSecret, signature_header, signature_header_with, standard_signature,
};
pub use verifier::{VerifyError, WebhookVerifier};
