//! A request's ambient: what a store may keep for the length of one request, found by the code
//! the request runs without being passed down to it (a task-local value, with no runtime).
//!
//! The idempotency layer runs a keyed request [`Ambient::scope`]d: the store then holds the
//! request's committed unit of work open in it, so the request's kept answer is written in the
//! same transaction as its writes and committed with them (docs/decisions.md, "Idempotency
//! keys: the answer commits with the write"). Outside a scope [`Ambient::current`] is `None`
//! and nothing changes.
//!
//! ```
//! use std::sync::Arc;
//! use partner_domain::kernel::ambient::Ambient;
//!
//! let ambient = Ambient::new();
//! let seen = futures_util::FutureExt::now_or_never(ambient.scope(async {
//!     Ambient::current().map(|a| a.held_or_insert_with(|| 7_u32).map(|n| *n))
//! }));
//! assert_eq!(seen, Some(Some(Some(7))));
//! assert_eq!(ambient.held::<u32>().map(|n| *n), Some(7));
//! assert!(Ambient::current().is_none(), "only inside the scope");
//! ```

use std::any::Any;
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

type Held = Arc<dyn Any + Send + Sync>;

/// One request's ambient: at most one value a store holds for it.
#[derive(Default)]
pub struct Ambient {
    held: Mutex<Option<Held>>,
}

impl std::fmt::Debug for Ambient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ambient(..)")
    }
}

std::thread_local! {
    /// The ambient of the future being polled on this thread, if it runs in a scope.
    static CURRENT: RefCell<Option<Arc<Ambient>>> = const { RefCell::new(None) };
}

impl Ambient {
    /// A new, empty ambient.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// The ambient of the request being run, if it runs in [`Ambient::scope`].
    pub fn current() -> Option<Arc<Self>> {
        CURRENT.with_borrow(Clone::clone)
    }

    /// `fut`, run with `self` as [`Ambient::current`] whenever it is polled.
    pub fn scope<F: Future>(self: &Arc<Self>, fut: F) -> Scoped<F> {
        Scoped {
            ambient: Arc::clone(self),
            fut: Box::pin(fut),
        }
    }

    /// The value held, made by `init` if none is: `None` when a value of another type is held.
    pub fn held_or_insert_with<T: Any + Send + Sync>(
        &self,
        init: impl FnOnce() -> T,
    ) -> Option<Arc<T>> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let value = held.get_or_insert_with(|| Arc::new(init()));
        Arc::clone(value).downcast::<T>().ok()
    }

    /// The value held, if it is a `T`.
    pub fn held<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        let held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.as_ref()
            .and_then(|v| Arc::clone(v).downcast::<T>().ok())
    }
}

/// A future run in an [`Ambient`] ([`Ambient::scope`]).
pub struct Scoped<F> {
    ambient: Arc<Ambient>,
    fut: Pin<Box<F>>,
}

impl<F> std::fmt::Debug for Scoped<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Scoped(..)")
    }
}

/// Puts back the ambient that was current before a poll, even when the poll panics.
struct Restore(Option<Arc<Ambient>>);

impl Drop for Restore {
    fn drop(&mut self) {
        let before = self.0.take();
        CURRENT.with_borrow_mut(|c| *c = before);
    }
}

impl<F: Future> Future for Scoped<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        let before = CURRENT.with_borrow_mut(|c| c.replace(Arc::clone(&this.ambient)));
        let _restore = Restore(before);
        this.fut.as_mut().poll(cx)
    }
}
