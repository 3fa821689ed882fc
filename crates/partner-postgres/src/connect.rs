//! How the service opens its connections to PostgreSQL, and how it bounds their use (issue 23,
//! N12).
//!
//! A connection can die without a word: a NAT or firewall that drops the flow, a partition, a
//! paused VM, or a proxy that stops forwarding but keeps both ends open (no FIN, no RST). What
//! runs on it then waits forever: TCP itself notices a blackhole only after its retransmissions
//! give up (about 15 minutes), and a peer that keeps acknowledging, never. Before this, a delivery
//! worker whose connections were frozen so sent and logged nothing for 45 s and ignored SIGTERM.
//! Two defences:
//!
//! - **TCP settings on every connection** ([`config`]): keepalives after [`KEEPALIVE_IDLE`] of
//!   silence, every [`KEEPALIVE_INTERVAL`], [`KEEPALIVE_RETRIES`] unanswered probes at most, and
//!   `TCP_USER_TIMEOUT` [`TCP_USER_TIMEOUT`] (data left unacknowledged that long closes the
//!   connection). A blackholed link, idle or busy, is closed by the kernel within about 8 s. They
//!   do not help when something between keeps acknowledging (a relay, a pooler that hangs).
//! - **A bound on each use of a pooled connection** ([`Bound`]): a connection checked out of the
//!   pool (for one repository call, one transaction, or a keyed request's held transaction) for
//!   longer than the bound (`PARTNER_DB_HOLD_TIMEOUT`, default [`DEFAULT_HOLD`]) is closed by a
//!   watchdog thread: its statement fails at once (as a lost connection: `unavailable`), it is
//!   logged once at `warn`, and it is never handed out again; the pool opens a fresh one. Every
//!   pooled use is short (repository calls, chunked listings and exports, retention steps of 500
//!   rows); what may take long (migrations, database creation) runs on connections of its own,
//!   outside the pool and the bound.
//!
//! The bound sees a frozen database only after `PARTNER_DB_HOLD_TIMEOUT`; extensions §11 wants its
//! 503s within a second. So a liveness probe (`liveness.rs`) watches the database as a whole and,
//! when its `SELECT 1` goes unanswered for `PARTNER_DB_PROBE_TIMEOUT` (600 ms by default), closes
//! every pooled connection of the store at once ([`close_all`], the watchdog's way of closing) and
//! makes checkouts fail until the database answers again.
//!
//! On the server's side, pooled sessions carry `idle_in_transaction_session_timeout` (twice the
//! bound, at least 10 s): a transaction whose client went silently is ended by the server, and its
//! row locks (claimed deliveries, a held idempotency key) released.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant};

use diesel::ConnectionError;
use diesel_async::AsyncPgConnection;
use diesel_async::pooled_connection::PoolableConnection;

/// Silence on a connection after which the kernel starts probing it.
pub const KEEPALIVE_IDLE: Duration = Duration::from_secs(5);
/// Between two keepalive probes.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(1);
/// Unanswered keepalive probes after which the connection is closed.
pub const KEEPALIVE_RETRIES: u32 = 3;
/// How long sent data may stay unacknowledged before the kernel closes the connection: the
/// keepalives' own horizon (5 s + 3 × 1 s), so a busy link and an idle one are given up alike.
pub const TCP_USER_TIMEOUT: Duration = Duration::from_secs(8);
/// The default bound on one use of a pooled connection: every pooled use is short (repository
/// calls, keyset chunks, retention steps of 500 rows), and a frozen link is replaced well within
/// the attempt timeout (10 s by default), so neither an attempt nor a shutdown is held by it.
pub const DEFAULT_HOLD: Duration = Duration::from_secs(5);
/// How often the watchdog looks at the connections checked out.
const SWEEP_EVERY: Duration = Duration::from_millis(100);
/// The least `idle_in_transaction_session_timeout` given to pooled sessions.
const IDLE_IN_TRANSACTION_AT_LEAST: Duration = Duration::from_secs(10);

/// The bound on each use of a pooled connection; `None`: unbounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound(pub Option<Duration>);

impl Default for Bound {
    fn default() -> Self {
        Self(Some(DEFAULT_HOLD))
    }
}

