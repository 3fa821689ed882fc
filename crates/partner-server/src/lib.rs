//! The `partner-server` binary's library half: configuration and the wiring of adapters to
//! the domain's ports. Kept as a library so integration tests start the very same server.

#![cfg_attr(test, allow(clippy::expect_used, clippy::indexing_slicing))]

pub mod config;
pub mod demo;
pub mod edge;
pub mod logging;
pub mod observability;
pub mod openapi;
pub mod shutdown;
pub mod startup;

pub use config::Config;
pub use startup::Application;

/// Re-exported for test harnesses that create and drop throwaway databases.
pub use partner_postgres::drop_database;
