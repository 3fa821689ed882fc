//! The one error every port may return when its backing store fails.
//!
//! ```
//! use partner_domain::kernel::error::{RepoError, is_store_unavailable};
//!
//! let down = RepoError::unavailable("connection refused");
//! assert!(down.is_unavailable() && is_store_unavailable(&down));
//! assert!(!is_store_unavailable(&RepoError::new("duplicate key")));
//! ```

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

    /// A failure because the store cannot be reached (refused, closed, no connection within
    /// the pool's wait): answered `503 unavailable` with `Retry-After: 1` (extensions §11), not
    /// 500, since retrying soon is the right thing for a client to do.
    pub fn unavailable(err: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self(Box::new(StoreUnavailable(err.into())))
    }

    /// Whether this is [`RepoError::unavailable`].
    pub fn is_unavailable(&self) -> bool {
        self.0.is::<StoreUnavailable>()
    }
}

/// The cause of a [`RepoError::unavailable`]; found in an error's `source()` chain by
/// [`is_store_unavailable`] however many domain errors wrap it.
#[derive(Debug, thiserror::Error)]
#[error("the store cannot be reached: {0}")]
pub struct StoreUnavailable(#[source] Box<dyn std::error::Error + Send + Sync>);

/// Whether `e`, or an error in its `source()` chain, is the store being unreachable.
pub fn is_store_unavailable(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(err) = next {
        if err.is::<StoreUnavailable>()
            || err
                .downcast_ref::<RepoError>()
                .is_some_and(RepoError::is_unavailable)
        {
            return true;
        }
        next = err.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn an_unreachable_store_is_recognised_through_wrapping_errors() {
        #[derive(Debug, thiserror::Error)]
        enum Transparent {
            #[error(transparent)]
            Repo(#[from] RepoError),
        }
        #[derive(Debug, thiserror::Error)]
        enum Named {
            #[error("listing failed")]
            Repo(#[from] RepoError),
        }
        let down = || RepoError::unavailable(std::io::Error::other("connection refused"));
        assert!(down().is_unavailable());
        assert!(is_store_unavailable(&down()));
        assert!(is_store_unavailable(&Transparent::from(down())));
        assert!(is_store_unavailable(&Named::from(down())));
        let other = RepoError::new(std::io::Error::other("syntax error"));
        assert!(!other.is_unavailable());
        assert!(!is_store_unavailable(&Transparent::from(other)));
    }

    #[test]
    fn the_cause_is_kept_as_the_source() {
        let e = RepoError::new(std::io::Error::other("connection reset"));
        assert_eq!(e.to_string(), "storage failure: connection reset");
        let source = e.source().map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("connection reset"));
    }
}