/// `url`'s settings with the TCP settings of the module, and `-c name=value` server settings
/// added to its `options`.
pub(crate) fn config(
    url: &str,
    server: &[(&str, String)],
) -> Result<tokio_postgres::Config, ConnectionError> {
    let mut config: tokio_postgres::Config = url
        .parse()
        .map_err(|e: tokio_postgres::Error| ConnectionError::InvalidConnectionUrl(e.to_string()))?;
    config
        .keepalives(true)
        .keepalives_idle(KEEPALIVE_IDLE)
        .keepalives_interval(KEEPALIVE_INTERVAL)
        .keepalives_retries(KEEPALIVE_RETRIES)
        .tcp_user_timeout(TCP_USER_TIMEOUT);
    if !server.is_empty() {
        let mut options = config.get_options().unwrap_or_default().to_owned();
        for (name, value) in server {
            if !options.is_empty() {
                options.push(' ');
            }
            options.push_str(&format!("-c {name}={value}"));
        }
        config.options(options);
    }
    Ok(config)
}

fn connect_error(e: tokio_postgres::Error) -> ConnectionError {
    ConnectionError::CouldntSetupConfiguration(diesel::result::Error::DatabaseError(
        diesel::result::DatabaseErrorKind::UnableToSendCommand,
        Box::new(e.to_string()),
    ))
}

/// A connection of its own (not pooled, not bounded) with the module's TCP settings: the
/// listener's, the announcer's, the probes', migrations' and start-up's. It receives
/// notifications as `AsyncPgConnection::establish`'s do.
pub async fn open(url: &str) -> Result<AsyncPgConnection, ConnectionError> {
    let (client, connection) = config(url, &[])?
        .connect(tokio_postgres::NoTls)
        .await
        .map_err(connect_error)?;
    AsyncPgConnection::try_from_client_and_connection(client, connection).await
}

/// A pooled connection and its [`Watch`].
pub(crate) struct PgConn {
    conn: AsyncPgConnection,
    watch: Arc<Watch>,
}

impl std::ops::Deref for PgConn {
    type Target = AsyncPgConnection;

    fn deref(&self) -> &AsyncPgConnection {
        &self.conn
    }
}

impl std::ops::DerefMut for PgConn {
    fn deref_mut(&mut self) -> &mut AsyncPgConnection {
        &mut self.conn
    }
}

/// What the watchdog knows of one pooled connection.
struct Watch {
    /// The store whose pools it belongs to (`PgStore`'s id), for [`close_all`].
    store: u64,
    /// When it was checked out ([`now_ms`], at least 1); 0 while in the pool.
    busy_since: AtomicU64,
    /// Its bound in milliseconds.
    limit_ms: u64,
    /// It was closed for being held too long.
    closed: AtomicBool,
    /// Tells its driving task to drop it (closing the socket).
    abort: tokio::sync::Notify,
}

/// Milliseconds since the first call, at least 1.
fn now_ms() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let ms = EPOCH.get_or_init(Instant::now).elapsed().as_millis();
    u64::try_from(ms).unwrap_or(u64::MAX).max(1)
}

/// The connections the watchdog looks at (dropped ones fall out at its next look).
fn watched() -> &'static Mutex<Vec<Weak<Watch>>> {
    static WATCHED: OnceLock<Mutex<Vec<Weak<Watch>>>> = OnceLock::new();
    WATCHED.get_or_init(|| {
        let spawned = std::thread::Builder::new()
            .name("pg-watchdog".into())
            .spawn(sweep);
        if let Err(e) = spawned {
            tracing::error!(error = %e, "the database connection watchdog did not start");
        }
        Mutex::new(Vec::new())
    })
}

/// The watchdog: every [`SWEEP_EVERY`], closes the connections checked out for longer than
/// their bound.
fn sweep() {
    loop {
        std::thread::sleep(SWEEP_EVERY);
        let now = now_ms();
        let mut list = watched().lock().unwrap_or_else(PoisonError::into_inner);
        list.retain(|w| {
            let Some(w) = w.upgrade() else {
                return false;
            };
            let since = w.busy_since.load(Ordering::Relaxed);
            if since != 0
                && now.saturating_sub(since) > w.limit_ms
                && !w.closed.swap(true, Ordering::Relaxed)
            {
                tracing::warn!(
                    held_ms = now.saturating_sub(since),
                    bound_ms = w.limit_ms,
                    "a database connection was held past PARTNER_DB_HOLD_TIMEOUT (a frozen link, or a statement that hangs); closing it"
                );
                // `notify_one` keeps a permit: the driving task sees it whenever it looks.
                w.abort.notify_one();
            }
            true
        });
    }
}

