//! Pure domain of the Partner Portal API.
//!
//! Everything a partner-facing rule depends on lives here, free of I/O: value types parsed at
//! the edge (`PartnerId`, `SubId`, `Nickname`, `Email`, `TokenText`…), entities, the services
//! that apply the contract's rules, and the ports (repository traits, [`Clock`], [`Random`])
//! that adapters implement. Other services reuse this crate, so its public surface is kept small:
//! construct values through their `parse` functions, and call the services.
//!
//! One module per aggregate (`account` with its tokens and authentication, `sub_account`, `lead`,
//! `order`, `payout`, `catalog`, `links`, `coupon`, `webhook`), each with its model (`mod.rs`),
//! its ports (`ports.rs`) and its service (`service.rs`), over a shared `kernel` that imports
//! nothing above it; `events` (the event kinds, typed events and the outbox) sits beside the
//! kernel, and `webhook` above the aggregates whose events it delivers. No two top-level modules
//! import each other, directly or not (`tests/layers.rs`).
//!
//! With the `mocks` feature every port has a `mockall` mock (`MockTokenRepo`, …; each
//! aggregate's transaction too, `MockLeadTransaction`, …, begun by `kernel::uow::BeginsOnce`), so
//! rules are unit-tested without a database.

#![cfg_attr(test, allow(clippy::expect_used, clippy::indexing_slicing))]

pub mod account;
pub mod catalog;
pub mod coupon;
pub mod events;
pub mod idempotency;
pub mod kernel;
pub mod lead;
pub mod links;
pub mod order;
pub mod payout;
pub mod rate_limit;
pub mod sub_account;
pub mod webhook;

pub use kernel::clock::{Clock, SystemClock};
pub use kernel::error::RepoError;
pub use kernel::random::{Random, SystemRandom};
