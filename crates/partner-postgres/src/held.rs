//! A keyed request's transaction, held open until its answer is known (extensions §8.3; the
//! request runs in an [`Ambient`] armed with its key, [`HeldTx::arm`]): its first statement or
//! unit of work claims the key in a transaction of its own, in the round trip of its `BEGIN`
//! (`idempotency::claim_in`), and that transaction becomes the held one: the claim lasts exactly
//! as long as the writes it guards. A unit of work's `commit` does not commit it but parks its
//! connection here, still in its transaction; the request's later statements (reads, and further
//! units of work as savepoints, released at their `commit`) run on that connection, so they see
//! its writes; and the idempotency layer writes the kept answer on it and commits once
//! ([`IdempotencyStore::finish`](partner_domain::idempotency::IdempotencyStore)). One
//! transaction, one WAL flush, one connection for the claim, the write and its answer
//! (docs/decisions.md, "Idempotency keys: claimed and kept inside the write's transaction").
//! Refused (the key held or answered), the claiming statement and every later one of the
//! request fail with [`KeyTaken`](partner_domain::idempotency::KeyTaken) and write nothing.
//!
//! A statement that finds the connection taken by another statement of the same request (two
//! at once) runs on a pooled connection of its own, as it would outside a scope. Should the
//! request end without the layer committing (a panic, the task dropped), the held connection is
//! dropped in its transaction: the pool discards it, and closing it rolls the writes back.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use diesel_async::AsyncPgConnection;

use crate::connect::Pooled;
use partner_domain::idempotency::{Existing, Ticket};
use partner_domain::kernel::ambient::Ambient;

/// What a held transaction's connection is doing.
#[allow(
    clippy::large_enum_variant,
    reason = "a pooled connection is moved as it is everywhere; boxing would allocate per statement"
)]
enum Slot {
    /// Nothing claimed in it: the key is claimed by the request's next statement or unit of
    /// work (unless refused).
    Empty,
    /// Parked, in its transaction, between two statements.
    Parked(Pooled),
    /// A statement of the request is using it ([`Conn`]).
    Taken,
    /// The claim's transaction is being rolled back after its first unit of work failed
    /// ([`Conn::roll_back_claim`]); empty once it is.
    RollingBack,
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
    /// The request's idempotency key, claimed by its first statement or unit of work.
    ticket: Ticket,
    /// What held the key when the request tried to claim it.
    refused: Mutex<Option<Existing>>,
    /// Whether the parked transaction holds the key and nothing else yet ([`HeldTx::is_fresh`]).
    fresh: AtomicBool,
}

/// What [`HeldTx::take`] found.
#[allow(clippy::large_enum_variant, reason = "as `Slot`")]
pub(crate) enum Took {
    /// The parked connection, now taken. `true` when it is fresh: its transaction holds the
    /// request's key and nothing else yet ([`HeldTx::is_fresh`]).
    Conn(Conn, bool),
    /// Nothing parked, and the request's key to claim: the slot is the caller's until it gives
    /// it a claimed connection ([`HeldTx::claimed`]) or gives up ([`HeldTx::unclaimed`],
    /// [`HeldTx::refuse`]).
    Claim(Arc<HeldTx>),
    /// The key was refused: the request writes nothing
    /// ([`KeyTaken`](partner_domain::idempotency::KeyTaken)).
    Refused,
    /// The claim's transaction is being rolled back: wait ([`HeldTx::settled`]), then take again.
    Wait,
    /// Taken by another statement of the request.
    Busy,
}

impl HeldTx {
    /// The transaction held for the request being run by `store`, if it runs in an ambient
    /// armed by `store` ([`HeldTx::arm`]).
    pub(crate) fn current(store: u64) -> Option<Arc<Self>> {
        let held = Ambient::current()?.held::<Self>()?;
        (held.store == store).then_some(held)
    }

    fn new(store: u64, ticket: Ticket) -> Self {
        Self {
            store,
            slot: Mutex::new(Slot::Empty),
            returned: tokio::sync::Notify::new(),
            deliveries: AtomicUsize::new(0),
            ticket,
            refused: Mutex::new(None),
            fresh: AtomicBool::new(false),
        }
    }

