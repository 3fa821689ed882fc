#!/usr/bin/env bash
# Partner reads on a database of bench/dataset.sh (issue 22, item 3), each against pgbench of the
# SQL the server sends for it: for every case below, one request is made with
# `log_statement = all` on the database, the statements it sent are read back from PostgreSQL's
# log with their parameters filled in, and then wrk (BENCH_CONNS connections, default 64) and
# pgbench (-M prepared, as many clients) run in turn for BENCH_ROUNDS rounds (default 2) of
# BENCH_DURATION (default 8s). Prints per case the medians: req/s, p50, p99, pgbench tps, the
# ratio, and the load average. Cases (the dataset's big partner, with its stored token):
#   leads-first, leads-p1000        GET /api/v1/leads, the first page and page 1,000 (50 a page)
#   deliveries-first, deliveries-p1000   GET /api/v1/webhook-deliveries, the same
#   coupons-json-first              GET /api/v1/care-services-coupons (100)
#   coupons-csv-first               the same as CSV (500)
#   coupons-json-p1000              the same, page 1,000 (offset 100,000)
#   coupons-csv-p201                CSV (500) at offset 100,000
#   coupons-redeemed-p100           `status=redeemed`, page 100 (offset 10,000): a filtered page
#   events-first                    GET /api/v1/events: the oldest page of the feed (50)
#   events-end                      the poll at the end of the feed (an empty page)
# BENCH_DEEP_PAGE (default 1000) moves the `-p1000` cases' cursor pages to another page, to
# compare two databases at the same depth (the small dataset's `ds-big` has 433 pages of
# deliveries: its "page 1,000" is its last page, of 30 rows).
# Answers that are not 2xx are counted and printed under the case. BENCH_CASES picks some ("leads-first deliveries-first"). The server runs `--role api` with
# PARTNER_DB_POOL_SIZE=BENCH_POOL (default 8: leads.sh showed p99 met at 8, not at 16, on two
# shared cores). Loopback only; the database is kept.
# Usage: BENCH_DATASET=pp_dataset bash bench/reads.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PGHOST=127.0.0.1 PGPORT=5432 PGUSER=postgres
DB=${BENCH_DATASET:?BENCH_DATASET=<database made by bench/dataset.sh>}
PORT=${BENCH_PORT:-18094}
DURATION=${BENCH_DURATION:-8s}
ROUNDS=${BENCH_ROUNDS:-2}
CONNS=${BENCH_CONNS:-64}
CASES=${BENCH_CASES:-leads-first leads-p1000 deliveries-first deliveries-p1000 coupons-json-first coupons-json-p1000 coupons-csv-first coupons-csv-p201 coupons-redeemed-p100 events-first events-end}
PGLOG=${BENCH_PGLOG:-/var/log/postgresql/postgresql-15-main.log}
export DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB"
export PARTNER_BIND="127.0.0.1:$PORT" PARTNER_TOKEN_PEPPER=bench-pepper
export PARTNER_INTERNAL_TOKEN=bench-internal-token-0123456789abcdef RUST_LOG=warn
export PARTNER_RATE_LIMIT=1000000000/1s PARTNER_DB_POOL_SIZE=${BENCH_POOL:-8}
export PARTNER_WEBHOOK_RETENTION=90d PARTNER_EVENT_RETENTION=90d
[ -n "${BENCH_BIN:-}" ] || cargo build --release -q -p partner-server
BIN=${BENCH_BIN:-${CARGO_TARGET_DIR:-target}/release/partner-server}
[ -r "$PGLOG" ] || { echo "PostgreSQL's log $PGLOG is not readable (BENCH_PGLOG)" >&2; exit 1; }
WORK=$(mktemp -d /tmp/pp-reads.XXXXXX)
SERVER=
start_server() {
  "$BIN" serve --no-migrate --role api >>"$WORK/server.log" 2>&1 &
  SERVER=$!
  for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && return; sleep 0.1; done
  echo "the server did not start" >&2; tail "$WORK/server.log" >&2; exit 1
}
stop_server() { [ -z "$SERVER" ] || { kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null || true; }; SERVER=; }
trap 'stop_server; psql -qc "ALTER DATABASE $DB RESET log_statement" postgres 2>/dev/null; rm -rf "$WORK"' EXIT

info() { psql -Atq "$DB" -c "SELECT value FROM dataset_info WHERE key = '$1'"; }
TOKEN=$(info token)
A="Authorization: Bearer $TOKEN"
BASE="http://127.0.0.1:$PORT"
start_server
cursor_of() { sed -nE 's/.*"nextCursor":"([^"]+)".*/\1/p'; }
# The cursor of page BENCH_DEEP_PAGE (1,000) of a listing (or of its last page, if it has fewer).
DEEP=${BENCH_DEEP_PAGE:-1000}
deep_cursor() { # path
  local c="" n=0 next
  while [ $n -lt $((DEEP - 1)) ]; do
    next=$(curl -sf "$BASE$1${c:+?cursor=$c}" -H "$A" | cursor_of)
    [ -n "$next" ] || break
    c=$next; n=$((n + 1))
  done
  echo "$c"
}
declare -A URL
URL[leads-first]="/api/v1/leads"
URL[deliveries-first]="/api/v1/webhook-deliveries"
URL[coupons-json-first]="/api/v1/care-services-coupons?limit=100"
URL[coupons-csv-first]="/api/v1/care-services-coupons?format=csv&limit=500"
URL[coupons-json-p1000]="/api/v1/care-services-coupons?limit=100&offset=100000"
URL[coupons-csv-p201]="/api/v1/care-services-coupons?format=csv&limit=500&offset=100000"
URL[coupons-redeemed-p100]="/api/v1/care-services-coupons?status=redeemed&limit=100&offset=10000"
URL[events-first]="/api/v1/events"
for c in $CASES; do
  case $c in
    leads-p1000) URL[$c]="/api/v1/leads?cursor=$(deep_cursor /api/v1/leads)" ;;
    deliveries-p1000) URL[$c]="/api/v1/webhook-deliveries?cursor=$(deep_cursor /api/v1/webhook-deliveries)" ;;
    events-end) URL[$c]="/api/v1/events?cursor=$(curl -sf "$BASE/api/v1/events?since=2999-01-01T00:00:00.000Z" -H "$A" | cursor_of)" ;;
  esac
