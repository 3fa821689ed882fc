//! The one error every port may return when its backing store fails.

/// A storage failure. Its text is for logs only: adapters put the cause here (kept as the
/// error's `source()`, so a log can walk the chain), and the HTTP layer answers a generic 500
/// without echoing it.
#[derive(Debug, thiserror::Error)]
#[error("storage failure: {0}")]
pub struct RepoError(#[source] Box<dyn std::error::Error + Send + Sync>);

impl RepoError {
    /// Wraps any error as a storage failure.
    pub fn new(err: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self(err.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn the_cause_is_kept_as_the_source() {
        let e = RepoError::new(std::io::Error::other("connection reset"));
        assert_eq!(e.to_string(), "storage failure: connection reset");
        let source = e.source().map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("connection reset"));
    }
}
