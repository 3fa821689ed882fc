#!/usr/bin/env bash
# Leads listing benchmark: seeds 1,000,000 leads across 1,000 partners (one holds 100,000),
# then measures GET /api/v1/leads with wrk at 64 connections (first page, and a page 1,000
# pages deep) against the same SQL run directly by pgbench. Stops by itself; loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."

PGHOST=127.0.0.1; PGPORT=5432; PGUSER=postgres
export PGHOST PGPORT PGUSER
DB=${BENCH_DB:-pp_bench}
PORT=${BENCH_PORT:-18090}
DURATION=${BENCH_DURATION:-15s}
CONNS=64
BIG=bench-big
export DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB"
export PARTNER_BIND="127.0.0.1:$PORT" PARTNER_TOKEN_PEPPER=bench-pepper PARTNER_INTERNAL_TOKEN=bench-internal-token-0123456789abcdef
export PARTNER_RATE_LIMIT=1000000000/1s RUST_LOG=warn PARTNER_DB_POOL_SIZE=${BENCH_POOL:-32}

command -v wrk >/dev/null || { apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }; }
command -v pgbench >/dev/null || { echo "pgbench is missing (it ships with the PostgreSQL server package)" >&2; exit 1; }
cargo build --release -q -p partner-server
BIN=target/release/partner-server

echo "== seeding $DB"
psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres
$BIN migrate
start=$(date +%s.%N)
psql -q "$DB" <<SQL
-- Set-based generation inside PostgreSQL: the fastest bulk path, no per-row round trips.
INSERT INTO partners (partner_id, name, email, active, dna_access, headless_links, default_lang, enabled_langs,
  cs_subscription_active, cs_manual_override, cs_yearly_bundle, cs_services, created_at, updated_at)
SELECT CASE WHEN g = 1 THEN '$BIG' ELSE 'bench-' || g END, 'Bench ' || g, 'ops' || g || '@bench.test', true, false, true,
  'en', '{en}', false, false, false, '{}', now(), now()
FROM generate_series(1, 1000) g;

-- 100,000 leads for the big partner, 900,000 spread over the other 999.
INSERT INTO leads (id, partner_id, sub_id, first_name, last_name, email, email_consent, phone, sms_consent,
  origin, location, question_id, is_test, test_source, created_at, updated_at)
SELECT gen_random_uuid(),
  CASE WHEN g <= 100000 THEN '$BIG' ELSE 'bench-' || (2 + (g % 999)) END,
  NULLIF(g % 4, 0), 'First' || g, 'Last' || g, 'lead' || g || '@example.com', g % 7 <> 0,
  '+1 555 ' || lpad((g % 10000)::text, 4, '0'), g % 5 <> 0,
  CASE WHEN g % 10 >= 6 THEN 'headless_intake' ELSE 'managed-website' END, 'Austin, TX', NULL,
  g % 10 = 9, CASE WHEN g % 10 = 9 THEN 'simulation' END,
  timestamptz '2026-11-01 00:00:00+00' - make_interval(secs => g * 2.5),
  timestamptz '2026-11-01 00:00:00+00' - make_interval(secs => g * 2.5)
FROM generate_series(1, 1000000) g;
SQL
# Vacuum (which also analyzes) and flush the new rows now, so neither autovacuum, set off by a
# million inserts, nor checkpoint I/O lands in the measurements.
psql -q "$DB" -c 'VACUUM (ANALYZE) leads' -c 'CHECKPOINT'
end=$(date +%s.%N)
echo "seeded 1,000,000 leads in $(awk "BEGIN {printf \"%.1f\", $end - $start}") s"

$BIN serve --no-migrate &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.2; done

I="Authorization: Bearer $PARTNER_INTERNAL_TOKEN"
USER_ID=$(curl -sf -X POST "http://127.0.0.1:$PORT/internal/v1/users" -H "$I" \
  -d "{\"email\":\"bench@bench.test\",\"partnerId\":\"$BIG\",\"admin\":false}" | sed -E 's/.*"id":"([^"]+)".*/\1/')
TOKEN=$(curl -sf -X POST "http://127.0.0.1:$PORT/internal/v1/users/$USER_ID/tokens" -H "$I" | sed -E 's/.*"token":"([^"]+)".*/\1/')

# Walk 999 pages to reach the cursor of page 1,000 (50 rows a page: 49,950 rows deep).
CURSOR=""
for _ in $(seq 1 999); do
  CURSOR=$(curl -sf "http://127.0.0.1:$PORT/api/v1/leads${CURSOR:+?cursor=$CURSOR}" -H "Authorization: Bearer $TOKEN" \
    | sed -E 's/.*"nextCursor":"([^"]+)".*/\1/')
