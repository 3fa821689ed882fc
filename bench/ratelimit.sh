#!/usr/bin/env bash
# Rate-limiter overhead: GET /api/v1/leads (one partner, 1,000 leads) with wrk -t2 -c64 for
# BENCH_DURATION, first with the in-process limiter, then with the Redis limiter
# (PARTNER_REDIS_URL), same binary, same database. Stops by itself; loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."

PGHOST=127.0.0.1; PGPORT=5432; PGUSER=postgres
export PGHOST PGPORT PGUSER
DB=${BENCH_DB:-pp_bench_ratelimit}
PORT=${BENCH_PORT:-18095}
METRICS_PORT=$((PORT + 1))
DURATION=${BENCH_DURATION:-10s}
REDIS=${BENCH_REDIS_URL:-redis://127.0.0.1:6379}
export DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB"
export PARTNER_BIND="127.0.0.1:$PORT" PARTNER_TOKEN_PEPPER=bench-pepper
export PARTNER_INTERNAL_TOKEN=bench-internal-token-0123456789abcdef
# A budget no run exhausts: every request pays for a decision, none is refused.
export PARTNER_RATE_LIMIT=1000000000/60s RUST_LOG=warn PARTNER_LOG_FORMAT=text
unset PARTNER_REDIS_URL PARTNER_METRICS_BIND PARTNER_INTERNAL_BIND

command -v wrk >/dev/null || { echo "wrk is missing" >&2; exit 1; }
redis-cli -u "$REDIS" ping >/dev/null || { echo "Redis does not answer at $REDIS" >&2; exit 1; }
cargo build --release -q -p partner-server
BIN=${CARGO_TARGET_DIR:-target}/release/partner-server

psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres
$BIN migrate

SERVER=""
stop() { [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null; SERVER=""; }
trap 'stop; psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres' EXIT
start() {
  $BIN serve --no-migrate & SERVER=$!
  for _ in $(seq 1 100); do curl -sf "localhost:$PORT/readyz" >/dev/null && return; sleep 0.1; done
  echo "the server did not start" >&2; exit 1
}

start
I="Authorization: Bearer $PARTNER_INTERNAL_TOKEN"
curl -sf -X PUT "localhost:$PORT/internal/v1/partners/bench" -H "$I" -d '{"name":"Bench","email":"b@bench.test",
  "active":true,"dnaAccess":true,"headlessLinks":true,"defaultLang":"en","enabledLangs":["en"],
  "careServices":{"subscriptionActive":true,"manualOverride":false,"yearlyBundle":true,"services":[]}}' >/dev/null
USER_ID=$(curl -sf -X POST "localhost:$PORT/internal/v1/users" -H "$I" \
  -d '{"email":"u@bench.test","partnerId":"bench","admin":false}' | sed 's/.*"id":"\([^"]*\)".*/\1/')
TOKEN=$(curl -sf -X POST "localhost:$PORT/internal/v1/users/$USER_ID/tokens" -H "$I" \
  | sed 's/.*"token":"\([^"]*\)".*/\1/')
psql -q "$DB" -c "INSERT INTO leads (id, partner_id, first_name, last_name, email, email_consent, phone,
  sms_consent, origin, location, is_test, created_at, updated_at)
  SELECT gen_random_uuid(), 'bench', 'Ann', 'Lee', 'ann' || g || '@example.com', true, '+1 555 0100', true,
         'managed-website', 'Austin, TX', false, now() - g * interval '1 minute', now()
  FROM generate_series(1, 1000) g" >/dev/null
stop

run() {
  local label=$1
  start
  wrk -t2 -c64 -d5s -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT/api/v1/leads" >/dev/null
  echo "== $label"
  wrk -t2 -c64 -d"$DURATION" --latency -H "Authorization: Bearer $TOKEN" \
    "http://127.0.0.1:$PORT/api/v1/leads" | grep -E "Requests/sec|Latency|50%|99%|Non-2xx"
  # Decisions Redis did not take in time (taken in-process instead), warm-up included.
  curl -s "localhost:$METRICS_PORT/metrics" | grep -E "^rate_limiter_errors_total" || echo "rate_limiter_errors_total 0"
  stop
}

export PARTNER_METRICS_BIND="127.0.0.1:$METRICS_PORT"
run "in-process limiter"
export PARTNER_REDIS_URL=$REDIS
run "Redis limiter ($REDIS)"
