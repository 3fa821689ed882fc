//! Webhook delivery worker (reqwest + rustls): claims, signs, sends, records.
//!
//! Deliveries are rows written with the change that caused them (the outbox). The worker is woken
//! as soon as one commits (the store's `LISTEN`, through [`Worker::waker`]), with a slow poll kept
//! as the fallback for retries falling due. It claims in batches, fairly: at most
//! `endpoint_concurrency` attempts per endpoint are in flight (and as many more claimed, ready to
//! go, so a fast endpoint is never idle waiting for the database), `concurrency` in all, and the
//! claim itself gives each endpoint at most its room, so one endpoint's backlog never takes every
//! slot. An endpoint that keeps timing out is backed off as a whole (a circuit breaker) so it
//! cannot hold slots that others could use.
//!
//! Claiming counts the attempt and leases the row under a fencing token; outcomes are recorded in
//! batches, each only while its row still holds that token. A worker that dies leaves its
//! deliveries due again after the lease (at-least-once, same `X-Partner-Delivery`), and a delivery
//! whose workers keep dying still ends `failed` after its budget. Payloads are built from the
//! domain's event model when claimed, serialized once, signed over those exact bytes, and posted
//! over HTTPS on reused connections without following redirects; only a 2xx ends a delivery.
//! Names resolve through a filter that refuses every address that is not global unicast, at
//! connect time, unless allowed. Logs and `lastError` carry short reasons, never a URL's query.
//!
//! One module per stage of a delivery:
//! - `client`: the HTTPS client and its guard (the filtering resolver, literal addresses), one
//!   send and how its failure is named;
//! - `connect`: the connector layer that makes a send's new connection before anything is
//!   written, so the endpoint-row check that vouches for it comes after (issue 23, N9c);
//! - `lanes`: each endpoint's share of the worker (in-flight slots, read-ahead, circuit breaker);
//! - `news`: how long news of written deliveries waits for room while every endpoint is full;
//! - `alarms`: when the retries this worker scheduled fall due (the loop wakes then, not at the
//!   fallback poll);
//! - `worker`: the loop that claims, builds payloads and starts attempts;
//! - `recorder`: outcomes written in batches under their leases;
//! - `give_back`: claims given back unattempted, in batches under their leases;
//! - `maintenance`: exhausted deliveries ended, old ones pruned.
#![cfg_attr(test, allow(clippy::expect_used, clippy::indexing_slicing))]

use std::time::Duration;

mod alarms;
mod changes;
mod checks;
mod client;
mod connect;
mod give_back;
mod lanes;
mod maintenance;
mod news;
mod recorder;
mod stamps;
mod worker;

pub use client::SystemAddressCheck;
pub use worker::Worker;

/// Worker settings.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Delays after the first, second… failed attempt.
    pub retry_schedule: Vec<Duration>,
    /// One attempt's timeout.
    pub timeout: Duration,
    /// Let endpoints resolve to loopback and private addresses (tests, development).
    pub allow_private: bool,
    /// Extra PEM root certificates trusted for deliveries.
    pub extra_roots_pem: Option<Vec<u8>>,
    /// How often the worker looks for due deliveries when nothing woke it (retries of other
    /// instances, or of before a restart, falling due; its own wake it when they fall due).
    pub poll_interval: Duration,
    /// Attempts in flight at once in this process.
    pub concurrency: usize,
    /// Attempts in flight at once per endpoint in this process.
    pub endpoint_concurrency: usize,
    /// Delivered and failed deliveries older than this are deleted.
    pub retention: Duration,
    /// Events older than this (that no delivery still refers to) are deleted: the events feed
    /// keeps them that long. Never shorter than `retention`.
    pub event_retention: Duration,
    /// How often exhausted deliveries are ended and old ones pruned.
    pub maintenance_interval: Duration,
    /// An endpoint whose attempts all failed for this long is disabled (`None`: never).
    pub disable_after: Option<Duration>,
}

/// Errors of building a worker.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("PARTNER_WEBHOOK_CA_FILE holds no usable PEM certificate")]
    Roots(#[source] Option<reqwest::Error>),
    #[error("cannot build the HTTPS client")]
    Client(#[source] reqwest::Error),
}
