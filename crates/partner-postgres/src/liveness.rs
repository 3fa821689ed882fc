//! Whether the database answers at all: a liveness probe (extensions §11; issue 23, N12 against
//! §11).
//!
//! [`connect`](crate::connect)'s bound on each use of a pooled connection gives up a frozen one
//! only after `PARTNER_DB_HOLD_TIMEOUT` (5 s by default), and its TCP settings see nothing while
//! the peer's kernel keeps acknowledging: a PostgreSQL whose processes are stopped (`SIGSTOP`, a
//! paused VM or container), or a proxy that stops forwarding but keeps both ends open. Requests
//! then waited those 5 s for their 503, where §11 allows 1 s.
//!
//! The probe: a thread of its own (its own runtime, so a busy request runtime cannot make it late)
//! keeps a connection of its own ([`connect::config`](crate::connect): the same TCP settings,
//! outside the pools) and sends `SELECT 1` on it [`PROBE_EVERY`] after each answer. When one is
//! not answered within the threshold (`PARTNER_DB_PROBE_TIMEOUT`, default [`DEFAULT_PROBE`]), or
//! a connection cannot even be opened (refused, reset, no answer within the threshold), the
//! database is marked unreachable:
//!
//! - every pooled connection of the store is closed at once, checked out or idle
//!   ([`connect::close_all`](crate::connect)): the statements waiting on them fail as a lost
//!   connection (`unavailable`: 503 with `Retry-After: 1`);
//! - every checkout fails at once while the mark holds, and one waiting for a connection (the
//!   pool opening one on the frozen database) gives up when the mark is set: `/readyz`, which
//!   checks out like any call, answers 503;
//! - the probe opens a new connection (bounded by the threshold, again and again) and the mark is
//!   lifted by the first answer: requests, the delivery worker's claims (it polls every 0.5 s and
//!   is woken by its listener, which reconnects by itself) open fresh connections.
//!
//! A request that arrived at the freeze is answered by [`PROBE_EVERY`] + the threshold at worst
//! (the last answer came just before the freeze, the next probe went out 200 ms later and waited
//! the threshold): 800 ms by default, within §11's second. A server that answers with an error
//! (too many connections, the database is starting up) is not silent: it sets no mark and lifts
//! one (the pools then find out for themselves whether they get a connection).
//!
//! The threshold is a trade-off (`docs/decisions.md`, "The database liveness probe"): a lower
//! one answers sooner, and a busy database that answers late is taken for a frozen one, which
//! fails every call in flight. `SELECT 1` needs no lock and no I/O, only the backend's turn on a
//! CPU: usually well under a millisecond, and at load 20-22 on 2 cores no probe of 426 took
//! 100 ms (`db_probe_duration_seconds` shows the answers' times). 600 ms leaves that margin
//! sixfold.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// How long the probe's statement may go unanswered before the database is marked unreachable
/// (`PARTNER_DB_PROBE_TIMEOUT`'s default).
pub const DEFAULT_PROBE: Duration = Duration::from_millis(600);
/// The pause between an answer and the next probe.
const PROBE_EVERY: Duration = Duration::from_millis(200);
/// The pause before another connection attempt after one failed without a word from the server
/// (refused, reset).
const RETRY_AFTER: Duration = Duration::from_millis(100);
/// The pause before another connection attempt after the server answered one with an error (the
/// mark is not set then: nothing waits for the probe, and it takes a slot of a full cluster
/// seldom).
const SERVER_SAID_NO: Duration = Duration::from_secs(1);
/// The probe's statement.
const PROBE_SQL: &str = "SELECT 1";
/// Why a call fails while the database is marked unreachable.
pub(crate) const UNREACHABLE: &str =
    "the database does not answer (the liveness probe marked it unreachable)";

/// The probe's threshold (`PARTNER_DB_PROBE_TIMEOUT`); `None`: no probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe(pub Option<Duration>);

impl Default for Probe {
    fn default() -> Self {
        Self(Some(DEFAULT_PROBE))
    }
}

/// The mark a store's calls look at: `true` while the database answers (or no probe runs).
pub(crate) struct Liveness {
    up: tokio::sync::watch::Sender<bool>,
    /// The store's id ([`crate::connect::close_all`]).
    store: u64,
}

impl Liveness {
    pub(crate) fn new(store: u64) -> Self {
        Self {
            up: tokio::sync::watch::Sender::new(true),
            store,
        }
    }

    /// Follows the mark.
    pub(crate) fn subscribe(&self) -> tokio::sync::watch::Receiver<bool> {
        self.up.subscribe()
    }

    /// Whether the database is taken to answer.
    pub(crate) fn is_up(&self) -> bool {
        *self.up.borrow()
    }

    fn mark_down(&self, why: &str) {
        if self.up.send_if_modified(|up| std::mem::replace(up, false)) {
            let closed = crate::connect::close_all(self.store);
            metrics::counter!("db_unreachable_total").increment(1);
            tracing::warn!(
                closed,
                why,
                "the database does not answer; marked unreachable: its pooled connections closed, calls answer 503 until it answers again"
            );
        }
    }

