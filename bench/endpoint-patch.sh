#!/usr/bin/env bash
# The latency of a partner's `PATCH /api/v1/webhook-endpoints/{id}` (a new URL and secret,
# expirePrevious: the body of tests/attack/a13_race.py), one at a time and six at once (six
# endpoints of one partner; one endpoint of each of six partners), against a cheap write measured
# the same way (`POST /internal/v1/leads`, one and six at once). Made for the attacker's note
# "six concurrent PATCHes answered in 83-87 ms, an ingest in 12-14 ms" (tests/attack/RESULTS.md,
# attack13). Driver: bench/endpoint_patch.py (HTTP/1.1 keep-alive, one connection per thread,
# the requests of a round started together); prints per case n, mean, p50, p90, p99, max in ms.
# BENCH_A, and optionally BENCH_B, are release binaries: with both, rounds alternate (A B, B A, ...)
# on one database, so a drift of the shared machine weighs on both. The servers run
# `--role api` (no worker: the deliveries the ingests write stay pending). BENCH_PG_STATS=1 also
# prints, per run, the backends' wait events sampled from pg_stat_activity every 2 ms.
# BENCH_WAL_LOAD=<rows> runs, during the measurements, one client on a database of its own that
# inserts <rows> rows of 200 bytes (about <rows> × 0.3 kB of WAL) every 50 ms and commits: the
# commits' WAL flushes then take milliseconds, as under a write load or a slow disk.
# Usage: [BENCH_A=<binary>] [BENCH_B=<binary>] [BENCH_ROUNDS=3] [BENCH_REQS=100] bash bench/endpoint-patch.sh
# Loopback only; the database is dropped at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
export PGHOST=127.0.0.1 PGPORT=5432 PGUSER=postgres
A_BIN=${BENCH_A:-${CARGO_TARGET_DIR:-target}/release/partner-server}
B_BIN=${BENCH_B:-}
DB=${BENCH_DB:-pp_bench_endpoint_patch}
PORT=${BENCH_PORT:-18098}
ROUNDS=${BENCH_ROUNDS:-3}
REQS=${BENCH_REQS:-100}
# BENCH_SERVER_PGPORT: the port the servers reach PostgreSQL on (a relay in front of 5432, e.g.
# tests/attack/pgproxy.py, as attack13 ran them); psql uses 5432.
export DATABASE_URL="postgres://postgres@127.0.0.1:${BENCH_SERVER_PGPORT:-5432}/$DB"
export PARTNER_BIND="127.0.0.1:$PORT" PARTNER_TOKEN_PEPPER=bench-pepper
export PARTNER_INTERNAL_TOKEN=bench-internal-token-0123456789abcdef
export PARTNER_RATE_LIMIT=1000000000/60s RUST_LOG=${RUST_LOG:-warn} PARTNER_LOG_FORMAT=text
export PARTNER_WEBHOOK_ALLOW_PRIVATE=true PARTNER_SHUTDOWN_DRAIN=0
unset PARTNER_REDIS_URL PARTNER_METRICS_BIND PARTNER_INTERNAL_BIND PARTNER_TRUSTED_PROXIES
WORK=$(mktemp -d)
SERVER=""
SAMPLER=""
WAL_LOAD=""
stop() {
  [ -n "$SAMPLER" ] && kill "$SAMPLER" 2>/dev/null && wait "$SAMPLER" 2>/dev/null; SAMPLER=""
  [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null; SERVER=""
}
trap 'stop; [ -z "$WAL_LOAD" ] || { kill "$WAL_LOAD"; wait "$WAL_LOAD"; } 2>/dev/null || true; rm -rf "$WORK"
  psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "DROP DATABASE IF EXISTS ${DB}_wal WITH (FORCE)" postgres' EXIT
start() {
  "$1" serve --no-migrate --role api & SERVER=$!
  for _ in $(seq 1 600); do curl -sf "127.0.0.1:$PORT/readyz" >/dev/null && return; sleep 0.1; done
  echo "the server did not start" >&2; exit 1
}
# Samples the wait events of this database's active backends until killed.
sample() {
  while :; do
    psql -qAtX "$DB" -c "SELECT coalesce(wait_event_type || ':' || wait_event, 'cpu') FROM pg_stat_activity
      WHERE datname = current_database() AND state = 'active' AND pid <> pg_backend_pid()" 2>/dev/null
    sleep 0.002
  done >>"$WORK/waits"
}

psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres
"$A_BIN" migrate
start "$A_BIN"
python3 bench/endpoint_patch.py setup "127.0.0.1:$PORT" >"$WORK/setup.json"
stop

RESULTS=$WORK/results
run() { # label binary
  start "$2"
  if [ -n "${BENCH_PG_STATS:-}" ]; then : >"$WORK/waits"; sample & SAMPLER=$!; fi
  python3 bench/endpoint_patch.py run "127.0.0.1:$PORT" "$WORK/setup.json" "$1" "$REQS" | tee -a "$RESULTS"
  echo "   (load $(cut -d' ' -f1-3 /proc/loadavg))"
  if [ -n "$SAMPLER" ]; then
    kill "$SAMPLER"; wait "$SAMPLER" 2>/dev/null || true; SAMPLER=""
    echo "   wait events of active backends (samples):"
    sort "$WORK/waits" | uniq -c | sort -rn | head -8 | sed 's/^/     /'
  fi
  stop
}

if [ -n "${BENCH_WAL_LOAD:-}" ]; then
  psql -qc "DROP DATABASE IF EXISTS ${DB}_wal WITH (FORCE)" -c "CREATE DATABASE ${DB}_wal" postgres
  psql -q "${DB}_wal" -c "CREATE TABLE bench_wal_load (id int, pad text)"
  while :; do
    psql -qX "${DB}_wal" -c "INSERT INTO bench_wal_load SELECT g, repeat('x', 200) FROM generate_series(1, $BENCH_WAL_LOAD) g" \
      -c "TRUNCATE bench_wal_load" >/dev/null 2>&1
    sleep 0.05
  done &
  WAL_LOAD=$!
  echo "== a WAL load runs beside: $BENCH_WAL_LOAD rows inserted every 50 ms"
fi
echo "== endpoint PATCH vs ingest, $REQS requests per thread per case ($((3 * REQS)) alone), $ROUNDS rounds; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "label case n mean p50 p90 p99 max (ms)"
for i in $(seq 1 "$ROUNDS"); do
  if [ -z "$B_BIN" ]; then run A "$A_BIN"
  elif [ $((i % 2)) = 1 ]; then run A "$A_BIN"; run B "$B_BIN"
  else run B "$B_BIN"; run A "$A_BIN"; fi
done
echo "== medians over the rounds (mean, p50, p99 in ms)"
awk '
  function median(a, n,   i, j, t) {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  { k = $2 " " $1; n[k]++; m[k, n[k]] = $4; p[k, n[k]] = $5; q[k, n[k]] = $7; keys[k] = 1 }
  END {
    for (k in keys) {
      delete a; delete b; delete c
      for (i = 1; i <= n[k]; i++) { a[i] = m[k, i]; b[i] = p[k, i]; c[i] = q[k, i] }
      printf "%-11s %s  mean %7.2f  p50 %7.2f  p99 %7.2f\n", substr(k, 1, index(k, " ") - 1), substr(k, index(k, " ") + 1), median(a, n[k]), median(b, n[k]), median(c, n[k])
    }
  }' "$RESULTS" | sort
