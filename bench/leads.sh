#!/usr/bin/env bash
# Leads listing benchmark: seeds 1,000,000 leads across 1,000 partners (one holds 100,000),
# then measures GET /api/v1/leads with wrk at 64 connections (first page, and a page 1,000
# pages deep) against the same SQL run directly by pgbench at 64 clients, and prints the
# server/pgbench ratios, p99 and the server's RSS under load. Server and pgbench runs are
# interleaved (BENCH_ROUNDS rounds, medians reported), once per server pool size
# (BENCH_POOLS, default "8 16 32"). The server runs one statement per request (token lookup
# folded into the page); BENCH_COMPARE=/path/to/an/older/partner-server measures that binary
# too, against the two statements it sends (token lookup, then the page). Stops by itself;
# loopback only. BENCH_DATASET=pp_dataset measures an existing database of bench/dataset.sh
# instead (its big partner, 1,000,000 leads at scale 1, and its stored token; nothing seeded,
# nothing dropped).
set -euo pipefail
cd "$(dirname "$0")/.."

PGHOST=127.0.0.1; PGPORT=5432; PGUSER=postgres
export PGHOST PGPORT PGUSER
DB=${BENCH_DATASET:-${BENCH_DB:-pp_bench}}
PORT=${BENCH_PORT:-18090}
DURATION=${BENCH_DURATION:-8s}
CONNS=64
BIG=bench-big
# On the dataset, no retention pruning while measuring (its history is 30 days deep).
[ -z "${BENCH_DATASET:-}" ] || export PARTNER_WEBHOOK_RETENTION=90d PARTNER_EVENT_RETENTION=90d
[ -z "${BENCH_DATASET:-}" ] || BIG=$(psql -Atq "$DB" -c "SELECT value FROM dataset_info WHERE key = 'big_partner'")
export DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB"
export PARTNER_BIND="127.0.0.1:$PORT" PARTNER_TOKEN_PEPPER=bench-pepper PARTNER_INTERNAL_TOKEN=bench-internal-token-0123456789abcdef
export PARTNER_RATE_LIMIT=1000000000/1s RUST_LOG=warn PARTNER_DB_POOL_SIZE=32
# The server is measured once per pool size listed (its PostgreSQL connections; see "Pool size"
# in docs/performance.md). BENCH_POOL=n is the same as BENCH_POOLS=n.
POOLS=${BENCH_POOLS:-${BENCH_POOL:-8 16 32}}

command -v wrk >/dev/null || { apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }; }
command -v pgbench >/dev/null || { echo "pgbench is missing (it ships with the PostgreSQL server package)" >&2; exit 1; }
[ -n "${BENCH_BIN:-}" ] || cargo build --release -q -p partner-server
BIN=${BENCH_BIN:-${CARGO_TARGET_DIR:-target}/release/partner-server}

if [ -n "${BENCH_DATASET:-}" ]; then
  echo "== the dataset $DB: $(psql -Atq "$DB" -c "SELECT string_agg(key || ' ' || value, ', ' ORDER BY key) FROM dataset_info WHERE key IN ('scale', 'leads', 'big_leads', 'partners')")"
else
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
fi

SERVER=
start_server() { # binary
  "$1" serve --no-migrate &
  SERVER=$!
  for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.2; done
}
stop_server() { kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; SERVER=; }
trap 'stop_server; kill $SAMPLER 2>/dev/null || true' EXIT
SAMPLER=
start_server "$BIN"

I="Authorization: Bearer $PARTNER_INTERNAL_TOKEN"
if [ -n "${BENCH_DATASET:-}" ]; then
  TOKEN=$(psql -Atq "$DB" -c "SELECT value FROM dataset_info WHERE key = 'token'")
else
USER_ID=$(curl -sf -X POST "http://127.0.0.1:$PORT/internal/v1/users" -H "$I" \
  -d "{\"email\":\"bench@bench.test\",\"partnerId\":\"$BIG\",\"admin\":false}" | sed -E 's/.*"id":"([^"]+)".*/\1/')
