//! Where each test's database comes from.
//!
//! Migrating a fresh database for every test costs more than the test itself, so each run of the
//! test binary builds (or finds) a *template* database migrated once, and every test gets a copy
//! of it with `CREATE DATABASE … TEMPLATE`, a file-level copy. The template's name carries a hash
//! of the `migrations/` directory, so changing a migration makes a new template instead of
//! reusing a stale one.
//!
//! Several test binaries run at the same time on one PostgreSQL (other worktrees, other
//! engineers), so:
//! - the template is built under a PostgreSQL advisory lock: one builder, the others wait and then
//!   find it ready. It is complete only once marked `IS_TEMPLATE`; a half-built one (a killed
//!   run) is dropped and built again.
//! - the template refuses connections (`ALLOW_CONNECTIONS false`), because `CREATE DATABASE …
//!   TEMPLATE` fails while any session is connected to it.
//! - leftovers (databases of killed runs, templates of other migration sets) are swept at start,
//!   but only when older than [`SWEEP_AGE`] and with nobody connected: a database of a test binary
//!   running right now is young or in use, and a plain `DROP DATABASE` (without `FORCE`) refuses
//!   one that is in use.

use std::path::Path;

use diesel::sql_types::{BigInt, Bool, Text};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};

/// Advisory lock key (in the `postgres` database) serialising template builds and sweeps.
const TEMPLATE_LOCK: i64 = 0x7070_5f74_6573_7473;
/// Leftovers younger than this may belong to a test binary still running.
const SWEEP_AGE: &str = "1 hour";
/// Prefixes of the per-test databases and of the templates: the sweep looks at nothing else
/// (its `LIKE` patterns spell them out, with `_` escaped).
const TEST_DB_PREFIX: &str = "pp_test_";
const TEMPLATE_PREFIX: &str = "pp_tpl_";

/// The PostgreSQL server the tests use (`TEST_DATABASE_URL`, without a database name).
pub fn server_url() -> String {
    std::env::var("TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".to_owned())
}

/// The URL of database `name` on the test server.
pub fn database_url(name: &str) -> String {
    format!("{}/{name}", server_url())
}

/// A unique name for a per-test database.
pub fn fresh_name() -> String {
    format!("{TEST_DB_PREFIX}{}", uuid::Uuid::new_v4().simple())
}

/// Creates a migrated database for one test, cloned from the template; returns its name.
pub async fn clone_template() -> String {
    static TEMPLATE: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();
    let template = TEMPLATE
        .get_or_init(|| async {
            let mut conn = maintenance().await;
            let name = template_name();
            ensure_template(&mut conn, &name).await;
            sweep(&mut conn, &name).await;
            name
        })
        .await;
    let name = fresh_name();
    let mut conn = maintenance().await;
    let create = format!(
        "CREATE DATABASE {} TEMPLATE {}",
        quote(&name),
        quote(template)
    );
    if let Err(e) = diesel::sql_query(&create).execute(&mut conn).await {
        // Another run's sweep may have dropped the template (it was old and of other migrations
        // as seen from there): build it again, once.
        eprintln!("cloning {template} failed ({e}); building it again");
        ensure_template(&mut conn, template).await;
        diesel::sql_query(&create)
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("cloning {template}: {e}"));
    }
    name
}

/// A connection to the server's `postgres` maintenance database.
async fn maintenance() -> AsyncPgConnection {
    let url = database_url("postgres");
    <AsyncPgConnection as AsyncConnection>::establish(&url)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"))
}

/// `pp_tpl_` and the first 16 hex digits of a SHA-256 over the migrations' paths and contents.
fn template_name() -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../migrations");
    let mut files = Vec::new();
    collect(&dir, &dir, &mut files);
    files.sort();
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for (path, contents) in &files {
        ctx.update(path.as_bytes());
        ctx.update(&[0]);
        ctx.update(&(contents.len() as u64).to_le_bytes());
        ctx.update(contents);
    }
    let hex: String = ctx
        .finish()
        .as_ref()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{TEMPLATE_PREFIX}{hex}")
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            collect(root, &path, out);
        } else {
            let rel = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .to_string_lossy()
                .into_owned();
            let contents =
                std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            out.push((rel, contents));
        }
    }
}

