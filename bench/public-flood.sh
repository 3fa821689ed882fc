#!/usr/bin/env bash
# One client floods the embedded view (GET /embed/care-services, no token) while a partner reads
# GET /api/v1/leads (1,000 leads): the partner's p99 under the flood against its idle p99, same
# server, same run (extensions.md §12: at most 2 ×). wrk -t1 -c$BENCH_PARTNER_CONNS for the
# partner, wrk -t1 -c$BENCH_FLOOD_CONNS from one address for the flood, BENCH_DURATION each.
# First with the public limit (PARTNER_PUBLIC_RATE, default 50), then, unless BENCH_UNLIMITED=0,
# with a limit no flood reaches (the finding's situation, for comparison). Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."

PGHOST=127.0.0.1; PGPORT=5432; PGUSER=postgres
export PGHOST PGPORT PGUSER
DB=${BENCH_DB:-pp_bench_public}
PORT=${BENCH_PORT:-18097}
DURATION=${BENCH_DURATION:-10s}
PARTNER_CONNS=${BENCH_PARTNER_CONNS:-4}
FLOOD_CONNS=${BENCH_FLOOD_CONNS:-64}
RATE=${BENCH_PUBLIC_RATE:-50}
export DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB"
export PARTNER_BIND="127.0.0.1:$PORT" PARTNER_TOKEN_PEPPER=bench-pepper
export PARTNER_INTERNAL_TOKEN=bench-internal-token-0123456789abcdef
# The partner's own budget is never the limit here.
export PARTNER_RATE_LIMIT=1000000000/60s RUST_LOG=warn PARTNER_LOG_FORMAT=text
unset PARTNER_REDIS_URL PARTNER_METRICS_BIND PARTNER_INTERNAL_BIND PARTNER_TRUSTED_PROXIES

command -v wrk >/dev/null || { echo "wrk is missing" >&2; exit 1; }
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

export PARTNER_PUBLIC_RATE=$RATE
start
I="Authorization: Bearer $PARTNER_INTERNAL_TOKEN"
curl -sf -X PUT "localhost:$PORT/internal/v1/partners/bench" -H "$I" -d '{"name":"Bench","email":"b@bench.test",
  "active":true,"dnaAccess":true,"headlessLinks":true,"defaultLang":"en","enabledLangs":["en"],
  "careServices":{"subscriptionActive":true,"manualOverride":false,"yearlyBundle":true,
  "services":["primary-care","mental-health"]}}' >/dev/null
USER_ID=$(curl -sf -X POST "localhost:$PORT/internal/v1/users" -H "$I" \
  -d '{"email":"u@bench.test","partnerId":"bench","admin":false}' | sed 's/.*"id":"\([^"]*\)".*/\1/')
TOKEN=$(curl -sf -X POST "localhost:$PORT/internal/v1/users/$USER_ID/tokens" -H "$I" \
  | sed 's/.*"token":"\([^"]*\)".*/\1/')
psql -q "$DB" -c "INSERT INTO leads (id, partner_id, first_name, last_name, email, email_consent, phone,
  sms_consent, origin, location, is_test, created_at, updated_at)
  SELECT gen_random_uuid(), 'bench', 'Ann', 'Lee', 'ann' || g || '@example.com', true, '+1 555 0100', true,
         'managed-website', 'Austin, TX', false, now() - g * interval '1 minute', now()
  FROM generate_series(1, 1000) g" >/dev/null
EMBED="http://127.0.0.1:$PORT/embed/care-services?partner_id=bench"
LEADS="http://127.0.0.1:$PORT/api/v1/leads"
code=$(curl -s -o /dev/null -w '%{http_code}' "$EMBED")
[ "$code" = 200 ] || { echo "the embedded view answers $code, not 200" >&2; exit 1; }
stop

# The 99th percentile of a wrk --latency output, in ms.
p99() {
  awk '$1 == "99%" { v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v);
    if (u == "us") v /= 1000; else if (u == "s") v *= 1000; else if (u == "m") v *= 60000;
    printf "%.2f", v }'
}
partner() {
  wrk -t1 -c"$PARTNER_CONNS" -d"$DURATION" --latency -H "Authorization: Bearer $TOKEN" "$LEADS"
}

run() {
  local label=$1
  start
  # Warm-up of both paths.
  wrk -t1 -c"$PARTNER_CONNS" -d3s -H "Authorization: Bearer $TOKEN" "$LEADS" >/dev/null
  wrk -t1 -c4 -d1s "$EMBED" >/dev/null
  sleep 1
  local idle flood_out under ratio
  idle=$(partner)
  local idle_p99; idle_p99=$(p99 <<<"$idle")
  # The flood starts first and outlasts the partner's run.
  local secs=${DURATION%s}
  flood_out=$(mktemp)
  wrk -t1 -c"$FLOOD_CONNS" -d"$((secs + 3))s" "$EMBED" >"$flood_out" &
  local flood=$!
  sleep 1
  under=$(partner)
  wait "$flood"
  local under_p99; under_p99=$(p99 <<<"$under")
  ratio=$(awk -v a="$under_p99" -v b="$idle_p99" 'BEGIN { printf "%.2f", a / b }')
  echo "== $label"
  echo "partner idle:        $(grep Requests/sec <<<"$idle" | awk '{print $2}') req/s, p99 $idle_p99 ms"
  echo "flood (one client):  $(grep Requests/sec "$flood_out" | awk '{print $2}') req/s," \
    "$(grep -E 'Non-2xx' "$flood_out" | awk '{print $NF}' || echo 0) of them not 2xx (429)"
  echo "partner under flood: $(grep Requests/sec <<<"$under" | awk '{print $2}') req/s, p99 $under_p99 ms"
  echo "ratio p99 flood/idle: $ratio (limit 2)"
  rm -f "$flood_out"
  stop
}

run "PARTNER_PUBLIC_RATE=$RATE"
if [ "${BENCH_UNLIMITED:-1}" != 0 ]; then
  export PARTNER_PUBLIC_RATE=1000000
  run "PARTNER_PUBLIC_RATE=1000000 (no effective limit)"
fi