    /// Arms `ambient`, before the request runs in it, with the key its first statement or unit
    /// of work claims.
    pub(crate) fn arm(ambient: &Ambient, store: u64, ticket: &Ticket) {
        let _held = ambient.held_or_insert_with(|| Self::new(store, ticket.clone()));
    }

    /// The request's key.
    pub(crate) fn ticket(&self) -> &Ticket {
        &self.ticket
    }

    /// Records what held the key, and gives back the slot [`Took::Claim`] took, empty: the
    /// request writes nothing from now on.
    pub(crate) fn refuse(&self, holder: Existing) {
        *self.refused.lock().unwrap_or_else(PoisonError::into_inner) = Some(holder);
        self.unclaimed();
    }

    /// What held the key, if a claim was refused.
    pub(crate) fn refused(&self) -> Option<Existing> {
        self.refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Gives back the slot [`Took::Claim`] took, empty (the claim failed with the database).
    pub(crate) fn unclaimed(&self) {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        if matches!(*slot, Slot::Taken | Slot::RollingBack) {
            *slot = Slot::Empty;
        }
        drop(slot);
        self.returned.notify_one();
    }

    /// The connection whose transaction claimed the key, for the slot [`Took::Claim`] took:
    /// fresh until a unit of work commits into it ([`HeldTx::written`]). Parked when dropped.
    pub(crate) fn claimed(self: &Arc<Self>, obj: Pooled) -> Conn {
        self.fresh.store(true, Ordering::Relaxed);
        Conn {
            obj: Some(obj),
            home: Some(Arc::clone(self)),
        }
    }

    /// Whether the held transaction holds the key and nothing else yet: a unit of work then runs
    /// in it directly (no savepoint), and its failure rolls back only the claim
    /// ([`Conn::roll_back_claim`]).
    pub(crate) fn is_fresh(&self) -> bool {
        self.fresh.load(Ordering::Relaxed)
    }

    /// Something ran in the held transaction besides the claim: units of work are savepoints.
    pub(crate) fn written(&self) {
        self.fresh.store(false, Ordering::Relaxed);
    }

    /// Takes the parked connection for one statement or one nested unit of work.
    pub(crate) fn take(self: &Arc<Self>) -> Took {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        match std::mem::replace(&mut *slot, Slot::Taken) {
            Slot::Parked(obj) => Took::Conn(
                Conn {
                    obj: Some(obj),
                    home: Some(Arc::clone(self)),
                },
                self.is_fresh(),
            ),
            Slot::Empty if self.refused().is_some() => {
                *slot = Slot::Empty;
                Took::Refused
            }
            // The slot stays taken while the key is claimed.
            Slot::Empty => Took::Claim(Arc::clone(self)),
            Slot::Taken => Took::Busy,
            Slot::RollingBack => {
                *slot = Slot::RollingBack;
                Took::Wait
            }
        }
    }

    /// Waits until the slot is no longer being rolled back ([`Took::Wait`]).
    pub(crate) async fn settled(&self) {
        loop {
            if !matches!(
                *self.slot.lock().unwrap_or_else(PoisonError::into_inner),
                Slot::RollingBack
            ) {
                return;
            }
            self.returned.notified().await;
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
                    other @ (Slot::Taken | Slot::RollingBack) => *slot = other,
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

    /// For a unit of work that failed while running directly in the transaction that claimed
    /// the request's key (nothing else ran in it): rolls that transaction back, the claim with
    /// it, returns the connection to the pool and leaves the slot empty, so the request's next
    /// statement, or its end, claims the key again. Meanwhile the request's statements wait
    /// ([`Took::Wait`]), so none runs outside the claim, and none claims against this one's lock.
    pub(crate) fn roll_back_claim(mut self) {
        let (Some(home), Some(mut obj)) = (self.home.take(), self.obj.take()) else {
            return;
        };
        *home.slot.lock().unwrap_or_else(PoisonError::into_inner) = Slot::RollingBack;
        home.fresh.store(false, Ordering::Relaxed);
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            obj.close();
            home.unclaimed();
            return;
        };
        rt.spawn(async move {
            use diesel_async::{AnsiTransactionManager, TransactionManager};
            match AnsiTransactionManager::rollback_transaction(&mut *obj).await {
                Ok(()) => drop(obj),
                Err(e) => {
                    tracing::warn!(error = %e, "rolling back an idempotency claim failed");
                    obj.close();
                }
            }
            home.unclaimed();
        });
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