/// The pool's manager: opens connections with the module's settings, each driven by a task
/// that drops it when the watchdog says so; gives back only connections still sound.
pub(crate) struct Manager {
    url: String,
    bound: Bound,
    /// The store whose pools it fills ([`close_all`]).
    store: u64,
}

impl Manager {
    pub(crate) fn new(url: &str, bound: Bound, store: u64) -> Self {
        Self {
            url: url.to_owned(),
            bound,
            store,
        }
    }
}

/// Closes every pooled connection of `store`, checked out or idle, as the watchdog closes one
/// held too long: what runs on them fails at once (`unavailable`), and none is handed out again.
/// The liveness probe's doing when the database stops answering (`liveness.rs`). Returns how many
/// were open.
pub(crate) fn close_all(store: u64) -> usize {
    let list = watched().lock().unwrap_or_else(PoisonError::into_inner);
    let mut n = 0;
    for w in list.iter().filter_map(Weak::upgrade) {
        if w.store == store && !w.closed.swap(true, Ordering::Relaxed) {
            w.abort.notify_one();
            n += 1;
        }
    }
    n
}

impl deadpool::managed::Manager for Manager {
    type Type = PgConn;
    type Error = ConnectionError;

    async fn create(&self) -> Result<PgConn, ConnectionError> {
        let server = match self.bound.0 {
            Some(limit) => vec![(
                "idle_in_transaction_session_timeout",
                format!(
                    "{}ms",
                    (limit * 2).max(IDLE_IN_TRANSACTION_AT_LEAST).as_millis()
                ),
            )],
            None => Vec::new(),
        };
        let (client, connection) = config(&self.url, &server)?
            .connect(tokio_postgres::NoTls)
            .await
            .map_err(connect_error)?;
        let watch = Arc::new(Watch {
            store: self.store,
            busy_since: AtomicU64::new(0),
            limit_ms: self.bound.0.map_or(u64::MAX, |d| {
                u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
            }),
            closed: AtomicBool::new(false),
            abort: tokio::sync::Notify::new(),
        });
        let driver = watch.clone();
        // Spawned on the calling thread's runtime, as diesel-async's own driver is. Dropping
        // the connection closes its socket: every statement waiting on it fails at once.
        tokio::spawn(async move {
            tokio::select! {
                r = connection => {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, "a pooled database connection ended");
                    }
                }
                () = driver.abort.notified() => {}
            }
        });
        // Watched even when unbounded (its limit then never passes): [`close_all`] finds it.
        watched()
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::downgrade(&watch));
        let conn = AsyncPgConnection::try_from(client).await?;
        Ok(PgConn { conn, watch })
    }

    async fn recycle(
        &self,
        obj: &mut PgConn,
        _: &deadpool::managed::Metrics,
    ) -> deadpool::managed::RecycleResult<ConnectionError> {
        // No round trip (what diesel-async calls `Fast`): a connection closed by the watchdog,
        // by the server or by the kernel, or left in a transaction, is not given out again.
        if obj.watch.closed.load(Ordering::Relaxed) || obj.conn.is_broken() {
            return Err(deadpool::managed::RecycleError::message(
                "the connection is closed or broken",
            ));
        }
        Ok(())
    }
}

pub(crate) type Pool = deadpool::managed::Pool<Manager>;

/// A connection checked out of the pool: its bound runs until it is dropped.
pub(crate) struct Pooled(deadpool::managed::Object<Manager>);

impl Pooled {
    pub(crate) fn new(obj: deadpool::managed::Object<Manager>) -> Self {
        obj.watch.busy_since.store(now_ms(), Ordering::Relaxed);
        Self(obj)
    }

    /// Closes the connection now, as the watchdog closes one (the pool then discards it): for a
    /// connection left in a state no one can vouch for, whose transaction (and the locks it
    /// holds) must end at once rather than when the pool next looks at it.
    pub(crate) fn close(self) {
        if !self.0.watch.closed.swap(true, Ordering::Relaxed) {
            self.0.watch.abort.notify_one();
        }
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        self.0.watch.busy_since.store(0, Ordering::Relaxed);
    }
}

impl std::ops::Deref for Pooled {
    type Target = AsyncPgConnection;

    fn deref(&self) -> &AsyncPgConnection {
        &self.0.conn
    }
}

impl std::ops::DerefMut for Pooled {
    fn deref_mut(&mut self) -> &mut AsyncPgConnection {
        &mut self.0.conn
    }
}
