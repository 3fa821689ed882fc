//! PostgreSQL adapter of the Partner Portal API.
//!
//! Implements the `partner-domain` ports with diesel + diesel-async over a deadpool pool.
//! Migrations from the workspace's top-level `migrations/` are embedded in the binary and applied
//! at start ([`migrate`]), after [`ensure_database`] has created the database when it is missing.
//! Time always comes in from the domain's `Clock` as a bind parameter; no query calls `now()`.
//! Row structs and their translation live in `models/` (one file per table); statements are
//! written with the diesel DSL, raw SQL only where it cannot say them (see `docs/architecture.md`,
//! "Query style").

#![cfg_attr(test, allow(clippy::expect_used, clippy::indexing_slicing))]

mod accounts;
mod action_budget;
mod catalog;
mod claim;
mod connect;
mod coupons;
mod delivery_hours;
mod dsl;
mod endpoint_writes;
mod feed;
mod held;
mod idempotency;
mod leads;
mod links;
mod liveness;
mod models;
mod notify;
mod ops;
mod orders;
mod outbox;
mod payouts;
mod portal;
mod record;
mod retention;
mod schema;
mod schema_extra;
mod sub_accounts;
#[cfg(test)]
mod test_support;
mod tokens;
mod uow;
mod webhooks;

pub use connect::{Bound, DEFAULT_HOLD};
pub use liveness::{DEFAULT_PROBE, Probe};
pub use notify::{announce_deliveries, listen_for_deliveries};
pub use ops::{Backlog, PoolState};

use std::sync::Arc;
use std::time::Duration;

use connect::{Pool, Pooled};
use diesel::result::{DatabaseErrorKind, Error as DieselError};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use diesel_migrations::{EmbeddedMigrations, MigrationHarness, embed_migrations};
use partner_domain::RepoError;
use partner_domain::kernel::readiness::Readiness;

const MIGRATIONS: EmbeddedMigrations = embed_migrations!("../../migrations");
/// Serialises concurrent migrators (several instances starting together).
const MIGRATION_LOCK: i64 = 0x0070_6172_746e_6572;

// Start-up statements stay raw: they address the server (its catalog `pg_database`, which
// `schema.rs` does not declare; `CREATE`/`DROP DATABASE`, whose name cannot be a bind parameter)
// or call functions that return `void`, which diesel cannot type. Each runs once per start.

/// Whether the database `$1` exists.
const DATABASE_EXISTS_SQL: &str =
    "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1) AS found";
/// Takes the migration lock `$1`, waiting for it.
const ADVISORY_LOCK_SQL: &str = "SELECT pg_advisory_lock($1)";
/// Releases the migration lock `$1`.
const ADVISORY_UNLOCK_SQL: &str = "SELECT pg_advisory_unlock($1)";

/// `name` as a quoted SQL identifier (for the statements that cannot bind it).
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `CREATE DATABASE` for a name checked to be missing.
async fn create_database(conn: &mut AsyncPgConnection, name: &str) -> diesel::QueryResult<usize> {
    diesel::sql_query(format!("CREATE DATABASE {}", quoted(name)))
        .execute(conn)
        .await
}

