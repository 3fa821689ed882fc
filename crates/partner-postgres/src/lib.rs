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
mod catalog;
mod coupons;
mod dsl;
mod leads;
mod links;
mod models;
mod ops;
mod orders;
mod outbox;
mod payouts;
mod schema;
mod schema_extra;
mod sub_accounts;
mod tokens;
mod uow;
mod webhooks;

pub use ops::{Backlog, PoolState};
pub use webhooks::{announce_deliveries, listen_for_deliveries};

use std::sync::Arc;
use std::time::Duration;

use diesel::result::{DatabaseErrorKind, Error as DieselError};
use diesel_async::pooled_connection::AsyncDieselConnectionManager;
use diesel_async::pooled_connection::deadpool::{Object, Pool};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use diesel_migrations::{EmbeddedMigrations, MigrationHarness, embed_migrations};
use partner_domain::RepoError;
use partner_domain::ports::Readiness;

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
    use diesel_async::AsyncConnection;
    let mut parsed = url::Url::parse(url).map_err(SetupError::BadUrl)?;
    let name = parsed.path().trim_start_matches('/').to_owned();
    if name.is_empty() || name == "postgres" {
        return Ok(());
    }
    parsed.set_path("/postgres");
    let mut conn = <AsyncPgConnection as AsyncConnection>::establish(parsed.as_str()).await?;
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
    use diesel_async::AsyncConnection;
    let mut parsed = url::Url::parse(url).map_err(SetupError::BadUrl)?;
    let name = parsed.path().trim_start_matches('/').to_owned();
    parsed.set_path("/postgres");
    let mut conn = <AsyncPgConnection as AsyncConnection>::establish(parsed.as_str()).await?;
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
        let mut conn = <Wrapper as diesel::Connection>::establish(&url)?;
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

/// The store: one pool shared by every repository implementation.
#[derive(Clone)]
pub struct PgStore {
    pool: Pool<AsyncPgConnection>,
    /// Counts commits that wrote deliveries; workers of this process and the announcer of
    /// [`announce_deliveries`] watch it.
    written: Arc<tokio::sync::watch::Sender<u64>>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("status", &self.pool.status())
            .finish()
    }
}

impl PgStore {
    /// A pool of at most `max_size` connections. Waiting for a connection or opening one gives
    /// up after 5 s, so a database outage fails requests quickly instead of piling them up.
    pub fn new(url: &str, max_size: usize) -> Result<Self, SetupError> {
        // `Fast` recycling: the default (`Verified`) sends `SELECT 1` on every checkout, a round
        // trip per repository call. Connections diesel saw break are still discarded; one the
        // server dropped silently fails its next query once (500) and is then replaced.
        let mut manager_config = diesel_async::pooled_connection::ManagerConfig::default();
        manager_config.recycling_method = diesel_async::pooled_connection::RecyclingMethod::Fast;
        let manager =
            AsyncDieselConnectionManager::<AsyncPgConnection>::new_with_config(url, manager_config);
        let pool = Pool::builder(manager)
            .max_size(max_size)
            .runtime(deadpool::Runtime::Tokio1)
            .wait_timeout(Some(Duration::from_secs(5)))
            .create_timeout(Some(Duration::from_secs(5)))
            .recycle_timeout(Some(Duration::from_secs(5)))
            .build()
            .map_err(SetupError::Pool)?;
        Ok(Self {
            pool,
            written: Arc::new(tokio::sync::watch::Sender::new(0)),
        })
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

    async fn conn(&self) -> Result<Object<AsyncPgConnection>, RepoError> {
        self.pool.get().await.map_err(RepoError::new)
    }
}

#[async_trait::async_trait]
impl Readiness for PgStore {
    async fn ping(&self) -> Result<(), RepoError> {
        let mut conn = self.conn().await?;
        diesel::select(dsl::fixed::<diesel::sql_types::Integer>("1"))
            .execute(&mut conn)
            .await
            .map_err(RepoError::new)?;
        Ok(())
    }
}

fn db(e: DieselError) -> RepoError {
    RepoError::new(e)
}

fn is_violation(e: &DieselError, kind: fn(&DatabaseErrorKind) -> bool) -> bool {
    matches!(e, DieselError::DatabaseError(k, _) if kind(k))
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
