//! The one error every port may return when its backing store fails.

/// A storage failure. Its text is for logs only: adapters put the cause here, and the HTTP
/// layer answers a generic 500 without echoing it.
#[derive(Debug, thiserror::Error)]
#[error("storage failure: {0}")]
pub struct RepoError(pub Box<dyn std::error::Error + Send + Sync>);

impl RepoError {
    /// Wraps any error as a storage failure.
    pub fn new(err: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self(err.into())
    }
}
