#!/usr/bin/env bash
# The cost of an Idempotency-Key (issue 25: an idempotent POST costs at most 1.3 x the same POST
# without a key): POST /internal/v1/leads from 32 wrk connections, three ways, one server:
#   plain:  no key (the ingest of bench/ingest.sh);
#   keyed:  a new key on every request (claim + the ingest + keep: two extra statements);
#   replay: one key for every request after the first (claim only, the kept answer replayed).
# BENCH_COMPARE=/path/to/an/older/partner-server measures "plain" on that binary too.
# Loopback only; stops by itself.
set -euo pipefail
cd "$(dirname "$0")/.."
export PGHOST=127.0.0.1 PGPORT=5432 PGUSER=postgres
DB=${BENCH_DB:-pp_bench_idempotency}
PORT=${BENCH_PORT:-18094}
DURATION=${BENCH_DURATION:-15s}
CONNS=${BENCH_CONNS:-32}
export DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB"
export PARTNER_BIND="127.0.0.1:$PORT" PARTNER_TOKEN_PEPPER=bench-pepper
export PARTNER_INTERNAL_TOKEN=bench-internal-token-0123456789abcdef RUST_LOG=warn
export PARTNER_RATE_LIMIT=1000000000/1s PARTNER_DB_POOL_SIZE=${BENCH_POOL:-32}
command -v wrk >/dev/null || { apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }; }
[ -n "${BENCH_BIN:-}" ] || cargo build --release -q -p partner-server
BIN=${BENCH_BIN:-${CARGO_TARGET_DIR:-target}/release/partner-server}

psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres
$BIN migrate
psql -q "$DB" -c "
  INSERT INTO partners (partner_id, name, email, active, dna_access, headless_links, default_lang, enabled_langs,
    cs_subscription_active, cs_manual_override, cs_yearly_bundle, cs_services, created_at, updated_at)
  VALUES ('ingest', 'Ingest', 'ops@ingest.test', true, false, true, 'en', '{en}', false, false, false, '{}', now(), now())"

SERVER=
start_server() { "$1" serve --no-migrate --role api & SERVER=$!
  for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.2; done; }
stop_server() { kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; SERVER=; }
work=$(mktemp -d)
trap 'stop_server; rm -rf "$work"; psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres' EXIT
BODY='{"partnerId":"ingest","firstName":"Ann","lastName":"Lee","email":"ann@example.com","emailConsent":true,"phone":"+1 555 0100","smsConsent":true,"origin":"managed-website","location":"Austin, TX"}'

# mode: plain (no key), keyed (a fresh key per request), replay (one key throughout).
write_script() { # mode file
  cat > "$2" <<LUA
local mode = "$1"
local counter = 0
id = 0
local threads = {}
function setup(thread) thread:set("id", #threads + 1); table.insert(threads, thread) end
wrk.method = "POST"
wrk.body = '$BODY'
wrk.headers["Authorization"] = "Bearer $PARTNER_INTERNAL_TOKEN"
wrk.headers["Content-Type"] = "application/json"
function request()
  if mode == "keyed" then
    counter = counter + 1
    wrk.headers["Idempotency-Key"] = string.format("bench-%d-%d-%d", os.time(), id, counter)
  elseif mode == "replay" then
    wrk.headers["Idempotency-Key"] = "bench-replay"
  end
  return wrk.format()
end
LUA
}

echo "== machine: $(nproc) cores, $(uname -r); load average $(cut -d' ' -f1-3 /proc/loadavg); $CONNS connections, $DURATION each"
declare -A RATE
measure() { # label binary mode
  write_script "$3" "$work/$3.lua"
  start_server "$2"
  wrk -t2 -c"$CONNS" -d3s -s "$work/$3.lua" "http://127.0.0.1:$PORT/internal/v1/leads" >/dev/null
  local out; out=$(wrk -t2 -c"$CONNS" -d"$DURATION" --latency -s "$work/$3.lua" "http://127.0.0.1:$PORT/internal/v1/leads")
  RATE[$1]=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  local non2xx; non2xx=$(echo "$out" | awk '/Non-2xx/ {print $5}')
  printf '%-24s %10s req/s   p50 %8s   p99 %8s   non-2xx %s\n' "$1" "${RATE[$1]}" \
    "$(echo "$out" | awk '$1 == "50%" {print $2}')" "$(echo "$out" | awk '$1 == "99%" {print $2}')" "${non2xx:-0}"
  stop_server
}
# Alternated, so load on a shared machine falls on both.
measure plain "$BIN" plain
measure keyed "$BIN" keyed
measure replay "$BIN" replay
[ -z "${BENCH_COMPARE:-}" ] || measure "plain (compare)" "$BENCH_COMPARE" plain
echo "keyed rows kept: $(psql -qAt "$DB" -c 'SELECT count(*) FROM idempotency_keys')"
echo "cost of a key (plain / keyed req/s): $(awk -v a="${RATE[plain]}" -v b="${RATE[keyed]}" 'BEGIN {printf "%.2f", a / b}') (target <= 1.3)"
