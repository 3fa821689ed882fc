//! The readiness port (`/readyz`): whether the store answers.

use async_trait::async_trait;

use crate::kernel::error::RepoError;

/// Whether the store answers (`/readyz`).
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait Readiness: Send + Sync {
    async fn ping(&self) -> Result<(), RepoError>;
}

crate::kernel::debug_port!(Readiness);
