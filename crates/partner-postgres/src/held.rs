//! A keyed request's transaction, held open until its answer is known (extensions §8.3; the
//! request runs in an [`Ambient`]): the request's first unit of work does not commit at its
//! `commit` but parks its connection here, still in its transaction; the request's later
//! statements (reads, and further units of work as savepoints) run on that connection, so they
//! see its writes; and the idempotency layer writes the kept answer on it and commits once
//! ([`IdempotencyStore::finish_held`](partner_domain::idempotency::IdempotencyStore)). One
//! transaction, one WAL flush, one connection for the write and its answer, instead of a second
//! transaction (and flush) for the answer (docs/decisions.md, "Idempotency keys: the answer
//! commits with the write").
//!
//! A statement that finds the connection taken by another statement of the same request (two
//! at once) runs on a pooled connection of its own, as it would outside a scope. Should the
//! request end without the layer committing (a panic, the task dropped), the held connection is
//! dropped in its transaction: the pool discards it, and closing it rolls the writes back.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use diesel_async::AsyncPgConnection;

use crate::connect::Pooled;
use partner_domain::kernel::ambient::Ambient;

/// What a held transaction's connection is doing.
#[allow(
    clippy::large_enum_variant,
    reason = "a pooled connection is moved as it is everywhere; boxing would allocate per statement"
)]
enum Slot {
    /// No unit of work committed into it yet.
    Empty,
    /// Parked, in its transaction, between two statements.
    Parked(Pooled),
    /// A statement of the request is using it ([`Conn`]).
    Taken,
}

/// The transaction a request holds open ([`Ambient::held_or_insert_with`]).
pub(crate) struct HeldTx {
    /// The store whose connection it is (its pools' id).
    store: u64,
    slot: Mutex<Slot>,
    /// Told when a [`Conn`] puts the connection back.
    returned: tokio::sync::Notify,
    /// Deliveries written in it, announced once it commits.
    deliveries: AtomicUsize,
}

/// What [`HeldTx::take`] found.
#[allow(clippy::large_enum_variant, reason = "as `Slot`")]
pub(crate) enum Took {
    /// The parked connection, now taken.
    Conn(Conn),
    /// Nothing parked: the first unit of work may park its connection ([`HeldTx::park`]).
    Empty(Arc<HeldTx>),
    /// Taken by another statement of the request, or not this store's.
    Busy,
}

impl HeldTx {
    /// The transaction held for the request being run by `store`, if it runs in an ambient.
    pub(crate) fn current(store: u64) -> Option<Arc<Self>> {
        let held = Ambient::current()?.held_or_insert_with(|| Self {
            store,
            slot: Mutex::new(Slot::Empty),
            returned: tokio::sync::Notify::new(),
            deliveries: AtomicUsize::new(0),
        })?;
        (held.store == store).then_some(held)
    }

    /// Takes the parked connection for one statement or one nested unit of work.
    pub(crate) fn take(self: &Arc<Self>) -> Took {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        match std::mem::replace(&mut *slot, Slot::Taken) {
            Slot::Parked(obj) => Took::Conn(Conn {
                obj: Some(obj),
                home: Some(Arc::clone(self)),
            }),
            Slot::Empty => {
                *slot = Slot::Empty;
                Took::Empty(Arc::clone(self))
            }
            Slot::Taken => Took::Busy,
        }
    }

    /// Parks `conn`, in its open transaction, unless a connection is parked or taken already
    /// (then `conn` comes back, to be committed by its owner).
    #[allow(
        clippy::result_large_err,
        reason = "as `Slot`: the connection comes back by value"
    )]
    pub(crate) fn park(&self, mut conn: Conn) -> Result<(), Conn> {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        if !matches!(*slot, Slot::Empty) || conn.home.is_some() {
            return Err(conn);
        }
        match conn.obj.take() {
            Some(obj) => {
                *slot = Slot::Parked(obj);
                Ok(())
            }
            None => Err(conn),
        }
    }

    /// Counts deliveries written in the held transaction.
    pub(crate) fn add_deliveries(&self, n: usize) {
        self.deliveries.fetch_add(n, Ordering::Relaxed);
    }

    /// Deliveries written in it.
    pub(crate) fn deliveries(&self) -> usize {
        self.deliveries.load(Ordering::Relaxed)
    }

    /// The parked connection, for good (waiting while a statement of the request still uses
    /// it): `None` when nothing was parked.
    pub(crate) async fn finish(&self) -> Option<Pooled> {
        loop {
            {
                let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
                match std::mem::replace(&mut *slot, Slot::Empty) {
                    Slot::Parked(obj) => return Some(obj),
                    Slot::Empty => return None,
                    Slot::Taken => *slot = Slot::Taken,
                }
            }
            // `notify_one` keeps a permit when nobody waits yet: no wake-up is lost.
            self.returned.notified().await;
        }
    }

    fn put_back(&self, obj: Pooled) {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        *slot = Slot::Parked(obj);
        drop(slot);
        self.returned.notify_one();
    }
}

impl Drop for HeldTx {
    /// Rolls back a transaction the request left uncommitted (it panicked, or its answer was
    /// not to be sent), so its locks go at once, then returns the connection to the pool.
    /// Without a runtime the connection is dropped in its transaction: the pool discards it.
    fn drop(&mut self) {
        let slot = self.slot.get_mut().unwrap_or_else(PoisonError::into_inner);
        let Slot::Parked(mut conn) = std::mem::replace(slot, Slot::Empty) else {
            return;
        };
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                use diesel_async::{AnsiTransactionManager, TransactionManager};
                if let Err(e) = AnsiTransactionManager::rollback_transaction(&mut *conn).await {
                    tracing::warn!(error = %e, "rolling back a held transaction failed");
                }
            });
        }
    }
}

/// A connection: pooled, or the request's held one (put back when dropped).
pub(crate) struct Conn {
    /// `None` only while dropping.
    obj: Option<Pooled>,
    home: Option<Arc<HeldTx>>,
}

impl Conn {
    /// A pooled connection.
    pub(crate) fn pooled(obj: Pooled) -> Self {
        Self {
            obj: Some(obj),
            home: None,
        }
    }

    /// The held transaction this connection belongs to, if it is one's.
    pub(crate) fn held(&self) -> Option<&Arc<HeldTx>> {
        self.home.as_ref()
    }
}

impl std::ops::Deref for Conn {
    type Target = AsyncPgConnection;

    fn deref(&self) -> &AsyncPgConnection {
        match &self.obj {
            Some(obj) => obj,
            None => unreachable!("a connection is taken out only when dropped"),
        }
    }
}

impl std::ops::DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut AsyncPgConnection {
        match &mut self.obj {
            Some(obj) => obj,
            None => unreachable!("a connection is taken out only when dropped"),
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let (Some(home), Some(obj)) = (self.home.take(), self.obj.take()) {
            home.put_back(obj);
        }
    }
}
