#!/usr/bin/env bash
# What the rate limits cost the leads read path (issue 23: "the public limiter and the budget
# check add at most 5 % to the leads read path at 64 connections"). Two release builds of the
# same tree: A, as shipped; B, the baseline, built with the feature `bench-no-limits` (no budget
# charged, the public limit admits everything; never a server to run otherwise). Each is started
# on the same database (1,000 leads) in turn and read with wrk -c$BENCH_CONNS for
# $BENCH_DURATION on GET /api/v1/leads, in $BENCH_PAIRS alternating pairs (A B, B A, A B, …, so a
# drift of the machine weighs on both). Prints each run, then the medians and A/B.
# The budget is the in-process one unless BENCH_REDIS_URL is set (then Redis's: give it a
# database of its own, e.g. redis://127.0.0.1:6379/13; the keys name the bench's token only). The partner's budget is never spent (PARTNER_RATE_LIMIT huge): the check runs
# and admits, as for a client within its limit. Loopback only.
# BENCH_BASELINE=/path/to/partner-server uses a `bench-no-limits` build made earlier (skipping
# its build and the rebuild after it).
# BENCH_COMPARE=/path/to/partner-server adds a third binary to every round (e.g. an older build
# with the same settings: "before"), its median and ratio printed beside A's.
# Each run also prints the CPU time per request of the server and of redis-server (when the
# budget is Redis's and redis-server runs on this machine): where a cost goes.
set -euo pipefail
cd "$(dirname "$0")/.."

PGHOST=127.0.0.1; PGPORT=5432; PGUSER=postgres
export PGHOST PGPORT PGUSER
DB=${BENCH_DB:-pp_bench_limiter}
PORT=${BENCH_PORT:-18098}
DURATION=${BENCH_DURATION:-10s}
CONNS=${BENCH_CONNS:-64}
THREADS=${BENCH_THREADS:-2}
PAIRS=${BENCH_PAIRS:-3}
export DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB"
export PARTNER_BIND="127.0.0.1:$PORT" PARTNER_TOKEN_PEPPER=bench-pepper
export PARTNER_INTERNAL_TOKEN=bench-internal-token-0123456789abcdef
export PARTNER_RATE_LIMIT=1000000000/60s RUST_LOG=warn PARTNER_LOG_FORMAT=text
unset PARTNER_REDIS_URL PARTNER_METRICS_BIND PARTNER_INTERNAL_BIND PARTNER_TRUSTED_PROXIES
if [ -n "${BENCH_REDIS_URL:-}" ]; then
  export PARTNER_REDIS_URL=$BENCH_REDIS_URL
fi

command -v wrk >/dev/null || { echo "wrk is missing" >&2; exit 1; }
TARGET=${CARGO_TARGET_DIR:-target}
BINS=$TARGET/bench-limiter
mkdir -p "$BINS"
cargo build --release -q -p partner-server
cp "$TARGET/release/partner-server" "$BINS/with-limits"
if [ -n "${BENCH_BASELINE:-}" ]; then
  # A baseline built earlier from a tree whose limits path is the same (saves two builds).
  cp "$BENCH_BASELINE" "$BINS/baseline.new" && mv "$BINS/baseline.new" "$BINS/baseline"
else
  cargo build --release -q -p partner-server --features bench-no-limits
  cp "$TARGET/release/partner-server" "$BINS/baseline"
  # Leave the ordinary build in place for whoever runs target/release/partner-server next.
  cargo build --release -q -p partner-server
fi
BUILDS="with-limits baseline"
if [ -n "${BENCH_COMPARE:-}" ]; then
  cp "$BENCH_COMPARE" "$BINS/before"
  BUILDS="with-limits baseline before"
fi
REDIS_PID=""
if [ -n "${BENCH_REDIS_URL:-}" ]; then
  REDIS_PID=$(redis-cli -u "$BENCH_REDIS_URL" info server | tr -d '\r' | awk -F: '$1 == "process_id" { print $2 }')
  [ -r "/proc/$REDIS_PID/stat" ] || REDIS_PID=""