/// Errors of start-up: reaching PostgreSQL, creating the database, migrating. Each keeps its
/// cause as `source()`.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("DATABASE_URL is not a valid PostgreSQL URL: {0}")]
    BadUrl(#[source] url::ParseError),
    #[error("cannot connect to PostgreSQL: {0}")]
    Connect(#[from] diesel::ConnectionError),
    #[error("database error during setup: {0}")]
    Query(#[from] DieselError),
    #[error("migration failed: {0}")]
    Migration(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("the migration task did not finish: {0}")]
    MigrationTask(#[source] tokio::task::JoinError),
    #[error("cannot build the connection pool: {0}")]
    Pool(#[source] deadpool::managed::BuildError),
}

/// Creates the database named in `url` when it does not exist, through the server's
/// `postgres` maintenance database.
pub async fn ensure_database(url: &str) -> Result<(), SetupError> {
    let mut parsed = url::Url::parse(url).map_err(SetupError::BadUrl)?;
    let name = parsed.path().trim_start_matches('/').to_owned();
    if name.is_empty() || name == "postgres" {
        return Ok(());
    }
    parsed.set_path("/postgres");
    let mut conn = connect::open(parsed.as_str()).await?;
    #[derive(diesel::QueryableByName)]
    struct Found {
        #[diesel(sql_type = diesel::sql_types::Bool)]
        found: bool,
    }
    let found = diesel::sql_query(DATABASE_EXISTS_SQL)
        .bind::<diesel::sql_types::Text, _>(&name)
        .get_result::<Found>(&mut conn)
        .await?;
    if found.found {
        return Ok(());
    }
    match create_database(&mut conn, &name).await {
        Ok(_) => Ok(()),
        // Another instance created it between our check and our CREATE.
        Err(DieselError::DatabaseError(_, info)) if info.message().contains("already exists") => {
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// Drops the database named in `url` (terminating its sessions). For test harnesses and
/// operators tearing down throwaway environments.
pub async fn drop_database(url: &str) -> Result<(), SetupError> {
    let mut parsed = url::Url::parse(url).map_err(SetupError::BadUrl)?;
    let name = parsed.path().trim_start_matches('/').to_owned();
    parsed.set_path("/postgres");
    let mut conn = connect::open(parsed.as_str()).await?;
    diesel::sql_query(format!(
        "DROP DATABASE IF EXISTS {} WITH (FORCE)",
        quoted(&name)
    ))
    .execute(&mut conn)
    .await?;
    Ok(())
}

/// Applies pending embedded migrations, holding an advisory lock so concurrent starts are safe.
pub async fn migrate(url: &str) -> Result<Vec<String>, SetupError> {
    let url = url.to_owned();
    // The migration harness is synchronous; the wrapper blocks on the runtime, which is only
    // allowed from a blocking thread.
    tokio::task::spawn_blocking(move || {
        type Wrapper =
            diesel_async::async_connection_wrapper::AsyncConnectionWrapper<AsyncPgConnection>;
        // With the TCP settings of `connect`, and no bound: a migration may take long.
        let conn = tokio::runtime::Handle::current().block_on(connect::open(&url))?;
        let mut conn = Wrapper::from(conn);
        let lock = |sql: &str, conn: &mut Wrapper| {
            diesel::RunQueryDsl::execute(
                diesel::sql_query(sql).bind::<diesel::sql_types::BigInt, _>(MIGRATION_LOCK),
                conn,
            )
        };
        lock(ADVISORY_LOCK_SQL, &mut conn)?;
        let applied = conn
            .run_pending_migrations(MIGRATIONS)
            .map(|v| v.iter().map(ToString::to_string).collect())
            .map_err(SetupError::Migration);
        lock(ADVISORY_UNLOCK_SQL, &mut conn)?;
        applied
    })
    .await
    .map_err(SetupError::MigrationTask)?
}

/// The store: every repository implementation over one set of connection pools.
///
/// A thread that called [`PgStore::attach_worker`] (an HTTP worker) draws its connections from
/// a pool of its own; every other thread (webhook delivery, gauges, the operator listener)
/// from the shared pool. Why: diesel-async drives each connection from a task spawned on the
/// thread that opened it, so a connection used by another thread costs two cross-thread wake-ups
/// per statement (`docs/decisions.md`, "Worker-local pools").
#[derive(Clone)]
pub struct PgStore {
    pool: Pool,
    workers: Arc<WorkerPools>,
    /// Counts commits that wrote deliveries; workers of this process and the announcer of
    /// [`announce_deliveries`] watch it.
    written: Arc<tokio::sync::watch::Sender<u64>>,
    /// The markers claims left stale, advanced after the claims returned, one advance at a time
    /// (`claim.rs`, `PgStore::advance_later`); a claim does not wait for them.
    advancing: Arc<claim::Advancing>,
    /// Whether the database answers, as the liveness probe last found ([`PgStore::probe_liveness`]).
    liveness: Arc<liveness::Liveness>,
}

/// The pools of the attached worker threads, each opened lazily on its own thread.
struct WorkerPools {
    /// Tells this store's pools apart in [`ATTACHED`].
    id: u64,
    url: String,
    /// Connections of each worker's pool.
    size: usize,
    /// Worker pools planned, attached or not.
    planned: usize,
    /// Worker pools that may still be attached.
    slots: std::sync::Mutex<usize>,
    pools: thread_local::ThreadLocal<Pool>,
    /// The bound on each use of a pooled connection (`connect`).
    bound: Bound,
}

static NEXT_STORE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

std::thread_local! {
    /// The stores whose worker pool this OS thread attached. `thread_local::ThreadLocal` hands
    /// an exited thread's value to the next thread that gets its recycled id; this tells that
    /// case apart from a second call on the same thread.
    static ATTACHED: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("status", &self.pool.status())
            .field("worker_pools", &self.workers.pools.iter().count())
            .finish()
    }
}

/// How `max_size` connections are shared between `workers` HTTP worker pools and the shared
/// pool: `(per worker, shared)`. Three quarters go to the workers, which serve the requests;
/// the rest, at least 2, to the shared pool, so webhook delivery keeps connections of its own
/// under any request load (and requests keep theirs under any backlog). Each worker gets at
/// least 1; the total exceeds `max_size` only when `max_size` is below `workers + 2`.
pub fn split_pool(max_size: usize, workers: usize) -> (usize, usize) {
    if workers == 0 {
        return (0, max_size.max(1));
    }
    let for_workers = (max_size.saturating_mul(3) / 4).min(max_size.saturating_sub(2));
    let per_worker = (for_workers / workers).max(1);
    let shared = max_size
        .saturating_sub(per_worker.saturating_mul(workers))
        .max(2);
    (per_worker, shared)
}

fn build_pool(url: &str, max_size: usize, bound: Bound, store: u64) -> Result<Pool, SetupError> {
    // Recycling sends nothing (diesel-async's `Fast`; its default, `Verified`, sends `SELECT 1`
    // on every checkout, a round trip per repository call). Connections found broken, closed
    // (by the server, the kernel's keepalives, or the bound's watchdog) are discarded; one the
    // server dropped silently fails its next query once (503) and is then replaced.
    let manager = connect::Manager::new(url, bound, store);
    Pool::builder(manager)
        .max_size(max_size)
        .runtime(deadpool::Runtime::Tokio1)
        // Within a second, so a request that cannot get a connection answers 503 in about a
        // second (extensions §11) instead of hanging.
        .wait_timeout(Some(Duration::from_secs(1)))
        .create_timeout(Some(Duration::from_secs(1)))
        .recycle_timeout(Some(Duration::from_secs(5)))
        .build()
        .map_err(SetupError::Pool)
}

impl PgStore {
    /// One shared pool of at most `max_size` connections. Waiting for a connection or opening
    /// one gives up after 1 s, so a database outage fails requests quickly (503) instead of
    /// piling them up. No connection is opened before one is needed.
    pub fn new(url: &str, max_size: usize) -> Result<Self, SetupError> {
        Self::with_worker_pools(url, max_size, 0)
    }

    /// As [`PgStore::new`], with `max_size` split by [`split_pool`] between up to `workers`
    /// worker pools ([`PgStore::attach_worker`]) and the shared pool.
    pub fn with_worker_pools(
        url: &str,
        max_size: usize,
        workers: usize,
    ) -> Result<Self, SetupError> {
        Self::with_bound(url, max_size, workers, Bound::default())
    }

    /// As [`PgStore::with_worker_pools`], each use of a pooled connection bounded by `bound`
    /// (`PARTNER_DB_HOLD_TIMEOUT`): past it the connection is closed, its statement fails as
    /// `unavailable`, and the pool opens a fresh one (issue 23, N12; see `connect.rs`).
    pub fn with_bound(
        url: &str,
        max_size: usize,
        workers: usize,
        bound: Bound,
    ) -> Result<Self, SetupError> {
        let (per_worker, shared) = split_pool(max_size, workers);
        let id = NEXT_STORE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Checked here, so attaching a worker later cannot fail.
        if workers > 0 {
            build_pool(url, per_worker, bound, id)?;
        }
        Ok(Self {
            pool: build_pool(url, shared, bound, id)?,
            workers: Arc::new(WorkerPools {
                id,
                url: url.to_owned(),
                size: per_worker,
                planned: workers,
                slots: std::sync::Mutex::new(workers),
                pools: thread_local::ThreadLocal::new(),
                bound,
            }),
            written: Arc::new(tokio::sync::watch::Sender::new(0)),
            advancing: Arc::new(claim::Advancing::default()),
            liveness: Arc::new(liveness::Liveness::new(id)),
        })
    }

    /// Starts the database liveness probe (`PARTNER_DB_PROBE_TIMEOUT`; `liveness.rs`): once a
    /// trivial statement goes unanswered for `probe`'s threshold, this store's pooled connections
    /// are closed and its calls fail at once as `unavailable` until the database answers again.
    /// Call it once; `Probe(None)` starts nothing. The probe ends when the store is dropped.
    pub fn probe_liveness(&self, probe: Probe) {
        if let Some(within) = probe.0 {
            liveness::start(&self.workers.url, &self.liveness, within);
        }
    }

    /// Whether the liveness probe takes the database to answer (always `true` without a probe).
    pub fn reachable(&self) -> bool {
        self.liveness.is_up()
    }

    /// Gives the calling thread a pool of its own, if a worker slot is left (call it once from
    /// each HTTP worker thread, before it serves). Its connections are opened on this thread,
    /// so their driving tasks run on this thread's runtime, where their queries are issued.
    /// Returns whether the thread has a pool of its own.
    pub fn attach_worker(&self) -> bool {
        let w = &self.workers;
        let mine = ATTACHED.with_borrow(|ids| ids.contains(&w.id));
        if let Some(pool) = w.pools.get() {
            if !mine {
                // Inherited from a worker thread that exited (actix restarts a worker that
                // stopped): its idle connections were driven by that thread's runtime, which is
                // gone, so they are closed; the pool opens new ones on this thread.
                let closed = pool.retain(|_, _| false).removed.len();
                tracing::warn!(
                    closed,
                    "worker pool taken over from an exited worker thread"
                );
                ATTACHED.with_borrow_mut(|ids| ids.push(w.id));
            }
            return true;
        }
        let mut slots = w
            .slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *slots == 0 {
            return false;
        }
        match build_pool(&w.url, w.size, w.bound, w.id) {
            Ok(pool) => {
                *slots -= 1;
                w.pools.get_or(|| pool);
                ATTACHED.with_borrow_mut(|ids| ids.push(w.id));
                tracing::debug!(
                    thread = std::thread::current().name().unwrap_or("unnamed"),
                    connections = w.size,
                    "worker pool attached"
                );
                true
            }
            // Not reached: the same configuration was built in `with_worker_pools`.
            Err(e) => {
                tracing::error!(error = %e, "worker pool not built; using the shared pool");
                false
            }
        }
    }

    /// Changes whenever a transaction of this store that wrote deliveries has committed.
    pub fn deliveries_written(&self) -> tokio::sync::watch::Receiver<u64> {
        self.written.subscribe()
    }

    /// Called after a commit that wrote `n` deliveries.
    fn deliveries_committed(&self, n: usize) {
        if n > 0 {
            self.written.send_modify(|v| *v = v.wrapping_add(1));
        }
    }

    /// The calling thread's pool, else the shared one. A thread that did not attach (whatever
    /// `ThreadLocal` holds under its recycled id) uses the shared pool.
    fn pool(&self) -> &Pool {
        let w = &self.workers;
        match w.pools.get() {
            Some(pool) if ATTACHED.with_borrow(|ids| ids.contains(&w.id)) => pool,
            _ => &self.pool,
        }
    }

    /// A connection: the request's held transaction's when it has one free ([`held`]), else a
    /// pooled one. Every failure to get one (refused, timed out, pool closed) means the database
    /// cannot be reached now: [`RepoError::unavailable`].
    ///
    /// In a keyed request ([`held`]) the first statement claims the request's key, in a
    /// transaction that is then held, and runs in it, as every later one does. A statement after
    /// the key was refused fails with [`KeyTaken`](partner_domain::idempotency::KeyTaken).
    async fn conn(&self) -> Result<held::Conn, RepoError> {
        if let Some(h) = held::HeldTx::current(self.workers.id) {
            let mut took = h.take();
            while matches!(took, held::Took::Wait) {
                h.settled().await;
                took = h.take();
            }
            match took {
                held::Took::Conn(conn, _) => {
                    // A statement may write: a unit of work after it is a savepoint.
                    h.written();
                    return Ok(conn);
                }
                held::Took::Claim(held) => {
                    let conn = self.claim_held(&held).await?;
                    held.written();
                    return Ok(conn);
                }
                held::Took::Refused => {
                    return Err(RepoError::new(partner_domain::idempotency::KeyTaken));
                }
                held::Took::Busy | held::Took::Wait => {}
            }
        }
        self.pooled().await.map(held::Conn::pooled)
    }

    /// A pooled connection ([`PgStore::conn`]). None while the liveness probe has the database
    /// marked unreachable, and none once it marks it so while this waits (for a free connection,
    /// or one being opened): the call fails at once as `unavailable` (`liveness.rs`).
    async fn pooled(&self) -> Result<Pooled, RepoError> {
        let mut up = self.liveness.subscribe();
        if !*up.borrow_and_update() {
            return Err(RepoError::unavailable(liveness::UNREACHABLE));
        }
        tokio::select! {
            biased;
            got = self.pool().get() => got.map(Pooled::new).map_err(RepoError::unavailable),
            _ = up.wait_for(|up| !*up) => Err(RepoError::unavailable(liveness::UNREACHABLE)),
        }
    }
}

#[async_trait::async_trait]
impl Readiness for PgStore {
    async fn ping(&self) -> Result<(), RepoError> {
        let mut conn = self.conn().await?;
        diesel::select(dsl::fixed::<diesel::sql_types::Integer>("1"))
            .execute(&mut conn)
            .await
            .map_err(db)?;
        Ok(())
    }
}

/// Opens a savepoint when `conn` is a request's held transaction, before one statement whose
/// failure is expected and answered (a unique or foreign-key violation): its failure then
/// undoes only that statement, not the transaction. `true` when one was opened; end it with
/// [`end_guard`]. A pooled connection (no transaction) needs none.
async fn guard_statement(conn: &mut held::Conn) -> Result<bool, RepoError> {
    use diesel_async::{AnsiTransactionManager, TransactionManager};
    if conn.held().is_none() {
        return Ok(false);
    }
    AnsiTransactionManager::begin_transaction(&mut **conn)
        .await
        .map_err(db)?;
    Ok(true)
}

/// Ends the savepoint [`guard_statement`] opened: released when the statement succeeded, else
/// rolled back to.
async fn end_guard(conn: &mut held::Conn, guarded: bool, ok: bool) -> Result<(), RepoError> {
    use diesel_async::{AnsiTransactionManager, TransactionManager};
    if !guarded {
        return Ok(());
    }
    if ok {
        AnsiTransactionManager::commit_transaction(&mut **conn).await
    } else {
        AnsiTransactionManager::rollback_transaction(&mut **conn).await
    }
    .map_err(db)
}

/// A query's failure as the domain sees it: a connection the server closed (PostgreSQL
/// stopped or restarted under a pooled connection) is the store being unreachable, anything
/// else a storage failure.
fn db(e: DieselError) -> RepoError {
    if lost_connection(&e) {
        RepoError::unavailable(e)
    } else {
        RepoError::new(e)
    }
}

fn lost_connection(e: &DieselError) -> bool {
    match e {
        // diesel-async reports a driver error without SQLSTATE (the connection closed under a
        // query, found in a drill stopping PostgreSQL under load) as `UnableToSendCommand`.
        DieselError::DatabaseError(
            DatabaseErrorKind::ClosedConnection | DatabaseErrorKind::UnableToSendCommand,
            _,
        ) => true,
        // The server's own shutdown and recovery errors (SQLSTATE 57P01-57P03) arrive as
        // `Unknown` with the server's text.
        DieselError::DatabaseError(DatabaseErrorKind::Unknown, info) => {
            let m = info.message().to_ascii_lowercase();
            m.contains("connection closed")
                || m.contains("connection reset")
                || m.contains("terminating connection")
                || m.contains("broken pipe")
                || m.contains("the database system is")
        }
        _ => false,
    }
}

fn is_violation(e: &DieselError, kind: fn(&DatabaseErrorKind) -> bool) -> bool {
    matches!(e, DieselError::DatabaseError(k, _) if kind(k))
}

/// Rows as domain values, and the keys of those that no longer parse (each logged): one
/// unreadable row must not fail the batch it was read with (extensions §12).
pub(crate) fn readable<R, K: std::fmt::Debug, T>(
    rows: Vec<R>,
    key: impl Fn(&R) -> K,
    into: impl Fn(R) -> Result<T, RepoError>,
) -> (Vec<T>, Vec<K>) {
    let mut ok = Vec::with_capacity(rows.len());
    let mut bad = Vec::new();
    for row in rows {
        let k = key(&row);
        match into(row) {
            Ok(v) => ok.push(v),
            Err(e) => {
                tracing::warn!(error = %e, record = ?k, "a stored record does not parse");
                bad.push(k);
            }
        }
    }
    (ok, bad)
}

/// A stored value that no longer parses: the row was written by something other than this
/// service, and is reported rather than silently reinterpreted.
fn corrupt(what: &'static str) -> RepoError {
    RepoError::new(format!("stored {what} does not parse"))
}

/// A `sql_query` whose text the code fixes (never built from input), prepared once per
/// connection and cached by its SQL text, as the DSL's queries are. diesel marks every
/// `sql_query` unsafe to cache (its text could be anything); on a hot path that means PostgreSQL
/// parses and plans the statement on every execution.
pub(crate) struct Prepared<Q>(pub(crate) Q);

impl<Q: diesel::query_builder::QueryFragment<diesel::pg::Pg>>
    diesel::query_builder::QueryFragment<diesel::pg::Pg> for Prepared<Q>
{
    fn walk_ast<'b>(
        &'b self,
        pass: diesel::query_builder::AstPass<'_, 'b, diesel::pg::Pg>,
    ) -> diesel::QueryResult<()> {
        self.0.walk_ast(pass)
    }

    fn is_safe_to_cache_prepared(&self, _: &diesel::pg::Pg) -> diesel::QueryResult<bool> {
        Ok(true)
    }
}

impl<Q> diesel::query_builder::QueryId for Prepared<Q> {
    type QueryId = ();
    // Keyed by the rendered SQL (and bind types), not by type.
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl<Q: diesel::query_builder::Query> diesel::query_builder::Query for Prepared<Q> {
    type SqlType = Q::SqlType;
}

#[cfg(test)]
mod pool_tests {
    use super::split_pool;

    #[test]
    fn the_pool_is_split_three_quarters_to_the_workers() {
        assert_eq!(split_pool(16, 2), (6, 4));
        assert_eq!(split_pool(8, 2), (3, 2));
        assert_eq!(split_pool(12, 2), (4, 4));
        assert_eq!(split_pool(16, 8), (1, 8));
        assert_eq!(split_pool(16, 0), (0, 16));
        for size in 4..=64 {
            for workers in 1..=size - 2 {
                let (per, shared) = split_pool(size, workers);
                assert!(per >= 1 && shared >= 2, "{size}/{workers}");
                assert_eq!(per * workers + shared, size, "{size}/{workers}");
            }
        }
    }

    #[test]
    fn only_as_many_threads_as_planned_get_a_pool_of_their_own() {
        // No connection is opened: pools connect on first use.
        let store = super::PgStore::with_worker_pools("postgres://nowhere.invalid/db", 8, 1)
            .expect("pools");
        assert!(store.attach_worker());
        assert!(
            store.attach_worker(),
            "attaching twice keeps the thread's pool"
        );
        let other = store.clone();
        let attached = std::thread::spawn(move || other.attach_worker())
            .join()
            .expect("thread");
        assert!(!attached, "the one worker slot is taken");
        let state = store.pool_state();
        assert_eq!(state.max, 8);
        assert_eq!((state.idle, state.in_use, state.waiting), (0, 0, 0));
    }

    /// A peer that completes TCP handshakes (the kernel's listen queue) and never answers: a
    /// frozen PostgreSQL. The probe marks it unreachable after its threshold; a call already
    /// waiting for a connection (the pool opening one, which would give up after 1 s) fails when
    /// the mark is set, and later calls at once.
    /// attack9: a database marked unreachable whose server then answers, if only with an error
    /// (a cluster filled by other clients while the pools had given their slots up: "too many
    /// clients"), is no longer marked: calls go to the pool, which finds out for itself. Kept
    /// marked until the probe got a connection of its own, every call stayed 503 for as long as
    /// the other clients held the slots. A peer that stays silent first (marked), then answers
    /// every connection with PostgreSQL's `too_many_connections` error.
    #[tokio::test]
    async fn a_server_that_answers_with_an_error_lifts_the_mark() {
        use partner_domain::kernel::readiness::Readiness;
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::time::{Duration, Instant};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let answers = Arc::new(AtomicBool::new(false));
        let answering = answers.clone();
        tokio::spawn(async move {
            let mut silent = Vec::new();
            while let Ok((mut sock, _)) = listener.accept().await {
                if !answering.load(Ordering::SeqCst) {
                    silent.push(sock);
                    continue;
                }
                tokio::spawn(async move {
                    let mut startup = [0u8; 512];
                    let _ = sock.read(&mut startup).await;
                    let mut fields = Vec::new();
                    for (tag, value) in [
                        (b'S', "FATAL"),
                        (b'C', "53300"),
                        (b'M', "sorry, too many clients already"),
                    ] {
                        fields.push(tag);
                        fields.extend_from_slice(value.as_bytes());
                        fields.push(0);
                    }
                    fields.push(0);
                    let mut msg = vec![b'E'];
                    msg.extend_from_slice(
                        &(u32::try_from(fields.len() + 4).expect("small")).to_be_bytes(),
                    );
                    msg.extend_from_slice(&fields);
                    let _ = sock.write_all(&msg).await;
                    let _ = sock.shutdown().await;
                });
            }
        });
        let store = super::PgStore::new(&format!("postgres://nobody@{addr}/db"), 2).expect("pool");
        store.probe_liveness(super::Probe(Some(Duration::from_millis(200))));
        let asked = Instant::now();
        while store.reachable() {
            assert!(asked.elapsed() < Duration::from_secs(5), "never marked");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        answers.store(true, Ordering::SeqCst);
        let answering_at = Instant::now();
        while !store.reachable() {
            assert!(
                answering_at.elapsed() < Duration::from_secs(5),
                "still marked unreachable while the server answers"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Calls go to the pool, which is refused: a 503 of its own, at once.
        let refused = store.ping().await.expect_err("too many clients");
        assert!(refused.is_unavailable(), "{refused}");
        assert!(store.reachable(), "an answered error sets no mark");
    }

    #[tokio::test]
    async fn a_database_that_never_answers_is_marked_unreachable_and_calls_fail_at_once() {
        use partner_domain::kernel::readiness::Readiness;
        use std::time::{Duration, Instant};
        let frozen = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = frozen.local_addr().expect("addr");
        let store = super::PgStore::new(&format!("postgres://nobody@{addr}/db"), 2).expect("pool");
        assert!(store.reachable(), "no probe yet: taken to answer");
        let asked = Instant::now();
        store.probe_liveness(super::Probe(Some(Duration::from_millis(200))));
        let first = store.ping().await.expect_err("no answer");
        let took = asked.elapsed();
        assert!(first.is_unavailable(), "{first}");
        assert!(
            took < Duration::from_millis(900),
            "the waiting call was not cut by the mark: {took:?}"
        );
        assert!(!store.reachable());
        let asked = Instant::now();
        let again = store.ping().await.expect_err("still no answer");
        assert!(again.is_unavailable(), "{again}");
        assert!(
            asked.elapsed() < Duration::from_millis(50),
            "{:?}",
            asked.elapsed()
        );
    }

    #[test]
    fn below_workers_plus_two_each_pool_still_gets_its_minimum() {
        assert_eq!(split_pool(4, 4), (1, 2));
        assert_eq!(split_pool(1, 2), (1, 2));
        assert_eq!(split_pool(0, 0), (0, 1));
    }
}
