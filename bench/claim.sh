#!/usr/bin/env bash
# The webhook claim's cost against the number of idle endpoints (issue 22, item 1): BENCH_IDLE
# endpoints that never receive anything (100,000 by default, of 10 per partner) beside 10 with
# 1,000 due deliveries each, on a database of its own. Times, in PostgreSQL (`EXPLAIN ANALYZE`,
# the median of BENCH_RUNS runs, each rolled back so every run sees the same rows):
#   before: the one-statement claim of migrations up to 000010, which walks every enabled endpoint;
#   after:  with migration 000011, `PICK_SQL` (due endpoints from `webhook_endpoint_queue`) plus
#           `CLAIM_SQL` over the endpoints it picked, and the `ADVANCE_SQL` that follows them
#           (statements copied from crates/partner-postgres/src/webhooks.rs).
# Both claim a batch of 512 with room 16 per endpoint, as the worker may; a VACUUM after each run
# keeps the rolled-back rows from slowing the next. "after: claim" includes the trigger the
# migration adds (it fires on the claim's UPDATE and skips leased rows). Needs psql only.
# Usage: bash bench/claim.sh   (BENCH_IDLE=100 for the small case; BENCH_DB, BENCH_RUNS)
set -euo pipefail
cd "$(dirname "$0")/.."
export PGHOST=127.0.0.1 PGPORT=5432 PGUSER=postgres
DB=${BENCH_DB:-pp_bench_claim}
IDLE=${BENCH_IDLE:-100000}
RUNS=${BENCH_RUNS:-9}
BUSY=10
PER=1000

psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres 2>/dev/null
psql -qc "CREATE DATABASE $DB" postgres
for m in migrations/*/up.sql; do
  case "$m" in *000011_webhook_endpoint_queue*) break ;; esac
  psql -q -v ON_ERROR_STOP=1 "$DB" -f "$m" >/dev/null
done

echo "seeding: $IDLE idle endpoints, $BUSY with $PER due deliveries each"
psql -q -v ON_ERROR_STOP=1 "$DB" <<SQL
INSERT INTO partners (partner_id, name, email, active, dna_access, headless_links, default_lang, enabled_langs,
  cs_subscription_active, cs_manual_override, cs_yearly_bundle, cs_services, created_at, updated_at)
SELECT 'p-' || g, 'Bench ' || g, 'ops' || g || '@bench.test', true, false, true, 'en', '{en}',
  false, false, false, '{}', now(), now() FROM generate_series(0, ($IDLE + $BUSY) / 10) g;
INSERT INTO webhook_endpoints (id, partner_id, url, events, secret, created_at, updated_at)
SELECT gen_random_uuid(), 'p-' || (g / 10), 'https://127.0.0.1:9/hook/' || g, '{lead.created}',
  'whsec_bench0123456789abcdefghijklmnopqrstuvwxyzABCD', now(), now()
FROM generate_series(0, $IDLE + $BUSY - 1) g;
CREATE TABLE bench_busy AS SELECT id FROM webhook_endpoints ORDER BY id LIMIT $BUSY;
WITH ev AS (
  INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at)
  SELECT gen_random_uuid(), w.partner_id, 'lead.created', gen_random_uuid()::text, '{}',
    now() - interval '1 hour' + g * interval '1 ms'
  FROM bench_busy b JOIN webhook_endpoints w ON w.id = b.id, generate_series(1, $PER) g
  RETURNING id, partner_id, created_at)
INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, attempts, next_attempt_at, created_at)
SELECT gen_random_uuid(), w.id, w.partner_id, ev.id, 'lead.created', 'pending', 0, ev.created_at, ev.created_at
FROM ev JOIN webhook_endpoints w ON w.partner_id = ev.partner_id AND w.id IN (SELECT id FROM bench_busy);
VACUUM ANALYZE;
SQL

# The median "Execution Time" of the EXPLAIN ANALYZEs in a psql script run RUNS times.
median_ms() {
  local label=$1 file=$2
  for _ in $(seq "$RUNS"); do cat "$file"; done \
    | psql -qAt -v ON_ERROR_STOP=1 "$DB" 2>&1 \
    | awk -v label="$label" '
        /^Execution Time:/ { t[++n] = $3 }
        END { if (n == 0) { print label ": no timing"; exit 1 }
              asort(t); printf "%-44s median %8.2f ms  (min %.2f, max %.2f, %d runs)\n", label, t[int((n + 1) / 2)], t[1], t[n], n }'
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat > "$work/before.sql" <<'SQL'
BEGIN;
EXPLAIN (ANALYZE, TIMING OFF)
WITH busy AS (
  SELECT * FROM unnest('{}'::uuid[], '{}'::int4[]) AS b(endpoint_id, room)),
ep AS (
  SELECT e.id, COALESCE(b.room, 16) AS room
  FROM webhook_endpoints e LEFT JOIN busy b ON b.endpoint_id = e.id
  WHERE COALESCE(b.room, 16) > 0 AND e.disabled_at IS NULL
  ORDER BY random()),
picked AS (
  SELECT p.id FROM ep CROSS JOIN LATERAL (
    SELECT d.id FROM webhook_deliveries d
    WHERE d.endpoint_id = ep.id AND d.status = 'pending' AND d.next_attempt_at <= now() AND d.attempts - d.attempt_base < 9
    ORDER BY d.next_attempt_at LIMIT ep.room
    FOR UPDATE SKIP LOCKED) p
  LIMIT 512),
claimed AS (
  UPDATE webhook_deliveries d
  SET attempts = d.attempts + 1, next_attempt_at = now() + interval '65 s', lease_token = gen_random_uuid()
  FROM picked WHERE d.id = picked.id
  RETURNING d.id, d.endpoint_id, d.lease_token, d.attempts - d.attempt_base AS attempts, d.kind, d.event_id)
SELECT c.id, c.endpoint_id, c.lease_token, c.attempts, c.kind, ev.created_at AS event_created_at,
  ev.subject, ev.extra::text AS extra, w.url, w.secret, w.custom_header_name, w.custom_header_value
FROM claimed c JOIN domain_events ev ON ev.id = c.event_id JOIN webhook_endpoints w ON w.id = c.endpoint_id;
ROLLBACK;
VACUUM webhook_deliveries;
SQL

median_ms "before: claim over all endpoints" "$work/before.sql"

psql -q -v ON_ERROR_STOP=1 "$DB" -f migrations/2026-11-26-000011_webhook_endpoint_queue/up.sql >/dev/null
psql -q "$DB" -c "VACUUM ANALYZE webhook_endpoint_queue"
echo "markers: $(psql -qAt "$DB" -c 'SELECT count(*) FROM webhook_endpoint_queue')"

PICK="
  WITH busy AS (
    SELECT * FROM unnest('{}'::uuid[], '{}'::int4[]) AS b(endpoint_id, room))
  SELECT q.endpoint_id AS id, COALESCE(b.room, 16) AS room
  FROM webhook_endpoint_queue q JOIN webhook_endpoints e ON e.id = q.endpoint_id
    LEFT JOIN busy b ON b.endpoint_id = q.endpoint_id
  WHERE q.due_at <= now() AND COALESCE(b.room, 16) > 0 AND e.disabled_at IS NULL
  ORDER BY random() LIMIT 512"

cat > "$work/pick.sql" <<SQL
EXPLAIN (ANALYZE, TIMING OFF) $PICK;
SQL
cat > "$work/claim.sql" <<SQL
BEGIN;
SELECT array_agg(id)::text AS ids, array_agg(room)::text AS rooms FROM ($PICK) p \gset
EXPLAIN (ANALYZE, TIMING OFF)
WITH ep AS MATERIALIZED (
  SELECT u.id, u.room FROM unnest(:'ids'::uuid[], :'rooms'::int4[]) WITH ORDINALITY AS u(id, room, ord)
  JOIN webhook_endpoints e ON e.id = u.id
  WHERE e.disabled_at IS NULL
  ORDER BY u.ord),
picked AS (
  SELECT p.id FROM ep CROSS JOIN LATERAL (
    SELECT d.id FROM webhook_deliveries d
    WHERE d.endpoint_id = ep.id AND d.status = 'pending' AND d.next_attempt_at <= now() AND d.attempts - d.attempt_base < 9
    ORDER BY d.next_attempt_at LIMIT ep.room
    FOR UPDATE SKIP LOCKED) p
  LIMIT 512),
claimed AS (
  UPDATE webhook_deliveries d
  SET attempts = d.attempts + 1, next_attempt_at = now() + interval '65 s', lease_token = gen_random_uuid()
  FROM picked WHERE d.id = picked.id
  RETURNING d.id, d.endpoint_id, d.lease_token, d.attempts - d.attempt_base AS attempts, d.kind, d.event_id)
SELECT c.id, c.endpoint_id, c.lease_token, c.attempts, c.kind, ev.created_at AS event_created_at,
  ev.subject, ev.extra::text AS extra, w.url, w.secret, w.custom_header_name, w.custom_header_value
FROM claimed c JOIN domain_events ev ON ev.id = c.event_id JOIN webhook_endpoints w ON w.id = c.endpoint_id;
ROLLBACK;
VACUUM webhook_deliveries;
SQL
# The advance after a claim that left every picked endpoint short of its room (the costliest case).
cat > "$work/advance.sql" <<SQL
BEGIN;
SELECT array_agg(endpoint_id)::text AS locked FROM (
  SELECT endpoint_id FROM webhook_endpoint_queue WHERE endpoint_id IN (SELECT id FROM bench_busy)
  FOR UPDATE SKIP LOCKED) l \gset
EXPLAIN (ANALYZE, TIMING OFF)
WITH n AS (
  SELECT q.endpoint_id, (SELECT min(d.next_attempt_at) FROM webhook_deliveries d
    WHERE d.endpoint_id = q.endpoint_id AND d.status = 'pending') AS due
  FROM webhook_endpoint_queue q WHERE q.endpoint_id = ANY(:'locked'::uuid[])),
gone AS (
  DELETE FROM webhook_endpoint_queue q USING n WHERE q.endpoint_id = n.endpoint_id AND n.due IS NULL)
UPDATE webhook_endpoint_queue q SET due_at = n.due FROM n
WHERE q.endpoint_id = n.endpoint_id AND n.due <> q.due_at;
ROLLBACK;
VACUUM webhook_endpoint_queue;
SQL

median_ms "after: pick (due endpoints)" "$work/pick.sql"
median_ms "after: claim over the picked endpoints" "$work/claim.sql"
median_ms "after: advance of 10 markers" "$work/advance.sql"

# What the marking trigger costs the outbox: pgbench (16 connections, BENCH_INGEST_SECONDS each) of
# one event with its deliveries to partner p-1's 10 endpoints, the trigger on and off in turn.
# (Off is no option for the server: the claim would never see these deliveries.)
secs=${BENCH_INGEST_SECONDS:-10}
cat > "$work/ingest.sql" <<'SQL'
WITH ev AS (
  INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at)
  VALUES (gen_random_uuid(), 'p-1', 'lead.created', gen_random_uuid()::text, '{}'::jsonb, now()) RETURNING id)
INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, attempts, next_attempt_at, created_at)
SELECT gen_random_uuid(), w.id, w.partner_id, ev.id, 'lead.created', 'pending', 0, now(), now()
FROM webhook_endpoints w, ev WHERE w.partner_id = 'p-1' AND 'lead.created' = ANY (w.events) AND w.disabled_at IS NULL;
SQL
if command -v pgbench >/dev/null; then
  for _ in 1 2 3; do
    for mode in DISABLE ENABLE; do
      psql -q "$DB" -c "ALTER TABLE webhook_deliveries $mode TRIGGER webhook_deliveries_mark_inserted"
      tps=$(pgbench -n -c 16 -j 2 -T "$secs" -M prepared -f "$work/ingest.sql" "$DB" 2>&1 | awk '/^tps/ {printf "%.0f", $3}')
      printf 'outbox insert, trigger %-8s %s events/s\n' "$( [ $mode = ENABLE ] && echo on || echo off)" "$tps"
    done
  done
  psql -q "$DB" -c "ALTER TABLE webhook_deliveries ENABLE TRIGGER webhook_deliveries_mark_inserted"
fi