fi
# Scripts (EVAL and EVALSHA) Redis has run so far, every client's (other users of that Redis
# count too: a run's figure is an upper bound of the server's).
scripts() {
  [ -n "$REDIS_PID" ] || { echo 0; return; }
  redis-cli -u "$BENCH_REDIS_URL" info commandstats | tr -d '\r' \
    | awk -F'[:=,]' '/^cmdstat_(evalsha|eval):/ { s += $3 } END { print s + 0 }'
}
# CPU seconds (user + system) of a process so far.
cpu() { [ -n "$1" ] && awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f", ($14 + $15) / hz }' "/proc/$1/stat" || echo 0; }

psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres
"$BINS/with-limits" migrate

SERVER=""
stop() { [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null; SERVER=""; }
trap 'stop; psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres' EXIT
start() {
  "$BINS/$1" serve --no-migrate & SERVER=$!
  for _ in $(seq 1 100); do curl -sf "localhost:$PORT/readyz" >/dev/null && return; sleep 0.1; done
  echo "the server did not start" >&2; exit 1
}

start with-limits
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
psql -q "$DB" -c "VACUUM ANALYZE leads" >/dev/null
LEADS="http://127.0.0.1:$PORT/api/v1/leads"
stop

# The 99th percentile of a wrk --latency output, in ms.
p99() {
  awk '$1 == "99%" { v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v);
    if (u == "us") v /= 1000; else if (u == "s") v *= 1000; else if (u == "m") v *= 60000;
    printf "%.2f", v }'
}

RESULTS=$(mktemp)
run() {
  local build=$1 out
  start "$build"
  # Warm-up: the token is seen, connections pooled, pages cached.
  wrk -t"$THREADS" -c"$CONNS" -d3s -H "Authorization: Bearer $TOKEN" "$LEADS" >/dev/null
  local s0 r0 s1 r1 e0 e1
  s0=$(cpu "$SERVER"); r0=$(cpu "$REDIS_PID"); e0=$(scripts)
  out=$(wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency -H "Authorization: Bearer $TOKEN" "$LEADS")
  s1=$(cpu "$SERVER"); r1=$(cpu "$REDIS_PID"); e1=$(scripts)
  stop
  local rps non2xx p reqs
  rps=$(grep Requests/sec <<<"$out" | awk '{print $2}')
  reqs=$(awk '/requests in/ { print $1 }' <<<"$out")
  non2xx=$(grep -E 'Non-2xx' <<<"$out" | awk '{print $NF}' || true)
  p=$(p99 <<<"$out")
  local us_server us_redis
  us_server=$(awk -v a="$s0" -v b="$s1" -v n="$reqs" 'BEGIN { printf "%.0f", (b - a) * 1e6 / n }')
  us_redis=$(awk -v a="$r0" -v b="$r1" -v n="$reqs" 'BEGIN { printf "%.1f", (b - a) * 1e6 / n }')
  local per_script
  per_script=$(awk -v e="$((e1 - e0))" -v n="$reqs" 'BEGIN { printf "%.3f", e / n }')
  echo "$build $rps $p ${non2xx:-0} $us_server $us_redis $per_script" >>"$RESULTS"
  printf '%-12s %10s req/s  p99 %7s ms  non-2xx %s  CPU/request: server %s us, redis-server %s us; Redis scripts/request %s  (load %s)\n' \
    "$build" "$rps" "$p" "${non2xx:-0}" "$us_server" "$us_redis" "$per_script" "$(cut -d' ' -f1 /proc/loadavg)"
}

echo "== GET /api/v1/leads, wrk -t$THREADS -c$CONNS -d$DURATION, $PAIRS pairs" \
  "(budget: ${BENCH_REDIS_URL:+Redis}${BENCH_REDIS_URL:-in-process}); load: $(uptime | sed 's/.*load average: //')"
for i in $(seq 1 "$PAIRS"); do
  # Rotated each round (A B C, B C A, C A B, …), so a drift of the machine weighs on every build.
  set -- $BUILDS
  for _ in $(seq 2 "$i"); do first=$1; shift; set -- "$@" "$first"; done
  for b in "$@"; do run "$b"; done
done
echo "load after: $(uptime | sed 's/.*load average: //')"
awk '
  function median(a, n,   i, j, t) {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  $1 == "with-limits" { a[++na] = $2; ap[na] = $3; as[na] = $5; ar[na] = $6 }
  $1 == "baseline" { b[++nb] = $2; bp[nb] = $3; bs[nb] = $5; br[nb] = $6 }
  $1 == "before" { c[++nc] = $2; cp[nc] = $3; cs[nc] = $5; cr[nc] = $6 }
  END {
    ma = median(a, na); mb = median(b, nb); pa = median(ap, na); pb = median(bp, nb)
    printf "median with limits: %.0f req/s, p99 %.2f ms, CPU/request server %.0f us, redis-server %.1f us\n", ma, pa, median(as, na), median(ar, na)
    printf "median baseline:    %.0f req/s, p99 %.2f ms, CPU/request server %.0f us, redis-server %.1f us\n", mb, pb, median(bs, nb), median(br, nb)
    printf "ratio A/B throughput: %.3f (cost of the limits: %.1f %%; the target: at most 5 %%)\n", ma / mb, (1 - ma / mb) * 100
    if (nc > 0) {
      mc = median(c, nc)
      printf "median before:      %.0f req/s, p99 %.2f ms, CPU/request server %.0f us, redis-server %.1f us\n", mc, median(cp, nc), median(cs, nc), median(cr, nc)
      printf "ratio before/B throughput: %.3f (cost: %.1f %%)\n", mc / mb, (1 - mc / mb) * 100
    }
  }' "$RESULTS"
rm -f "$RESULTS"
