//! What the store's own database tests share: a fresh migrated database of the tests' real
//! PostgreSQL, a backlog to plan against, and the plan PostgreSQL keeps for a prepared statement.

use diesel::sql_types::Text;
use diesel_async::{AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection};

/// A new database of the tests' real PostgreSQL (`TEST_DATABASE_URL`), migrated, named
/// `pp_test_<what>_…` (the integration tests' prefix: their sweep drops what a killed run left);
/// the caller drops it ([`crate::drop_database`]).
pub(crate) async fn fresh_test_database(what: &str) -> String {
    let server = std::env::var("TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".to_owned());
    let url = format!(
        "{server}/pp_test_{what}_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
    );
    crate::ensure_database(&url).await.expect("database");
    crate::migrate(&url).await.expect("migrated");
    url
}

/// A partner (`wh-1`) with one endpoint and 440 pending deliveries (each with its lead and
/// event, as the outbox writes them), due an hour ago; no `ANALYZE`.
pub(crate) const BACKLOG_SQL: &str = "\
INSERT INTO partners (partner_id, name, email, active, dna_access, headless_links, default_lang, enabled_langs,
  cs_subscription_active, cs_manual_override, cs_yearly_bundle, cs_services, created_at, updated_at)
VALUES ('wh-1', 'Plan', 'ops@plan.test', true, false, true, 'en', '{en}', false, false, false, '{}', now(), now());
INSERT INTO webhook_endpoints (id, partner_id, url, events, secret, created_at, updated_at)
VALUES (gen_random_uuid(), 'wh-1', 'https://127.0.0.1:1/hook', '{lead.created}',
  'whsec_plan0123456789abcdefghijklmnopqrstuvwxyzABCDEF', now(), now());
WITH l AS (
  INSERT INTO leads (id, partner_id, first_name, last_name, email, email_consent, phone, sms_consent,
    origin, location, is_test, created_at, updated_at)
  SELECT gen_random_uuid(), 'wh-1', 'Ann', 'Lee', 'ann@example.com', true, '+1 555 0100', true,
    'managed-website', 'Austin, TX', false, clock_timestamp(), clock_timestamp() FROM generate_series(1, 440)
  RETURNING id, partner_id, created_at),
ev AS (
  INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at)
  SELECT uuid_v7(), partner_id, 'lead.created', id::text, '{}', created_at FROM l
  RETURNING id, partner_id, created_at)
INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, attempts, next_attempt_at, created_at)
SELECT uuid_v7(), w.id, w.partner_id, ev.id, 'lead.created', 'pending', 0, ev.created_at - interval '1 hour', ev.created_at
FROM ev JOIN webhook_endpoints w ON w.partner_id = ev.partner_id;";

#[derive(diesel::QueryableByName)]
struct PlanLine {
    #[diesel(sql_type = Text, column_name = "QUERY PLAN")]
    line: String,
}

/// The generic plan PostgreSQL caches for `statement` once prepared with the parameter
/// types `types` (`plan_cache_mode = force_generic_plan`), explained for the arguments `args`,
/// one line per node.
pub(crate) async fn generic_plan(
    conn: &mut AsyncPgConnection,
    statement: &str,
    types: &str,
    args: &str,
) -> Vec<String> {
    conn.batch_execute(&format!(
        "SET plan_cache_mode = force_generic_plan; PREPARE planned({types}) AS {statement}"
    ))
    .await
    .expect("prepared");
    let plan = diesel::sql_query(format!("EXPLAIN EXECUTE planned({args})"))
        .load::<PlanLine>(conn)
        .await
        .expect("explained")
        .into_iter()
        .map(|l| l.line)
        .collect();
    conn.batch_execute("DEALLOCATE planned; RESET plan_cache_mode")
        .await
        .expect("deallocated");
    plan
}

/// The part of `plan` under the CTE `name`: up to the next CTE or the top node's next child
/// (both indented by two spaces under the top node).
pub(crate) fn cte_part(plan: &[String], name: &str) -> String {
    let head = format!("  CTE {name}");
    plan.iter()
        .skip_while(|l| **l != head)
        .skip(1)
        .take_while(|l| !l.starts_with("  CTE ") && !l.starts_with("  ->"))
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join("\n")
}
