//! Units of work: a service that writes opens one transaction, makes its writes and publishes the
//! events they cause through it, and commits once, so a state change and its outbox rows are stored
//! together or not at all.
//!
//! The kernel knows no aggregate, so the transaction is a type parameter: each aggregate declares
//! in its `ports.rs` the writes it needs (`LeadWrites`, …) and a transaction trait combining them
//! with the outbox (`events::Outbox`) and [`Commit`]; the adapter's one transaction type
//! implements them all, and its store is a `UnitOfWork` of each.
//!
//! With the `mocks` feature, `BeginsOnce` hands a service the one mock transaction whose
//! expectations say what it writes, publishes and commits:
//!
//! ```
//! # #[cfg(feature = "mocks")] {
//! use partner_domain::kernel::uow::{BeginsOnce, UnitOfWork};
//! use partner_domain::payout::ports::{MockPayoutTransaction, PayoutTransaction};
//!
//! let mut tx = MockPayoutTransaction::new();
//! tx.expect_commit().times(0);
//! let uow: BeginsOnce<dyn PayoutTransaction> = BeginsOnce::new(Box::new(tx));
//! let _: &dyn UnitOfWork<dyn PayoutTransaction> = &uow;
//! # }
//! ```

use async_trait::async_trait;

use crate::kernel::error::RepoError;

/// Begins transactions of type `Tx` (e.g. `dyn LeadTransaction`).
#[async_trait]
pub trait UnitOfWork<Tx: ?Sized + Send>: Send + Sync {
    /// A transaction on a connection of its own. MUST NOT be shared with other callers.
    async fn begin(&self) -> Result<Box<Tx>, RepoError>;
}

/// The end of a transaction.
///
/// Contract for implementations:
/// - every write made through the transaction, and the outbox rows of every event published
///   through it, MUST become visible together at [`Commit::commit`], or not at all;
/// - dropping it without `commit` (an early return, an error, a panic) MUST roll it back;
/// - a method that answers `Err` leaves the transaction unusable: the caller drops it;
/// - workers MUST learn of deliveries written through the outbox only after the commit.
#[async_trait]
pub trait Commit: Send {
    /// Commits every write and event of this transaction.
    async fn commit(self: Box<Self>) -> Result<(), RepoError>;
}

impl<Tx: ?Sized + Send> std::fmt::Debug for dyn UnitOfWork<Tx> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UnitOfWork")
    }
}

/// A unit of work for tests: it begins the one transaction it was given (a mock whose
/// expectations say what the service writes, publishes and commits), and fails a second `begin`.
#[cfg(any(test, feature = "mocks"))]
pub struct BeginsOnce<Tx: ?Sized>(std::sync::Mutex<Option<Box<Tx>>>);

#[cfg(any(test, feature = "mocks"))]
impl<Tx: ?Sized> BeginsOnce<Tx> {
    /// Begins `tx` once.
    pub fn new(tx: Box<Tx>) -> Self {
        Self(std::sync::Mutex::new(Some(tx)))
    }

    /// Begins nothing: a service that opens a transaction fails.
    pub fn never() -> Self {
        Self(std::sync::Mutex::new(None))
    }
}

#[cfg(any(test, feature = "mocks"))]
impl<Tx: ?Sized> std::fmt::Debug for BeginsOnce<Tx> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BeginsOnce")
    }
}

#[cfg(any(test, feature = "mocks"))]
#[async_trait]
impl<Tx: ?Sized + Send> UnitOfWork<Tx> for BeginsOnce<Tx> {
    async fn begin(&self) -> Result<Box<Tx>, RepoError> {
        self.0
            .lock()
            .ok()
            .and_then(|mut tx| tx.take())
            .ok_or_else(|| RepoError::new("no transaction to begin"))
    }
}
