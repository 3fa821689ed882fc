#!/usr/bin/env bash
# The server CPU per request of two release binaries in alternating rounds, on a cheap
# authenticated read: GET /api/v1/leads/{id} (one lead, one statement). Made to measure what
# `own_headers` (crates/partner-server/src/edge.rs: every request's headers copied into a map of
# their own) costs: BENCH_A is a binary as shipped, BENCH_B the same tree with the copy bypassed
# (a throw-away build). Two header sets, each read with wrk -c$BENCH_CONNS for $BENCH_DURATION
# after a 3 s warm-up: `wrk` (Host and Authorization only) and `client` (eight more, as a
# browser or an HTTP library sends). CPU per request: the server process's user + system time
# (/proc/<pid>/stat) over the measured run, divided by the requests wrk made. Rounds alternate
# (A B, B A, ...) so a drift of the shared machine weighs on both; prints each run with the load
# average, then per header set the medians and A ÷ B. Loopback only; the database is dropped.
# BENCH_CALLGRIND=1: the servers run under valgrind's callgrind instead, and a run counts the
# instructions the server executed per request (Ir; counters zeroed after the warm-up, dumped
# after the run) and, for A, those inside `own_headers` (inclusive): figures that do not move
# with the machine's load, where the CPU time does (at 1-2 rounds: they hardly vary).
# Usage: BENCH_A=<binary> BENCH_B=<binary> [BENCH_ROUNDS=5] bash bench/header-copy.sh
set -euo pipefail
cd "$(dirname "$0")/.."

export PGHOST=127.0.0.1 PGPORT=5432 PGUSER=postgres
A_BIN=${BENCH_A:?BENCH_A=<binary as shipped>}
B_BIN=${BENCH_B:?BENCH_B=<binary without the header copy>}
DB=${BENCH_DB:-pp_bench_headers}
PORT=${BENCH_PORT:-18097}
DURATION=${BENCH_DURATION:-10s}
CONNS=${BENCH_CONNS:-32}
ROUNDS=${BENCH_ROUNDS:-5}
SETS=${BENCH_SETS:-wrk client}
CALLGRIND=${BENCH_CALLGRIND:-}
CG=$(mktemp -d)
export DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB"
export PARTNER_BIND="127.0.0.1:$PORT" PARTNER_TOKEN_PEPPER=bench-pepper
export PARTNER_INTERNAL_TOKEN=bench-internal-token-0123456789abcdef
export PARTNER_RATE_LIMIT=1000000000/60s RUST_LOG=warn PARTNER_LOG_FORMAT=text
unset PARTNER_REDIS_URL PARTNER_METRICS_BIND PARTNER_INTERNAL_BIND PARTNER_TRUSTED_PROXIES
command -v wrk >/dev/null || { echo "wrk is missing" >&2; exit 1; }

# CPU seconds (user + system) of a process so far.
cpu() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f", ($14 + $15) / hz }' "/proc/$1/stat"; }

psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres
"$A_BIN" migrate
SERVER=""
stop() { [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null; SERVER=""; }
trap 'stop; rm -rf "$CG"; psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres' EXIT
start() { # binary [callgrind]
  if [ -n "${2:-}" ]; then
    valgrind -q --tool=callgrind --callgrind-out-file="$CG/cg.%p" "$1" serve --no-migrate --role api & SERVER=$!
  else
    "$1" serve --no-migrate --role api & SERVER=$!
  fi
  for _ in $(seq 1 600); do curl -sf "localhost:$PORT/readyz" >/dev/null && return; sleep 0.1; done
  echo "the server did not start" >&2; exit 1
}

start "$A_BIN"
I="Authorization: Bearer $PARTNER_INTERNAL_TOKEN"
curl -sf -X PUT "localhost:$PORT/internal/v1/partners/bench" -H "$I" -d '{"name":"Bench","email":"b@bench.test",
  "active":true,"dnaAccess":true,"headlessLinks":true,"defaultLang":"en","enabledLangs":["en"],
  "careServices":{"subscriptionActive":true,"manualOverride":false,"yearlyBundle":true,
  "services":["primary-care","mental-health"]}}' >/dev/null
USER_ID=$(curl -sf -X POST "localhost:$PORT/internal/v1/users" -H "$I" \
  -d '{"email":"u@bench.test","partnerId":"bench","admin":false}' | sed 's/.*"id":"\([^"]*\)".*/\1/')
TOKEN=$(curl -sf -X POST "localhost:$PORT/internal/v1/users/$USER_ID/tokens" -H "$I" \
  | sed 's/.*"token":"\([^"]*\)".*/\1/')
LEAD=$(psql -qtA "$DB" -c "INSERT INTO leads (id, partner_id, first_name, last_name, email,
  email_consent, phone, sms_consent, origin, location, is_test, created_at, updated_at)
  VALUES (gen_random_uuid(), 'bench', 'Ann', 'Lee', 'ann@example.com', true, '+1 555 0100', true,
          'managed-website', 'Austin, TX', false, now(), now()) RETURNING id" | head -1)
URL="http://127.0.0.1:$PORT/api/v1/leads/$LEAD"
curl -sf "$URL" -H "Authorization: Bearer $TOKEN" | grep -q "\"id\":\"$LEAD\"" \
  || { echo "lead $LEAD not read" >&2; exit 1; }
stop

# A header set as wrk's -H arguments.
headers() {
  local h=(-H "Authorization: Bearer $TOKEN")
  if [ "$1" = client ]; then
    h+=(-H "User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0"
      -H "Accept: application/json, text/plain, */*" -H "Accept-Language: en-US,en;q=0.5"
      -H "Accept-Encoding: gzip, deflate, br, zstd" -H "Cache-Control: no-cache"
      -H "X-Request-Id: 6f1c2a9e-5b7d-4c1e-9a3f-2d8e7b6c5a41"
      -H "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
      -H "Referer: https://portal.example.com/leads")
  fi
  printf '%s\0' "${h[@]}"
}

RESULTS=$(mktemp)
run() { # label binary set
  local out s0 s1 reqs rps non2xx us h=()
  mapfile -d '' h < <(headers "$3")
  start "$2" "$CALLGRIND"
  wrk -t2 -c"$CONNS" -d3s "${h[@]}" "$URL" >/dev/null
  [ -z "$CALLGRIND" ] || callgrind_control -z "$SERVER" >/dev/null
  s0=$(cpu "$SERVER")
  out=$(wrk -t2 -c"$CONNS" -d"$DURATION" "${h[@]}" "$URL")
  s1=$(cpu "$SERVER")
  [ -z "$CALLGRIND" ] || callgrind_control -d "$SERVER" >/dev/null
  local pid=$SERVER
  stop
  rps=$(awk '/Requests\/sec/ { print $2 }' <<<"$out")
  reqs=$(awk '/requests in/ { print $1 }' <<<"$out")
  non2xx=$(awk '/Non-2xx/ { print $NF }' <<<"$out")
  if [ -n "$CALLGRIND" ]; then
    # The dump made after the run (the final one, at exit, holds the shutdown too).
    local dump total mine
    dump=$(ls "$CG"/cg."$pid".* | sort | head -1)
    total=$(callgrind_annotate "$dump" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(/,/, "", $1); print $1 }')
    mine=$(callgrind_annotate --inclusive=yes --threshold=100 "$dump" 2>/dev/null \
      | awk '!seen && /partner_server::edge::own_headers/ { gsub(/,/, "", $1); print $1; seen = 1 }')
    # BENCH_DUMPS=<dir> keeps each run's dump there (callgrind_annotate --tree=calling …).
    [ -z "${BENCH_DUMPS:-}" ] || cp "$dump" "$BENCH_DUMPS/$3-$1-$pid.callgrind"
    rm -f "$CG"/cg."$pid"*
    printf '%-7s %s  %6s requests  non-2xx %s  server Ir/request %8.0f  own_headers Ir/request %6.0f (%.2f %%)\n' \
      "$3" "$1" "$reqs" "${non2xx:-0}" "$(awk -v t="$total" -v n="$reqs" 'BEGIN { print t / n }')" \
      "$(awk -v t="${mine:-0}" -v n="$reqs" 'BEGIN { print t / n }')" \
      "$(awk -v t="$total" -v m="${mine:-0}" 'BEGIN { print 100 * m / t }')"
    echo "$3 $1 $(awk -v t="$total" -v n="$reqs" 'BEGIN { printf "%.0f", t / n }') $rps" >>"$RESULTS"
    return
  fi
  us=$(awk -v a="$s0" -v b="$s1" -v n="$reqs" 'BEGIN { printf "%.1f", (b - a) * 1e6 / n }')
  echo "$3 $1 $us $rps" >>"$RESULTS"
  printf '%-7s %s  %9s req/s  non-2xx %s  server CPU/request %6s us  (load %s)\n' \
    "$3" "$1" "$rps" "${non2xx:-0}" "$us" "$(cut -d' ' -f1-3 /proc/loadavg)"
}

echo "== GET /api/v1/leads/{id}, wrk -t2 -c$CONNS -d$DURATION, $ROUNDS rounds; load: $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq 1 "$ROUNDS"); do
  for set in $SETS; do
    if [ $((i % 2)) = 1 ]; then run A "$A_BIN" "$set"; run B "$B_BIN" "$set"
    else run B "$B_BIN" "$set"; run A "$A_BIN" "$set"; fi
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
awk -v unit="$([ -n "$CALLGRIND" ] && echo Ir || echo us)" '
  function median(a, n,   i, j, t) {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  { k = $1 SUBSEP $2; n[k]++; us[k, n[k]] = $3; rps[k, n[k]] = $4; sets[$1] = 1 }
  END {
    for (s in sets) {
      for (b = 0; b < 2; b++) {
        l = b ? "B" : "A"; k = s SUBSEP l; delete u; delete r
        for (i = 1; i <= n[k]; i++) { u[i] = us[k, i]; r[i] = rps[k, i] }
        mu[l] = median(u, n[k]); mr[l] = median(r, n[k])
      }
      printf "%-7s median A %.1f %s (%.0f req/s), B %.1f %s (%.0f req/s): A / B per request %.4f (%+.1f %s)\n",
        s, mu["A"], unit, mr["A"], mu["B"], unit, mr["B"], mu["A"] / mu["B"], mu["A"] - mu["B"], unit
    }
  }' "$RESULTS"
# Per round, A / B (the pair run back to back).
awk '{ k = $1; if ($2 == "A") a[k, ++na[k]] = $3; else b[k, ++nb[k]] = $3; s[k] = 1 }
  END { for (k in s) { line = k " per-round A/B:"; for (i = 1; i <= na[k]; i++) line = line sprintf(" %.3f", a[k, i] / b[k, i]); print line } }' "$RESULTS"
rm -f "$RESULTS"