#[derive(diesel::QueryableByName)]
struct Found {
    #[diesel(sql_type = Bool)]
    found: bool,
}

/// Makes sure the template `name` exists, migrated and marked as a template.
async fn ensure_template(conn: &mut AsyncPgConnection, name: &str) {
    lock(conn).await;
    let ready = diesel::sql_query(
        "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1 AND datistemplate) AS found",
    )
    .bind::<Text, _>(name)
    .get_result::<Found>(conn)
    .await
    .expect("looking for the template")
    .found;
    if !ready {
        let q = quote(name);
        // A template that is not marked ready was left half-built by a killed run.
        for sql in [
            format!("DROP DATABASE IF EXISTS {q} WITH (FORCE)"),
            format!("CREATE DATABASE {q}"),
        ] {
            diesel::sql_query(&sql)
                .execute(conn)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
        // The server's own migration code, as `partner-server migrate` runs it.
        partner_postgres::migrate(&database_url(name))
            .await
            .unwrap_or_else(|e| panic!("migrating {name}: {e}"));
        let sql = format!("ALTER DATABASE {q} WITH IS_TEMPLATE true ALLOW_CONNECTIONS false");
        diesel::sql_query(&sql)
            .execute(conn)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    unlock(conn).await;
}

#[derive(diesel::QueryableByName)]
struct Leftover {
    #[diesel(sql_type = Text)]
    datname: String,
    #[diesel(sql_type = Bool)]
    datistemplate: bool,
}

/// Drops leftovers of earlier runs: per-test databases and templates of other migration sets,
/// older than [`SWEEP_AGE`] and with no session connected. Best effort: a failure is reported
/// and the run goes on.
async fn sweep(conn: &mut AsyncPgConnection, current_template: &str) {
    lock(conn).await;
    // PostgreSQL keeps no creation time for a database; its `PG_VERSION` file is written once,
    // when the database is created. Reading it needs superuser (or pg_read_server_files): without
    // it the sweep finds nothing.
    let found = diesel::sql_query(format!(
        "SELECT d.datname, d.datistemplate FROM pg_database d
          WHERE (d.datname LIKE 'pp\\_test\\_%' OR d.datname LIKE 'pp\\_tpl\\_%')
            AND d.datname <> $1
            AND (pg_stat_file('base/' || d.oid || '/PG_VERSION', true)).modification
                < now() - interval '{SWEEP_AGE}'
            AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datid = d.oid)"
    ))
    .bind::<Text, _>(current_template)
    .load::<Leftover>(conn)
    .await;
    match found {
        Err(e) => eprintln!("not sweeping old test databases: {e}"),
        Ok(found) => {
            for d in found {
                let q = quote(&d.datname);
                let mut sqls = Vec::new();
                if d.datistemplate {
                    sqls.push(format!("ALTER DATABASE {q} WITH IS_TEMPLATE false"));
                }
                // No `FORCE`: a database someone connected to since the query stays.
                sqls.push(format!("DROP DATABASE IF EXISTS {q}"));
                for sql in sqls {
                    if let Err(e) = diesel::sql_query(&sql).execute(conn).await {
                        eprintln!("sweeping {}: {e}", d.datname);
                        break;
                    }
                }
            }
        }
    }
    unlock(conn).await;
}

async fn lock(conn: &mut AsyncPgConnection) {
    diesel::sql_query("SELECT pg_advisory_lock($1)")
        .bind::<BigInt, _>(TEMPLATE_LOCK)
        .execute(conn)
        .await
        .expect("advisory lock");
}

async fn unlock(conn: &mut AsyncPgConnection) {
    diesel::sql_query("SELECT pg_advisory_unlock($1)")
        .bind::<BigInt, _>(TEMPLATE_LOCK)
        .execute(conn)
        .await
        .expect("advisory unlock");
}

fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}