TOKEN=$(curl -sf -X POST "http://127.0.0.1:$PORT/internal/v1/users/$USER_ID/tokens" -H "$I" | sed -E 's/.*"token":"([^"]+)".*/\1/')
fi

# Walk 999 pages to reach the cursor of page 1,000 (50 rows a page: 49,950 rows deep).
CURSOR=""
for _ in $(seq 1 999); do
  CURSOR=$(curl -sf "http://127.0.0.1:$PORT/api/v1/leads${CURSOR:+?cursor=$CURSOR}" -H "Authorization: Bearer $TOKEN" \
    | sed -E 's/.*"nextCursor":"([^"]+)".*/\1/')
done
DEEP_ROW=$(psql -Atq "$DB" -c "SELECT created_at, id FROM leads WHERE partner_id = '$BIG' AND NOT is_test
  ORDER BY created_at DESC, id DESC OFFSET 49949 LIMIT 1")
DEEP_TS=${DEEP_ROW%|*}; DEEP_ID=${DEEP_ROW#*|}

declare -A RPS P99
run_wrk() { # key name url
  local out
  out=$(wrk -t2 -c$CONNS -d"$DURATION" --latency -H "Authorization: Bearer $TOKEN" "$3")
  RPS[$1]=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  P99[$1]=$(echo "$out" | awk '$1 == "99%" {print $2}')
  printf '%-28s %10s req/s   p50 %8s   p99 %8s\n' "$2" "${RPS[$1]}" \
    "$(echo "$out" | awk '$1 == "50%" {print $2}')" "${P99[$1]}"
}
# The server's resident memory, sampled every 100 ms while it is under load.
rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$SERVER/status"; }
sample_rss() { # file
  while kill -0 "$SERVER" 2>/dev/null; do rss_kib >>"$1" 2>/dev/null || true; sleep 0.1; done
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
# The one statement the server now sends per request (crates/partner-postgres/src/leads.rs,
# LeadsForToken), as PostgreSQL's log shows it with the parameters filled in.
NOW_TS=$(psql -Atq "$DB" -c "SELECT now()")
one_sql() { # extra condition
  cat <<SQL
WITH t AS (SELECT t.id, t.token_hash, t.user_id, u.deleted_at IS NOT NULL AS user_deleted, u.partner_id, p.active, p.dna_access, u.admin, t.expires_at, t.revoked_at, t.last_used_at FROM api_tokens t JOIN portal_users u ON u.id = t.user_id JOIN partners p ON p.partner_id = u.partner_id WHERE t.token_hash = '\\x$HASH' LIMIT 1) SELECT t.id, t.token_hash, t.user_id, t.user_deleted, t.partner_id, t.active, t.dna_access, t.admin, t.expires_at, t.revoked_at, t.last_used_at, NULL::uuid, NULL::text, NULL::int2, NULL::text, NULL::text, NULL::text, NULL::bool, NULL::text, NULL::bool, NULL::text, NULL::text, NULL::text, NULL::text, NULL::timestamptz, NULL::timestamptz FROM t UNION ALL SELECT NULL::uuid, NULL::bytea, NULL::uuid, NULL::bool, NULL::text, NULL::bool, NULL::bool, NULL::bool, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz, l.id, l.partner_id, l.sub_id, l.first_name, l.last_name, l.email, l.email_consent, l.phone, l.sms_consent, l.origin, l.location, l.question_id, l.test_source, l.created_at, l.updated_at FROM t CROSS JOIN LATERAL (SELECT leads.* FROM leads WHERE leads.partner_id = t.partner_id AND t.revoked_at IS NULL AND NOT t.user_deleted AND t.active AND (t.expires_at IS NULL OR t.expires_at > '$NOW_TS') AND NOT leads.is_test$1 ORDER BY leads.created_at DESC, leads.id DESC LIMIT 51) l;
SQL
}
one_sql "" > /tmp/bench-first-one.sql
one_sql " AND (leads.created_at, leads.id) < ('$DEEP_TS', '$DEEP_ID')" > /tmp/bench-deep-one.sql

declare -A TPS
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
ROUNDS=${BENCH_ROUNDS:-3}
run_pgbench() { # key name file
  TPS[$1]=$(pgbench -n -M prepared -c $CONNS -j 2 -T "${DURATION%s}" -f "$3" "$DB" 2>/dev/null | awk '/^tps/ {print $3}')
  printf '%-28s %10s tps\n' "$2" "${TPS[$1]}"
}

# One server binary, interleaved with pgbench: after a warm-up, ROUNDS rounds of (wrk on the first
# page, pgbench of the SQL that binary sends for it, wrk on page 1,000, pgbench of its SQL), so
# each ratio compares two measurements taken seconds apart. On a shared machine the load drifts
# over minutes; a ratio of two runs a minute apart measures the drift, not the server.
measure_server() { # key binary sql-first sql-deep
  local rss=/tmp/bench-rss-$1.txt r
  [ -n "$SERVER" ] || start_server "$2"
  # Warm-up (caches, prepared statements, connection pool), not reported.
  wrk -t2 -c$CONNS -d5s -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT/api/v1/leads" >/dev/null
  local idle; idle=$(rss_kib)
  : >"$rss"; sample_rss "$rss" & SAMPLER=$!
  if [ -n "${BENCH_PERF:-}" ]; then (sleep 3; perf record -F 499 --call-graph dwarf,16384 -p $SERVER -o /tmp/bench-perf-$1.data -- sleep 6 >/dev/null 2>&1) & fi
  for r in $(seq 1 "$ROUNDS"); do
    run_wrk "$1-first-$r" "$1 r$r: first page" "http://127.0.0.1:$PORT/api/v1/leads"
    run_pgbench "$1-first-$r" "$1 r$r: pgbench, first page" "$3"
    run_wrk "$1-deep-$r" "$1 r$r: page 1000" "http://127.0.0.1:$PORT/api/v1/leads?cursor=$CURSOR"
    run_pgbench "$1-deep-$r" "$1 r$r: pgbench, page 1000" "$4"
    echo "$1 r$r: ratio first $(ratio "${RPS[$1-first-$r]}" "${TPS[$1-first-$r]}"), page 1000 $(ratio "${RPS[$1-deep-$r]}" "${TPS[$1-deep-$r]}"); load $(cut -d' ' -f1 /proc/loadavg)"
  done
  kill $SAMPLER 2>/dev/null || true; wait $SAMPLER 2>/dev/null || true
  local peak; peak=$(sort -n "$rss" | tail -1)
  echo "$1: server RSS $((idle / 1024)) MiB after the warm-up, $((peak / 1024)) MiB at the peak under load"
  stop_server
}

# Median of the arguments (numbers; units such as "ms" are stripped by the caller).
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
# wrk's latency (e.g. 850.00us, 12.3ms, 1.2s) in ms.
in_ms() { awk -v v="$1" 'BEGIN {n = v + 0; if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) n += 0; else if (v ~ /s$/) n *= 1000; printf "%.2f", n}'; }
summary() { # key label
  local page ratios p99s r
  for page in first deep; do
    ratios=(); p99s=()
    for r in $(seq 1 "$ROUNDS"); do
      ratios+=("$(ratio "${RPS[$1-$page-$r]}" "${TPS[$1-$page-$r]}")")
      p99s+=("$(in_ms "${P99[$1-$page-$r]}")")
    done
    printf '%s, %-10s ratio median %s (rounds: %s), p99 median %s ms (rounds: %s ms)\n' "$2" \
      "$([ $page = first ] && echo 'first page' || echo 'page 1000')" "$(median "${ratios[@]}")" "${ratios[*]}" \
      "$(median "${p99s[@]}")" "${p99s[*]}"
  done
}

# What the server sends for one request of each page, from PostgreSQL's own log.
PGLOG=${BENCH_PGLOG:-/var/log/postgresql/postgresql-15-main.log}
show_logged_sql() { # binary
  [ -r "$PGLOG" ] || return 0
  stop_server
  psql -qc "ALTER DATABASE $DB SET log_statement = 'all'" postgres
  start_server "$1"
  local lines; lines=$(wc -l <"$PGLOG")
  curl -sf -o /dev/null "http://127.0.0.1:$PORT/api/v1/leads" -H "Authorization: Bearer $TOKEN"
  curl -sf -o /dev/null "http://127.0.0.1:$PORT/api/v1/leads?cursor=$CURSOR" -H "Authorization: Bearer $TOKEN"
  sleep 0.3
  echo "== statements of one first-page and one page-1000 request ($1), from PostgreSQL's log"
  tail -n +"$((lines + 1))" "$PGLOG" | grep -E "$DB (LOG|DETAIL)" | sed -E 's/^.*(LOG|DETAIL): +//' | cut -c1-200
  stop_server
  psql -qc "ALTER DATABASE $DB RESET log_statement" postgres
}
show_logged_sql "$BIN"
[ -z "${BENCH_COMPARE:-}" ] || show_logged_sql "$BENCH_COMPARE"
start_server "$BIN"

echo "== machine: $(nproc) cores, $(free -g | awk '/Mem/ {print $2}') GiB, $(uname -r); PostgreSQL $(psql -Atqc 'show server_version' postgres); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== $ROUNDS interleaved rounds per pool size: wrk, $CONNS connections, $DURATION; pgbench -M prepared of the SQL that server sends, $CONNS clients, $DURATION"
run_wrk healthz "healthz (no DB)" "http://127.0.0.1:$PORT/healthz"
stop_server
for pool in $POOLS; do
  export PARTNER_DB_POOL_SIZE=$pool
  echo "-- server pool $pool"
  measure_server "pool$pool" "$BIN" /tmp/bench-first-one.sql /tmp/bench-deep-one.sql
  [ -z "${BENCH_COMPARE:-}" ] || measure_server "before$pool" "$BENCH_COMPARE" /tmp/bench-first-req.sql /tmp/bench-deep-req.sql
done
echo "== pgbench, for reference: the page query alone (no token lookup), the two statements a request sent before issue 14, and the one statement at fewer clients"
run_pgbench first-page "page query alone, first page" /tmp/bench-first.sql
run_pgbench deep-page "page query alone, page 1000" /tmp/bench-deep.sql
run_pgbench first-two "lookup + page, first page" /tmp/bench-first-req.sql
run_pgbench deep-two "lookup + page, page 1000" /tmp/bench-deep-req.sql
for c in 8 16 32; do
  TPS[c$c]=$(pgbench -n -M prepared -c $c -j 2 -T "${DURATION%s}" -f /tmp/bench-first-one.sql "$DB" 2>/dev/null | awk '/^tps/ {print $3}')
  printf '%-28s %10s tps\n' "one statement, first, -c$c" "${TPS[c$c]}"
done
echo "== summary: server req/s / pgbench tps (64 clients) of the SQL that server sends per request, medians of the rounds (target >= 0.8; p99 target <= 25 ms)"
for pool in $POOLS; do
  summary "pool$pool" "pool $pool, one statement"
  [ -z "${BENCH_COMPARE:-}" ] || summary "before$pool" "pool $pool, BENCH_COMPARE binary, lookup + page"
done
echo "== plans"
psql -Atq "$DB" -c "EXPLAIN (ANALYZE, COSTS OFF) $(cat /tmp/bench-deep-one.sql)" | head -20
[ -n "${BENCH_DATASET:-}" ] || psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres
