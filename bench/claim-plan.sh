#!/usr/bin/env bash
# The claim statement's cached generic plan on a database without statistics (issue 22): for
# each git revision given, CLAIM_SQL is read from that revision's
# crates/partner-postgres/src/claim.rs; for each table size, a new session prepares it, executes
# it six times (PostgreSQL builds the generic plan at the sixth, from the table's size then, and
# the session keeps it), and prints how the claim's UPDATE reaches the rows it picked. Last, for
# each revision, the plan a session built at CLAIM_PLAN_AT deliveries (default 440) is kept while
# the table grows to CLAIM_PLAN_GROW deliveries (default 20,000), all but the last 1,000
# delivered, and one claim of 32 rows is timed with EXPLAIN ANALYZE: what a worker connection whose plan was made early pays later.
# As on a fresh database before its first analyze, or with autovacuum off (as on our shared
# cluster): no ANALYZE is run. Loopback only; its own database; bounded.
# Usage: bash bench/claim-plan.sh [REV...]   (default: ec0ab56 HEAD)
set -euo pipefail
cd "$(dirname "$0")/.."
export PGHOST=127.0.0.1 PGPORT=${BENCH_PGPORT:-5432} PGUSER=postgres
DB=${BENCH_DB:-pp_bench_claim_plan}
BIN=${BENCH_BIN:-target/release/partner-server}
AT=${CLAIM_PLAN_AT:-440}
GROW=${CLAIM_PLAN_GROW:-20000}
REVS=("$@")
[ ${#REVS[@]} -gt 0 ] || REVS=(ec0ab56 HEAD)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"; psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres >/dev/null 2>&1 || true' EXIT

# claim_sql REV: the statement as PostgreSQL receives it.
claim_sql() {
  git show "$1:crates/partner-postgres/src/claim.rs" | python3 -c '
import re, sys
s = sys.stdin.read()
m = re.search(r"const CLAIM_SQL: &str = \"\\\n(.*?)\";\n", s, re.S)
print(m.group(1).replace("\\\n", "\n").replace(" \\", "").replace("\\", ""))'
}
for rev in "${REVS[@]}"; do claim_sql "$rev" > "$WORK/$rev.sql"; done

reset_db() {
  psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres
  psql -qc "CREATE DATABASE $DB" postgres
  DATABASE_URL="postgres://postgres@127.0.0.1:$PGPORT/$DB" "$BIN" migrate >/dev/null 2>&1
  psql -q "$DB" -c "
    INSERT INTO partners (partner_id, name, email, active, dna_access, headless_links, default_lang, enabled_langs,
      cs_subscription_active, cs_manual_override, cs_yearly_bundle, cs_services, created_at, updated_at)
    VALUES ('wh-1', 'Bench', 'ops@bench.test', true, false, true, 'en', '{en}', false, false, false, '{}', now(), now());
    INSERT INTO webhook_endpoints (id, partner_id, url, events, secret, created_at, updated_at)
    VALUES (gen_random_uuid(), 'wh-1', 'https://127.0.0.1:1/hook', '{lead.created}',
      'whsec_bench0123456789abcdefghijklmnopqrstuvwxyzABCD', now(), now());"
}
# fill_sql N: N more leads, each with its event and its pending delivery (as the outbox writes
# them), due an hour before they are written.
fill_sql() {
  cat <<SQL
WITH l AS (
  INSERT INTO leads (id, partner_id, first_name, last_name, email, email_consent, phone, sms_consent,
    origin, location, is_test, created_at, updated_at)
  SELECT gen_random_uuid(), 'wh-1', 'Ann', 'Lee', 'ann@example.com', true, '+1 555 0100', true,
    'managed-website', 'Austin, TX', false, clock_timestamp(), clock_timestamp() FROM generate_series(1, $1)
  RETURNING id, partner_id, created_at),
ev AS (
  INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at)
  SELECT uuid_v7(), partner_id, 'lead.created', id::text, '{}', created_at FROM l
  RETURNING id, partner_id, created_at)
INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, attempts, next_attempt_at, created_at)
SELECT uuid_v7(), w.id, w.partner_id, ev.id, 'lead.created', 'pending', 0, ev.created_at - interval '1 hour', ev.created_at
FROM ev JOIN webhook_endpoints w ON w.partner_id = ev.partner_id;
SQL
}
fill() { fill_sql "$1" | psql -q "$DB"; }
# session REV: prepares the claim (room 32) and runs it six times (nothing due: the rows are
# due an hour ago only at `now`, and the claims ask at an earlier `now`).
session() {
  echo "PREPARE c(timestamptz, timestamptz, uuid[], int4[], int4, int8, int4) AS "
  cat "$WORK/$1.sql"; echo ";"
  for _ in 1 2 3 4 5 6; do
    echo "EXECUTE c(now() - interval '2 hours', now() + interval '30 s', '{}', '{}', 32, 512, 7);"
  done
}
path_of() { sed -n '/CTE claimed/,/Nested Loop Left Join/p' | grep -oE '(Seq Scan|Tid Scan|Index Scan using [a-z_]+|Bitmap Heap Scan|Hash Join) on webhook_deliveries d_1|Hash Join|Seq Scan on webhook_deliveries d_1' | head -2 | paste -sd ' ' -; }

