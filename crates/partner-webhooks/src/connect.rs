//! The check that vouches for a send is taken once the connection the request is written on is
//! up (issue 23, N9c). The endpoint-row check of `checks` runs before the send; a send that finds
//! an idle pooled connection writes at once, so that check vouches for it. A send that needs a
//! new connection (DNS, TCP, TLS: as long as the receiver likes, up to the attempt's timeout, so
//! an old URL's owner could hold it past a change's answer) writes nothing: the connector layer
//! here makes the connection in a task of its own and fails the send at once with [`Connecting`].
//! The worker waits for the connection, checks the endpoint's row again when its answer is no
//! longer fresh, and only then sends again; the connection made is handed to that send
//! (or to nobody, when an idle pooled connection serves it first: it is then dropped).
//!
//! Why not let the send wait for its connection and check inside the connector: hyper-util's
//! client races the connect against the pool, and when another request returns a connection to
//! the pool first, the waiting request is written on that one at once, at any moment of the
//! connect, after no fresh check. Failing the send before anything is written leaves no such
//! race: the second send either finds an idle connection at once or takes the one made.
//!
//! The attempt is known to the connector through a task-local ([`Attempt::scope`]): outside
//! one (a connect hyper-util finishes in the background) the layer connects as usual.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::oneshot;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A connection made for an attempt: reqwest's connection type, which cannot be named here.
type Made = Box<dyn Any + Send>;

tokio::task_local! {
    static ATTEMPT: Attempt;
}

/// The send failed before writing anything: it needs a new connection, which is being made for
/// it ([`Attempt::connected`]).
#[derive(Debug, thiserror::Error)]
#[error("a new connection is being made for this attempt; nothing was written")]
pub(crate) struct Connecting;

/// Making the connection took longer than the attempt's timeout.
#[derive(Debug, thiserror::Error)]
#[error("connecting timed out")]
pub(crate) struct ConnectTimedOut;

#[derive(Debug, Default)]
struct State {
    /// The connection being made for this attempt.
    connecting: Option<oneshot::Receiver<Result<Made, BoxError>>>,
    /// The connection made for this attempt, for its next send.
    made: Option<Made>,
}

/// One attempt's sends, as the connector sees them.
#[derive(Debug, Clone, Default)]
pub(crate) struct Attempt(Arc<Mutex<State>>);

impl Attempt {
    fn state(&self) -> MutexGuard<'_, State> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs `send` as one of this attempt's sends.
    pub(crate) async fn scope<F: Future>(&self, send: F) -> F::Output {
        ATTEMPT.scope(self.clone(), send).await
    }

    /// Waits for the connection a send of this attempt began (it failed with [`Connecting`]);
    /// once made, it is the next send's. `Err`: it could not be made (the attempt's failure).
    pub(crate) async fn connected(&self) -> Result<(), BoxError> {
        let Some(connecting) = self.state().connecting.take() else {
            return Err("no connection was being made".into());
        };
        let made = connecting
            .await
            .map_err(|_| BoxError::from("the connecting task ended"))??;
        self.state().made = Some(made);
        Ok(())
    }
}

/// Whether `e`'s chain holds a [`Connecting`]: nothing was written.
pub(crate) fn is_connecting(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut err = Some(e);
    while let Some(e) = err {
        if e.is::<Connecting>() {
            return true;
        }
        err = e.source();
    }
    false
}

/// The layer around reqwest's connector.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnectLayer {
    /// How long making a connection may take (the attempt's timeout).
    pub(crate) timeout: Duration,
}

impl<S> tower_layer::Layer<S> for ConnectLayer {
    type Service = Connect<S>;

    fn layer(&self, inner: S) -> Connect<S> {
        Connect {
            inner,
            timeout: self.timeout,
        }
    }
}

/// See [`ConnectLayer`].
#[derive(Debug, Clone)]
pub(crate) struct Connect<S> {
    inner: S,
    timeout: Duration,
}

impl<S, R> tower_service::Service<R> for Connect<S>
where
    S: tower_service::Service<R, Error = BoxError>,
    S::Response: Send + 'static,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, dst: R) -> Self::Future {
        let Ok(attempt) = ATTEMPT.try_with(Attempt::clone) else {
            // Not an attempt's send: a connect finishing in the background, into the pool.
            return Box::pin(self.inner.call(dst));
        };
        let mut state = attempt.state();
        if let Some(made) = state.made.take() {
            // The attempt's send after its connection was made (and checked for): written now.
            return Box::pin(async move {
                made.downcast::<S::Response>()
                    .map(|conn| *conn)
                    .map_err(|_| BoxError::from("not a connection"))
            });
        }
        // Made apart from the send, which writes nothing now.
        let (tx, rx) = oneshot::channel();
        state.connecting = Some(rx);
        drop(state);
        let connecting = self.inner.call(dst);
        let timeout = self.timeout;
        tokio::spawn(async move {
            let made = match tokio::time::timeout(timeout, connecting).await {
                Ok(made) => made.map(|conn| Box::new(conn) as Made),
                Err(_) => Err(Box::new(ConnectTimedOut) as BoxError),
            };
            let _ = tx.send(made);
        });
        Box::pin(async { Err(Box::new(Connecting) as BoxError) })
    }
}
