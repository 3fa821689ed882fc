#!/usr/bin/env bash
# attack15: the reason for d4a4fbc, re-measured: the claim statement (CLAIM_SQL of MODE's claim.rs,
# pgbench -M prepared, so one prepared statement per connection as in the server) on a table
# that had no statistics when the connection planned it.  a15_plan.sh tid|main
# Autovacuum off for webhook_deliveries; SMALL pending rows on 4 endpoints, PLAN claims on one
# connection (the plan cache settles on a plan), then BIG more due rows, then CLAIMS claims on the
# same connection (batch BATCH, room BATCH): latency of the claims after the growth.
set -uo pipefail
MODE=$1
D="$(cd "$(dirname "$0")" && pwd)"
OUT=$D/out/a15plan_$MODE; rm -rf "$OUT"; mkdir -p "$OUT"
DB=pp_attack15_plan_$MODE
export PGHOST=127.0.0.1 PGUSER=postgres PGPORT=5432
case $MODE in
  tid) BIN=/work/bin/partner-server-tid; SRC=$D/../../crates/partner-postgres/src/claim.rs ;;
  main) BIN=/work/bin/partner-server-main; SRC=$OUT/claim_main.rs
    git -C "$D" show ${MAINREF:-ec0ab56}:crates/partner-postgres/src/claim.rs >"$SRC" ;;
esac
psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres
[ "${KEEP:-0}" = 1 ] || trap 'psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres' EXIT
DATABASE_URL=postgres://postgres@127.0.0.1:5432/$DB "$BIN" migrate >"$OUT/migrate.log" 2>&1 || { tail "$OUT/migrate.log"; exit 1; }
ID=$(psql -Atc "SELECT COALESCE(to_regprocedure('uuid_v7()')::text, 'gen_random_uuid()')" $DB)
rows() { psql -q $DB -c "
  WITH l AS (INSERT INTO leads (id, partner_id, first_name, last_name, email, email_consent, phone, sms_consent,
      origin, location, is_test, created_at, updated_at)
    SELECT gen_random_uuid(), 'demo-clinic', 'P', 'Lee', 'p@example.com', true, '+1 555 0100', true,
      'managed-website', 'Austin, TX', false, now() - interval '1 min', now() FROM generate_series(1, $1) RETURNING id, partner_id, created_at),
  ev AS (INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at)
    SELECT $ID, partner_id, 'lead.created', id::text, '{}', created_at FROM l RETURNING id, partner_id, created_at)
  INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, attempts, next_attempt_at, created_at)
  SELECT $ID, w.id, w.partner_id, ev.id, 'lead.created', 'pending', 0, ev.created_at, ev.created_at
  FROM ev JOIN webhook_endpoints w ON w.partner_id = ev.partner_id"; }
psql -q $DB -c "
  ALTER TABLE webhook_deliveries SET (autovacuum_enabled = false);
  INSERT INTO partners (partner_id, name, email, active, dna_access, headless_links, default_lang, enabled_langs,
    cs_subscription_active, cs_manual_override, cs_yearly_bundle, cs_services, created_at, updated_at)
  VALUES ('demo-clinic', 'A15', 'ops@a15.test', true, false, true, 'en', '{en}', false, false, false, '{}', now(), now());
  INSERT INTO webhook_endpoints (id, partner_id, url, events, secret, created_at, updated_at)
  SELECT gen_random_uuid(), 'demo-clinic', 'https://127.0.0.1:1/' || g, '{lead.created}', NULL, now(), now() FROM generate_series(1, 4) g;
  CREATE TABLE a15_claims (id uuid, endpoint_id uuid, lease uuid, attempts int, now timestamptz, lu timestamptz, at timestamptz, pid int, xid bigint);"
rows $(( ${SMALL:-300} / 4 ))
B=${BATCH:-32}
python3 "$D/a15_sql/extract.py" "$SRC" CLAIM_SQL >"$OUT/claim_raw.sql"
# One psql session, as one server connection: PREPARE, PLAN executions (the plan cache settles),
# then it waits while the table grows (BIG rows, another connection), then CLAIMS timed executions
# and the plan of one more (EXPLAIN ANALYZE).
{ echo "PREPARE c(timestamptz, timestamptz, uuid[], int4[], int4, int8, int4) AS $(cat "$OUT/claim_raw.sql");"
  for _ in $(seq 1 "${PLAN:-10}"); do echo "EXECUTE c(now(), now() + interval '10 min', '{}', '{}', $B, $B, 1000) \\g /dev/null"; done
  echo "\\! touch $OUT/planned"
  echo "\\! while [ ! -f $OUT/grown ]; do sleep 0.2; done"
  echo "\\timing on"
  for _ in $(seq 1 "${CLAIMS:-30}"); do echo "EXECUTE c(now(), now() + interval '10 min', '{}', '{}', $B, $B, 1000) \\g /dev/null"; done
  echo "\\timing off"
  echo "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE c(now(), now() + interval '10 min', '{}', '{}', $B, $B, 1000);"
} >"$OUT/session.sql"
psql -X -q $DB -f "$OUT/session.sql" >"$OUT/session.out" 2>&1 &
SP=$!
for _ in $(seq 1 300); do [ -f "$OUT/planned" ] && break; sleep 0.2; done
rows $(( ${BIG:-20000} / 4 ))
touch "$OUT/grown"
wait $SP
grep -i error "$OUT/session.out" | head -3
grep "^Time:" "$OUT/session.out" | awk '{print $2}' | sort -n | awk '{a[NR]=$1} END {printf "claims after the growth: n %d, p50 %.1f ms, max %.1f ms\n", NR, a[int(NR/2)+1], a[NR]}'
grep -A3 "Update on webhook_deliveries\|CTE claimed" "$OUT/session.out" | head -12