done

# The statements of one request of each case, from PostgreSQL's log, parameters filled in.
stop_server
psql -qc "ALTER DATABASE $DB SET log_statement = 'all'" postgres
start_server
for c in $CASES; do
  curl -sf -o /dev/null "$BASE${URL[$c]}" -H "$A" # prepares, warms
  sleep 0.2
  lines=$(wc -l <"$PGLOG")
  code=$(curl -s -o "$WORK/$c.body" -w '%{http_code}' "$BASE${URL[$c]}" -H "$A")
  [ "$code" = 200 ] || { echo "$c: HTTP $code" >&2; head -c 300 "$WORK/$c.body" >&2; exit 1; }
  sleep 0.3
  tail -n +"$((lines + 1))" "$PGLOG" | python3 bench/logged_sql.py "$DB" >"$WORK/$c.sql"
  [ -s "$WORK/$c.sql" ] || { echo "$c: no statement found in $PGLOG" >&2; exit 1; }
done
stop_server
psql -qc "ALTER DATABASE $DB RESET log_statement" postgres

echo "== $DB: $(psql -Atq "$DB" -c "SELECT string_agg(key || ' ' || value, ', ' ORDER BY key) FROM dataset_info WHERE key IN ('scale', 'leads', 'big_leads', 'coupons', 'big_coupons', 'partners', 'endpoints')"); deliveries $(psql -Atq "$DB" -c "SELECT reltuples::bigint FROM pg_class WHERE relname = 'webhook_deliveries'")"
echo "== machine: $(nproc) cores; $CONNS connections, $DURATION, $ROUNDS rounds; server pool $PARTNER_DB_POOL_SIZE"
for c in $CASES; do
  echo "-- $c: ${URL[$c]:0:80}; $(grep -c ';$' "$WORK/$c.sql") statement(s), $(wc -c <"$WORK/$c.body") bytes"
  sed -E 's/^(.{160}).*/\1…/' "$WORK/$c.sql" | sed 's/^/     /'
done
start_server
in_ms() { awk -v v="$1" 'BEGIN {n = v + 0; if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) n += 0; else if (v ~ /s$/) n *= 1000; printf "%.2f", n}'; }
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
declare -A NON2XX
printf '%-20s %10s %9s %9s %10s %7s  %s\n' case "req/s" "p50 ms" "p99 ms" "pgbench" ratio "load average"
for c in $CASES; do
  wrk -t2 -c"$CONNS" -d3s -H "$A" "$BASE${URL[$c]}" >/dev/null # warm-up
  rps=(); p50=(); p99=(); tps=(); ratios=()
  for _ in $(seq 1 "$ROUNDS"); do
    out=$(wrk -t2 -c"$CONNS" -d"$DURATION" --latency -H "$A" "$BASE${URL[$c]}")
    bad=$(echo "$out" | awk '/Non-2xx/ {print $5}'); [ -z "$bad" ] || { NON2XX[$c]=$(( ${NON2XX[$c]:-0} + bad )); }
    r=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
    rps+=("$r"); p50+=("$(in_ms "$(echo "$out" | awk '$1 == "50%" {print $2}')")"); p99+=("$(in_ms "$(echo "$out" | awk '$1 == "99%" {print $2}')")")
    t=$(pgbench -n -M prepared -c "$CONNS" -j 2 -T "${DURATION%s}" -f "$WORK/$c.sql" "$DB" 2>"$WORK/pgbench.err" | awk '/^tps/ {print $3}') || true
    [ -n "$t" ] || { echo "  $c: pgbench failed: $(grep -v '^pgbench (' "$WORK/pgbench.err" | head -3 | tr '\n' ' ')" >&2; t=0; }
    tps+=("$t"); ratios+=("$(awk -v a="$r" -v b="$t" 'BEGIN {printf "%.2f", a / b}')")
  done
  printf '%-20s %10.0f %9s %9s %10.0f %7s  %s (rounds: ratio %s, p99 %s)\n' "$c" "$(median "${rps[@]}")" "$(median "${p50[@]}")" \
    "$(median "${p99[@]}")" "$(median "${tps[@]}")" "$(median "${ratios[@]}")" "$(cut -d' ' -f1-3 /proc/loadavg)" "${ratios[*]}" "${p99[*]}"
  [ -z "${NON2XX[$c]:-}" ] || echo "  $c: ${NON2XX[$c]} answers were not 2xx (sample: $(curl -s "$BASE${URL[$c]}" -H "$A" -o /dev/null -w '%{http_code}'))"
done