    fn mark_up(&self, down_for: Option<Duration>) {
        if self.up.send_if_modified(|up| !std::mem::replace(up, true)) {
            tracing::info!(
                down_ms = down_for.map(|d| d.as_millis()),
                "the database answers again"
            );
        }
    }
}

/// Starts the probe of the database at `url` for `liveness` on a thread of its own; it ends
/// once `liveness` is dropped (the store is gone).
pub(crate) fn start(url: &str, liveness: &Arc<Liveness>, within: Duration) {
    let config = match crate::connect::config(url, &[]) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "the database liveness probe did not start");
            return;
        }
    };
    let weak = Arc::downgrade(liveness);
    let spawned = std::thread::Builder::new()
        .name("pg-liveness".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            match rt {
                Ok(rt) => rt.block_on(probe(config, weak, within)),
                Err(e) => {
                    tracing::error!(error = %e, "the database liveness probe did not start");
                }
            }
        });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "the database liveness probe did not start");
    }
}

/// The probe's loop: connect, then `SELECT 1` every [`PROBE_EVERY`] after its answer, each
/// within `within`; a connection lost is opened again at once.
async fn probe(config: tokio_postgres::Config, liveness: Weak<Liveness>, within: Duration) {
    // Since when the database has been marked unreachable, for the log.
    let mut down_since: Option<Instant> = None;
    let down = |why: String, since: &mut Option<Instant>| {
        if let Some(l) = liveness.upgrade() {
            l.mark_down(&why);
            since.get_or_insert_with(Instant::now);
        }
    };
    loop {
        if liveness.strong_count() == 0 {
            return;
        }
        let opened = tokio::time::timeout(within, config.connect(tokio_postgres::NoTls)).await;
        let (client, connection) = match opened {
            Ok(Ok(pair)) => pair,
            // The server answered, with an error (too many connections, starting up, shutting
            // down, authentication): not silent, so it sets no mark, and it lifts one: the
            // database answers, and whether a call gets a connection is the pool's to find out
            // (a 503 at once when it cannot, as without a probe). Kept set, a cluster filled by
            // other clients while the pools had given their slots up would have kept every call
            // at 503 for as long as those clients held them (attack9).
            Ok(Err(e)) if e.as_db_error().is_some() => {
                if e.code() == Some(&tokio_postgres::error::SqlState::INVALID_CATALOG_NAME) {
                    // The database was dropped (a test's teardown, a store outliving it): there
                    // is nothing left to watch.
                    tracing::warn!(error = %e, "the database liveness probe stops");
                    return;
                }
                tracing::debug!(error = %e, "the liveness probe's connection was refused by the server");
                if let Some(l) = liveness.upgrade() {
                    l.mark_up(down_since.take().map(|t| t.elapsed()));
                }
                tokio::time::sleep(SERVER_SAID_NO).await;
                continue;
            }
            Ok(Err(e)) => {
                down(format!("cannot connect: {e}"), &mut down_since);
                tokio::time::sleep(RETRY_AFTER).await;
                continue;
            }
            Err(_) => {
                down(
                    format!("no connection within {} ms", within.as_millis()),
                    &mut down_since,
                );
                continue;
            }
        };
        // Aborted when the loop below ends: dropping the connection closes its socket, even one
        // whose peer no longer reads.
        let driver = tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "the liveness probe's connection ended");
            }
        });
        loop {
            let Some(l) = liveness.upgrade() else {
                driver.abort();
                return;
            };
            let asked = Instant::now();
            let query = client.simple_query(PROBE_SQL);
            let mut query = std::pin::pin!(query);
            let mut answer = tokio::select! {
                biased;
                r = &mut query => Some(r),
                () = tokio::time::sleep(within) => None,
            };
            if answer.is_none() {
                // An answer that arrived while this thread was kept off the CPU counts (a thread
                // that is late is no frozen database): `yield_now` lets the runtime read the
                // socket and the connection's task pass on what it holds, then one more look.
                for _ in 0..2 {
                    tokio::task::yield_now().await;
                }
                answer = tokio::select! {
                    biased;
                    r = &mut query => Some(r),
                    () = std::future::ready(()) => None,
                };
            }
            match answer {
                Some(Ok(_)) => {
                    metrics::histogram!("db_probe_duration_seconds")
                        .record(asked.elapsed().as_secs_f64());
                    l.mark_up(down_since.take().map(|t| t.elapsed()));
                }
                Some(Err(e)) => {
                    // Lost (the server restarted, or ended this session): a new connection says
                    // whether the database answers.
                    tracing::debug!(error = %e, "the liveness probe's statement failed; reconnecting");
                    break;
                }
                None => {
                    drop(l);
                    down(
                        format!("no answer to SELECT 1 within {} ms", within.as_millis()),
                        &mut down_since,
                    );
                    break;
                }
            }
            drop(l);
            tokio::time::sleep(PROBE_EVERY).await;
        }
        driver.abort();
    }
}