echo "generic plan of the claim's UPDATE, by table size at the sixth execution (no statistics):"
printf '%-8s' "rows"; for rev in "${REVS[@]}"; do printf ' | %-45s' "$rev"; done; echo
reset_db
total=0
for n in 0 30 100 300 440 1000 3000 10000; do
  [ "$n" -gt "$total" ] && fill $((n - total)) && total=$n
  printf '%-8s' "$n"
  for rev in "${REVS[@]}"; do
    { session "$rev"; echo "EXPLAIN EXECUTE c(now(), now() + interval '30 s', '{}', '{}', 32, 512, 7);"; } \
      | psql -q "$DB" 2>&1 | path_of > "$WORK/path.txt"
    printf ' | %-45s' "$(cat "$WORK/path.txt")"
  done
  echo
done

echo
echo "a plan made at $AT deliveries, used at $GROW (1,000 pending; one claim of 32, EXPLAIN ANALYZE):"
for rev in "${REVS[@]}"; do
  reset_db
  fill "$AT"
  # The rows written first are delivered by then, as in a live run: the due ones lie behind them.
  { fill_sql $((GROW - AT))
    echo "UPDATE webhook_deliveries SET status = 'delivered', next_attempt_at = NULL, delivered_at = now()
      WHERE id IN (SELECT id FROM webhook_deliveries ORDER BY id LIMIT $((GROW - 1000)));"
  } > "$WORK/fill.sql"
  # One session builds its plan at $AT rows; the table grows from another (psql's \!) while
  # the first keeps its plan; then the first claims.
  { session "$rev"
    echo "\\! psql -q -h $PGHOST -p $PGPORT -U postgres $DB -f $WORK/fill.sql"
    echo "SELECT count(*) AS rows_now FROM webhook_deliveries;"
    echo "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, SUMMARY ON) EXECUTE c(now(), now() + interval '30 s', '{}', '{}', 32, 512, 7);"
  } | psql -q "$DB" > "$WORK/an.txt" 2>&1 || true
  printf '%-10s claimed %s rows, UPDATE reached them by %s, %s buffers, %s\n' "$rev" \
    "$(sed -n '/Update on webhook_deliveries d_1/{s/.*actual rows=\([0-9]*\).*/\1/p;q}' "$WORK/an.txt")" \
    "$(path_of < "$WORK/an.txt")" \
    "$(sed -n '/Update on webhook_deliveries d_1/,/Buffers/{s/.*Buffers: shared hit=\([0-9]*\).*/\1/p}' "$WORK/an.txt" | head -1)" \
    "$(grep -o 'Execution Time: [0-9.]* ms' "$WORK/an.txt")"
  [ -z "${CLAIM_PLAN_SHOW:-}" ] || { grep -A2 rows_now "$WORK/an.txt"; sed -n '/CTE claimed/,/Nested Loop Left Join/p' "$WORK/an.txt"; }
done
