//! The readiness port (`/readyz`): whether the store answers.
//!
//! ```
//! use async_trait::async_trait;
//! use partner_domain::kernel::readiness::Readiness;
//! use partner_domain::RepoError;
//!
//! /// A store that always answers.
//! struct AlwaysReady;
//!
//! #[async_trait]
//! impl Readiness for AlwaysReady {
//!     async fn ping(&self) -> Result<(), RepoError> {
//!         Ok(())
//!     }
//! }
//! # let _: &dyn Readiness = &AlwaysReady;
//! ```

use async_trait::async_trait;

use crate::kernel::error::RepoError;

/// Whether the store answers (`/readyz`).
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait Readiness: Send + Sync {
    /// `Ok` when the store answers a trivial query.
    async fn ping(&self) -> Result<(), RepoError>;
}

crate::kernel::debug_port!(Readiness);
