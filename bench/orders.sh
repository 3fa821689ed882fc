#!/usr/bin/env bash
# Memory while streaming a long order history (issue 14): 100,000 stored orders of one partner,
# listed whole by GET /api/v1/orders (about 18 MB of JSON), one request and then four at once,
# while the server's resident memory is sampled every 20 ms. Prints, for each, the time, RSS
# before, the peak, the growth, and RSS 2 s after the last answer ended (mimalloc returns freed
# pages to the OS after 1 s: what is still there then is held, not waiting to be purged).
# BENCH_DATASET=pp_dataset streams the big partner of an existing database of bench/dataset.sh
# instead (200,000 orders at scale 1; nothing seeded, nothing dropped). BENCH_COMPARE=<another
# partner-server binary> measures it too, alternating with this one, BENCH_ROUNDS times each
# (default 1), each run on a fresh server process. Loopback only; stops by itself.
set -euo pipefail
cd "$(dirname "$0")/.."
export PGHOST=127.0.0.1 PGPORT=5432 PGUSER=postgres
DB=${BENCH_DATASET:-${BENCH_DB:-pp_bench_orders}}
PORT=${BENCH_PORT:-18092}
N=${BENCH_ORDERS:-100000}
ROUNDS=${BENCH_ROUNDS:-1}
export DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB"
export PARTNER_BIND="127.0.0.1:$PORT" PARTNER_TOKEN_PEPPER=bench-pepper
export PARTNER_INTERNAL_TOKEN=bench-internal-token-0123456789abcdef RUST_LOG=warn
export PARTNER_RATE_LIMIT=1000000000/1s
[ -n "${BENCH_BIN:-}" ] || cargo build --release -q -p partner-server
BIN=${BENCH_BIN:-${CARGO_TARGET_DIR:-target}/release/partner-server}
BINS=("$BIN")
[ -z "${BENCH_COMPARE:-}" ] || BINS+=("$BENCH_COMPARE")

SERVER=
stop_server() { [ -z "$SERVER" ] || { kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; SERVER=; }; }
trap 'stop_server; [ -n "${BENCH_DATASET:-}" ] || psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres' EXIT

if [ -n "${BENCH_DATASET:-}" ]; then
  BIG=$(psql -Atq "$DB" -c "SELECT value FROM dataset_info WHERE key = 'big_partner'")
  N=$(psql -Atq "$DB" -c "SELECT count(*) FROM orders WHERE partner_id = '$BIG'")
else
BIG=big
psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres
$BIN migrate
psql -q "$DB" -c "
  INSERT INTO partners (partner_id, name, email, active, dna_access, headless_links, default_lang, enabled_langs,
    cs_subscription_active, cs_manual_override, cs_yearly_bundle, cs_services, created_at, updated_at)
  VALUES ('big', 'Big', 'ops@big.test', true, false, true, 'en', '{en}', false, false, false, '{}', now(), now());
  INSERT INTO orders (order_id, partner_id, sub_id, created_date, product, amount_cents, commission_cents, status,
    is_test, source, customer_name, customer_email, recorded_at)
  SELECT 'ORD-' || lpad(g::text, 7, '0'), 'big', NULL, timestamptz '2026-11-01' - make_interval(mins => g),
    'Semaglutide 1 month', 29900, 4550, 'shipped', false, 'pharmacy', 'Ann Lee', 'ann@example.com', now()
  FROM generate_series(1, $N) g;" -c "VACUUM ANALYZE orders"
fi

start_server() { # binary
  "$1" serve --no-migrate --role api &
  SERVER=$!
  for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.2; done
}
I="Authorization: Bearer $PARTNER_INTERNAL_TOKEN"
TOKEN=
token() {
  if [ -n "${BENCH_DATASET:-}" ]; then
    TOKEN=$(psql -Atq "$DB" -c "SELECT value FROM dataset_info WHERE key = 'token'")
  else
    local user
    user=$(curl -sf -X POST "http://127.0.0.1:$PORT/internal/v1/users" -H "$I" \
      -d '{"email":"bench@big.test","partnerId":"big","admin":false}' | sed -E 's/.*"id":"([^"]+)".*/\1/')
    TOKEN=$(curl -sf -X POST "http://127.0.0.1:$PORT/internal/v1/users/$user/tokens" -H "$I" | sed -E 's/.*"token":"([^"]+)".*/\1/')
  fi
}
rss() { awk '/VmRSS/ {print $2}' "/proc/$SERVER/status"; }

measure() { # $1 concurrent requests
  local before peak start end r after
  before=$(rss); peak=$before
  start=$(date +%s.%N)
  pids=()
  for i in $(seq 1 "$1"); do
    curl -sf "http://127.0.0.1:$PORT/api/v1/orders" -H "Authorization: Bearer $TOKEN" -o "/tmp/bench-orders-$PORT-$i.json" &
    pids+=($!)
  done
  while running; do
    r=$(rss); [ "$r" -gt "$peak" ] && peak=$r
    sleep 0.02
  done
  for p in "${pids[@]}"; do wait "$p"; done
  end=$(date +%s.%N)
  sleep 2
  after=$(rss)
  echo "  $1 request(s) at once: $(awk -v s="$start" -v e="$end" 'BEGIN {printf "%.2f", e - s}') s; server RSS $((before / 1024)) MiB before, $((peak / 1024)) MiB at the peak: grew by $(( (peak - before) / 1024 )) MiB; $((after / 1024)) MiB 2 s after"
}
running() { for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }

for round in $(seq 1 "$ROUNDS"); do
  for b in "${BINS[@]}"; do
    start_server "$b"
    [ -n "$TOKEN" ] || token
    echo "round $round, $b; load average $(cut -d' ' -f1-3 /proc/loadavg)"
    # One warm-up request (pool, prepared statements, allocator arenas), then the measurement.
    curl -sf "http://127.0.0.1:$PORT/api/v1/orders" -H "Authorization: Bearer $TOKEN" -o /dev/null
    sleep 2
    measure 1
    rows=$(python3 -c "import json; print(len(json.load(open('/tmp/bench-orders-$PORT-1.json'))['data']))")
    echo "  machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); $N orders, $rows listed per response ($(stat -c %s "/tmp/bench-orders-$PORT-1.json") bytes)"
    measure 4
    stop_server
  done
done
rm -f /tmp/bench-orders-"$PORT"-*.json
