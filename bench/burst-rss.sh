#!/usr/bin/env bash
# What a burst of connections leaves in the server's memory (issue 22, the soak's RSS step):
# one `--role all` server (pool of BENCH_POOL, default 8) on a fresh database with 2,000 leads of
# one partner; 16 connections read the first page of GET /api/v1/leads for 10 s (steady), then
# BENCH_BURST (default 400) connections do for 15 s, then nothing. The server's RSS (and its
# anonymous part) is sampled every second; printed: after the steady load, the peak, and 5 s and
# BENCH_AFTER s (default 50) after the burst, each with the anonymous part (BENCH_TAIL=1: and
# after 10 s more of the steady load). BENCH_COMPARE=<another partner-server binary> measures
# it too, alternating, BENCH_ROUNDS times each (default 1).
# MIMALLOC_* variables are passed to the server as set. Loopback only; stops by itself.
set -euo pipefail
cd "$(dirname "$0")/.."
export PGHOST=127.0.0.1 PGPORT=5432 PGUSER=postgres
DB=${BENCH_DB:-pp_bench_burst}
PORT=${BENCH_PORT:-18093}
BURST=${BENCH_BURST:-400}
AFTER=${BENCH_AFTER:-50}
ROUNDS=${BENCH_ROUNDS:-1}
export DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB"
export PARTNER_BIND="127.0.0.1:$PORT" PARTNER_TOKEN_PEPPER=bench-pepper PARTNER_DB_POOL_SIZE=${BENCH_POOL:-8}
export PARTNER_INTERNAL_TOKEN=bench-internal-token-0123456789abcdef RUST_LOG=error
export PARTNER_RATE_LIMIT=1000000000/1s
command -v wrk >/dev/null || { apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }; }
[ -n "${BENCH_BIN:-}" ] || cargo build --release -q -p partner-server
BIN=${BENCH_BIN:-${CARGO_TARGET_DIR:-target}/release/partner-server}
BINS=("$BIN")
[ -z "${BENCH_COMPARE:-}" ] || BINS+=("$BENCH_COMPARE")

SERVER=
stop_server() { [ -z "$SERVER" ] || { kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; SERVER=; }; }
trap 'stop_server; psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres' EXIT

psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres
$BIN migrate
psql -q "$DB" -c "
  INSERT INTO partners (partner_id, name, email, active, dna_access, headless_links, default_lang, enabled_langs,
    cs_subscription_active, cs_manual_override, cs_yearly_bundle, cs_services, created_at, updated_at)
  VALUES ('big', 'Big', 'ops@big.test', true, false, true, 'en', '{en}', false, false, false, '{}', now(), now());
  INSERT INTO leads (id, partner_id, sub_id, first_name, last_name, email, email_consent, phone, sms_consent,
    origin, location, question_id, is_test, test_source, created_at, updated_at)
  SELECT gen_random_uuid(), 'big', NULL, 'First' || g, 'Last' || g, 'lead' || g || '@example.com', true,
    '+1 555 ' || lpad(g::text, 4, '0'), true, 'managed-website', 'Austin, TX', NULL, false, NULL,
    timestamptz '2026-11-01' - make_interval(secs => g), timestamptz '2026-11-01' - make_interval(secs => g)
  FROM generate_series(1, 2000) g;" -c "VACUUM ANALYZE leads"

start_server() { # binary
  "$1" serve --no-migrate --role all &
  SERVER=$!
  for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.2; done
}
I="Authorization: Bearer $PARTNER_INTERNAL_TOKEN"
TOKEN=
token() {
  local user
  user=$(curl -sf -X POST "http://127.0.0.1:$PORT/internal/v1/users" -H "$I" \
    -d '{"email":"bench@big.test","partnerId":"big","admin":false}' | sed -E 's/.*"id":"([^"]+)".*/\1/')
  TOKEN=$(curl -sf -X POST "http://127.0.0.1:$PORT/internal/v1/users/$user/tokens" -H "$I" | sed -E 's/.*"token":"([^"]+)".*/\1/')
}
# RSS and its anonymous part, MB, and the server's open sockets.
mem() {
  awk '/^VmRSS/ {r = $2} /^RssAnon/ {a = $2} END {printf "%d (%d)", r / 1024, a / 1024}' "/proc/$SERVER/status"
  printf ' %s sockets' "$(find "/proc/$SERVER/fd" -lname 'socket:*' 2>/dev/null | wc -l)"
}
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$SERVER/status"; }
LEADS="http://127.0.0.1:$PORT/api/v1/leads"

for round in $(seq 1 "$ROUNDS"); do
  for b in "${BINS[@]}"; do
    start_server "$b"
    [ -n "$TOKEN" ] || token
    echo "round $round, $b; load average $(cut -d' ' -f1-3 /proc/loadavg)"
    started=$(mem)
    wrk -t1 -c16 -d10s -H "Authorization: Bearer $TOKEN" "$LEADS" >/tmp/bench-burst-$PORT-steady.out
    sleep 2
    steady=$(mem)
    steady_rps=$(awk '/Requests\/sec/ {print $2}' /tmp/bench-burst-$PORT-steady.out)
    wrk -t2 -c"$BURST" -d15s -H "Authorization: Bearer $TOKEN" "$LEADS" >/tmp/bench-burst-$PORT-burst.out &
    W=$!
    peak=0
    while kill -0 "$W" 2>/dev/null; do r=$(rss_kb); [ "$r" -gt "$peak" ] && peak=$r; sleep 1; done
    wait "$W" || true
    sleep 5
    five=$(mem)
    sleep $((AFTER - 5))
    late=$(mem)
    tail=
    if [ -n "${BENCH_TAIL:-}" ]; then
      wrk -t1 -c16 -d10s -H "Authorization: Bearer $TOKEN" "$LEADS" >/dev/null
      sleep 2
      tail="; after 10 s more of 16 connections $(mem)"
    fi
    rps=$(awk '/Requests\/sec/ {print $2}' /tmp/bench-burst-$PORT-burst.out)
    non2xx=$(awk '/Non-2xx/ {print $NF}' /tmp/bench-burst-$PORT-burst.out)
    echo "  RSS (anonymous) MB, open sockets: started $started; after 10 s of 16 connections $steady ($steady_rps req/s); peak during $BURST connections $((peak / 1024)) ($rps req/s, ${non2xx:-0} non-2xx); 5 s after $five; ${AFTER} s after $late$tail"
    stop_server
  done
done
rm -f /tmp/bench-burst-"$PORT"-*.out