done
DEEP_ROW=$(psql -Atq "$DB" -c "SELECT created_at, id FROM leads WHERE partner_id = '$BIG' AND NOT is_test
  ORDER BY created_at DESC, id DESC OFFSET 49949 LIMIT 1")
DEEP_TS=${DEEP_ROW%|*}; DEEP_ID=${DEEP_ROW#*|}

run_wrk() { # name url
  local out
  out=$(wrk -t2 -c$CONNS -d"$DURATION" --latency -H "Authorization: Bearer $TOKEN" "$2")
  printf '%-18s %10s req/s   p50 %8s   p99 %8s\n' "$1" \
    "$(echo "$out" | awk '/Requests\/sec/ {print $2}')" \
    "$(echo "$out" | awk '$1 == "50%" {print $2}')" \
    "$(echo "$out" | awk '$1 == "99%" {print $2}')"
}

COLS="id, partner_id, sub_id, first_name, last_name, email, email_consent, phone, sms_consent, origin, location, question_id, test_source, created_at, updated_at"
cat > /tmp/bench-first.sql <<SQL
SELECT $COLS FROM leads WHERE partner_id = '$BIG' AND NOT is_test ORDER BY created_at DESC, id DESC LIMIT 51;
SQL
cat > /tmp/bench-deep.sql <<SQL
SELECT $COLS FROM leads WHERE partner_id = '$BIG' AND NOT is_test AND (created_at, id) < ('$DEEP_TS', '$DEEP_ID')
ORDER BY created_at DESC, id DESC LIMIT 51;
SQL
# The token lookup every authenticated request makes, as the server's diesel query has it.
HASH=$(python3 -c 'import hmac, hashlib, sys; print(hmac.new(sys.argv[1].encode(), sys.argv[2].encode(), hashlib.sha256).hexdigest())' "$PARTNER_TOKEN_PEPPER" "$TOKEN")
AUTH_SQL="SELECT t.id, t.token_hash, t.user_id, u.deleted_at IS NOT NULL, u.partner_id, p.active, u.admin, t.expires_at, t.revoked_at, t.last_used_at
FROM api_tokens t JOIN portal_users u ON u.id = t.user_id JOIN partners p ON p.partner_id = u.partner_id WHERE t.token_hash = '\\x$HASH' LIMIT 1;"
{ echo "$AUTH_SQL"; cat /tmp/bench-first.sql; } > /tmp/bench-first-req.sql
{ echo "$AUTH_SQL"; cat /tmp/bench-deep.sql; } > /tmp/bench-deep-req.sql

run_pgbench() { # name file
  local tps
  tps=$(pgbench -n -M prepared -c $CONNS -j 2 -T "${DURATION%s}" -f "$2" "$DB" 2>/dev/null | awk '/^tps/ {print $3}')
  printf '%-18s %10s tps\n' "$1" "$tps"
}

echo "== machine: $(nproc) cores, $(free -g | awk '/Mem/ {print $2}') GiB, $(uname -r); PostgreSQL $(psql -Atqc 'show server_version' postgres)"
echo "== wrk, $CONNS connections, $DURATION each (server: release build, pool $PARTNER_DB_POOL_SIZE)"
# Warm-up (caches, prepared statements, connection pool), not reported.
wrk -t2 -c$CONNS -d5s -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT/api/v1/leads" >/dev/null
run_wrk "healthz (no DB)" "http://127.0.0.1:$PORT/healthz"
if [ -n "${BENCH_PERF:-}" ]; then (sleep 3; perf record -F 999 -g -p $SERVER -o /tmp/bench-perf.data -- sleep 6 >/dev/null 2>&1) & fi
run_wrk "first page" "http://127.0.0.1:$PORT/api/v1/leads"
run_wrk "page 1000" "http://127.0.0.1:$PORT/api/v1/leads?cursor=$CURSOR"
echo "== pgbench, the same SQL, $CONNS clients, $DURATION each"
run_pgbench "first page SQL" /tmp/bench-first.sql
run_pgbench "page 1000 SQL" /tmp/bench-deep.sql
echo "== pgbench, each request's SQL (token lookup + page), $CONNS clients, $DURATION each"
run_pgbench "first page req" /tmp/bench-first-req.sql
run_pgbench "page 1000 req" /tmp/bench-deep-req.sql
echo "== plans"
psql -Atq "$DB" -c "EXPLAIN (ANALYZE, COSTS OFF) $(cat /tmp/bench-deep.sql)" | head -6
kill $SERVER
psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres
