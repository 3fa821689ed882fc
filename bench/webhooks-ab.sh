#!/usr/bin/env bash
# Same-run A/B of two server binaries' delivery latency and one-endpoint throughput (issue 22),
# each binary on a database of its own (their migrations may differ), alternating ROUNDS times, so
# both see the same machine. Usage:
#   bash bench/webhooks-ab.sh /path/to/old/partner-server /path/to/new/partner-server
# BENCH_AB_CASES picks the cases (default: all, in this order):
#   prefill1   20,000 deliveries pre-filled for 1 endpoint, drained: deliveries/s
#   prefill10  the same for 10 endpoints
#   live1      pgbench (16 clients) writes events for 1 endpoint while the worker runs:
#              event→delivery p50/p99 and deliveries/s
#   rate1      the same at a fixed BENCH_LIVE_RATE events/s (default 1,407, issue 22's 0-idle live
#              rate) for 15 s: event→delivery p50/p99 at a rate one endpoint keeps up with
#   rate10     rate1 spread over 10 endpoints (issue 22: live to 10 endpoints among idle ones)
#   paced1     200 events/s for 15 s to 1 endpoint (pgbench, each event followed by its NOTIFY, as
#              the server's announcer sends it): event→delivery p50/p99
#   paced10    the same spread over 10 endpoints
#   api1       200 leads/s for 15 s through the server's own ingest (`--role all`, so the
#              announcer is the server's): event→delivery p50/p99
# BENCH_AB_IDLE_A / BENCH_AB_IDLE_B (default BENCH_AB_IDLE, default 0): that many idle endpoints
# (other partners', never written to) beside each case's endpoints on A's / B's side; with the same
# binary on both sides, an A/B of the idle endpoints' cost (issue 22, item 1: pre-filled to 10
# endpoints with 100,000 idle against none, live to 10 with 10,000 idle).
# BENCH_AB_SET_A / BENCH_AB_SET_B="name=value ...": PostgreSQL settings of that side's database
# (ALTER DATABASE … SET), e.g. plan_cache_mode=force_generic_plan.
# Optional: BENCH_AB_KEEP=DIR keeps each case's server log (RUST_LOG defaults to
# partner_webhooks=debug,partner_postgres=debug then: the per-attempt timings) and nginx log in
# DIR; BENCH_AB_WAITS=1 also samples pg_stat_activity of the case's database every 20 ms into
# DIR (its wait events, counted by bench/webhooks-waits.sh). BENCH_AB_DB names the databases
# (default pp_bench_ab: _a, _b), BENCH_PGPORT the PostgreSQL port (default 5432).
# BENCH_AB_EXPLAIN=50ms logs the plan (rows and buffers, no per-node timing) of every statement
# of the server's sessions slower than that to PostgreSQL's own log (auto_explain).
# The live and paced cases also print their latencies without the events of their first second
# (bench/webhooks-lib.sh `wh_arrivals_after`): the writers' sessions and the server's are new then
# (the first events commit ~80 ms after their timestamps); the two p99s tell whether the start
# set a run's p99 (on 2026-11-28 it seldom did: docs/performance.md).
# Every line carries the load average at its end. Loopback only; bounded; stops by itself (the
# receiver is bench/webhooks-lib.sh's nginx, on its own port).
set -euo pipefail
cd "$(dirname "$0")/.."
A=${1:?usage: webhooks-ab.sh BIN_A BIN_B}
B=${2:?usage: webhooks-ab.sh BIN_A BIN_B}
ROUNDS=${BENCH_ROUNDS:-2}
CASES=${BENCH_AB_CASES:-prefill1 prefill10 live1 rate1 paced1 paced10 api1}
N=${BENCH_EVENTS:-20000}
load() { cut -d' ' -f1 /proc/loadavg; }
KEEP=${BENCH_AB_KEEP:-}
# A kept log is for the per-attempt timings: debug for the two crates unless RUST_LOG says otherwise
# (bench/webhooks-lib.sh's default, warn, leaves the log empty).
[ -n "$KEEP" ] && { mkdir -p "$KEEP"; export RUST_LOG=${RUST_LOG:-partner_webhooks=debug,partner_postgres=debug}; }
SAMPLER=""
# sample_start LABEL: pg_stat_activity of this database every 20 ms, in one psql session.
sample_start() {
  [ -n "$KEEP" ] && [ "${BENCH_AB_WAITS:-0}" = 1 ] || return 0
  { echo '\pset format unaligned'; echo '\pset tuples_only on'; echo '\pset fieldsep |'
    for _ in $(seq 1 30000); do
      echo "SELECT extract(epoch FROM now()), pid, application_name, state, coalesce(wait_event_type, 'CPU'), coalesce(wait_event, '-'), left(regexp_replace(query, '\s+', ' ', 'g'), 60) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND state <> 'idle'; SELECT pg_sleep(0.02);"
    done; } | psql -q "$WH_DB" 2>/dev/null | grep -v '^$' > "$KEEP/$1.waits" &
  SAMPLER=$!
}
sample_stop() {
  [ -n "$SAMPLER" ] && { kill "$SAMPLER" 2>/dev/null; wait "$SAMPLER" 2>/dev/null || true; }
  SAMPLER=""
}
# keep LABEL: the case's logs, then empty ones for the next case.
keep() {
  sample_stop
  [ -n "$KEEP" ] || return 0
  cp "$WH_WORK/server.log" "$KEEP/$1.server.log" 2>/dev/null || true
  : > "$WH_WORK/server.log"
}
ROUND=0
run() { # $1 label $2 binary $3 database $4 idle endpoints
  (
    export BENCH_DB=$3
    IDLE=$4
    # shellcheck source=bench/webhooks-lib.sh
    source bench/webhooks-lib.sh
    BIN=$2
    trap wh_cleanup EXIT
    wh_start_receiver
    wh_start_hanging
    wh_prepare_db >/dev/null 2>&1
    # BENCH_AB_SET_A / BENCH_AB_SET_B: "name=value ..." settings for that side's database (every
    # session the server opens), e.g. plan_cache_mode=force_generic_plan.
    set_var=BENCH_AB_SET_$1
    for kv in ${!set_var:-}; do
      psql -q "$WH_DB" -c "ALTER DATABASE $WH_DB SET ${kv%%=*} = '${kv#*=}'"
    done
    if [ -n "${BENCH_AB_EXPLAIN:-}" ]; then
      # Slow statements' plans (with row counts and buffers, without per-node timing) go to
      # PostgreSQL's own log, for every session the server opens on this database from now on.
      psql -q "$WH_DB" -c "ALTER DATABASE $WH_DB SET session_preload_libraries = 'auto_explain'" \
        -c "ALTER DATABASE $WH_DB SET auto_explain.log_min_duration = '$BENCH_AB_EXPLAIN'" \
        -c "ALTER DATABASE $WH_DB SET auto_explain.log_analyze = on" \
        -c "ALTER DATABASE $WH_DB SET auto_explain.log_buffers = on" \
        -c "ALTER DATABASE $WH_DB SET auto_explain.log_timing = off"
    fi
    for case in $CASES; do
      case $case in
        prefill1 | prefill10)
          n=${case#prefill}
          wh_endpoints "$n"
          wh_idle "$IDLE"
          wh_prefill $((N / n)) "$n"
          wh_rotate_log
          wh_start_server worker
          sample_start "$1-$case-r$ROUND"
          wh_wait_done true 300
          wh_stop_server
          keep "$1-$case-r$ROUND"
          read -r count rate _ _ _ <<<"$(wh_arrivals)"
          echo "$1 pre-filled, $n endpoint(s), $IDLE idle: $count delivered, $rate deliveries/s (load $(load))"
          ;;
        live1 | rate1 | rate10)
          # rate1: live1 at a fixed rate (BENCH_LIVE_RATE events/s, default 1,407: the issue's
          # 0-idle live rate), 15 s: the latency at a rate the endpoint keeps up with.
          n=1
          [ "$case" = rate10 ] && n=10
          if [ "$case" != live1 ]; then
            rate=${BENCH_LIVE_RATE:-1407}
            pace=(-R $((rate * 9 / 8)) -T 15)
            what="live at $rate events/s"
          else
            pace=(-t $((N * 9 / 8 / 16)))
            what=live
          fi
          wh_endpoints "$n"
          wh_idle "$IDLE"
          { echo "\\set p random(1, $n)"; wh_event_sql; } > "$WH_WORK/event.sql"
          wh_notify_sql > "$WH_WORK/notify.sql"
          wh_rotate_log
          wh_start_server worker
          sample_start "$1-$case-r$ROUND"
          pgbench -n -c 16 -j 2 "${pace[@]}" -f "$WH_WORK/event.sql@8" -f "$WH_WORK/notify.sql@1" \
            "$WH_DB" >"$WH_WORK/pgbench.log" 2>&1
          # The events after pgbench's last NOTIFY (one transaction in nine) are announced as the
          # server's announcer would announce their commits; else they wait for the 500-ms poll.
          psql -qc "NOTIFY webhook_deliveries" "$WH_DB"
          wh_wait_done true 300
          wh_stop_server
          keep "$1-$case-r$ROUND"
          read -r count _ p50 p99 live <<<"$(wh_arrivals)"
          read -r wp50 wp99 <<<"$(wh_arrivals_after 1)"
          echo "$1 $what (pgbench, 16 clients), $n endpoint(s), $IDLE idle: $count delivered, $live deliveries/s; event→delivery p50 ${p50} ms, p99 ${p99} ms; after the first second p50 ${wp50} ms, p99 ${wp99} ms (load $(load))"
          ;;
        paced1 | paced10)
          n=${case#paced}
          wh_endpoints "$n"
          wh_idle "$IDLE"
          { echo "\\set p random(1, $n)"; wh_event_sql; wh_notify_sql; } > "$WH_WORK/paced.sql"
          wh_rotate_log
          wh_start_server worker
          sample_start "$1-$case-r$ROUND"
          pgbench -n -c 2 -j 2 -R 200 -T 15 -f "$WH_WORK/paced.sql" "$WH_DB" >"$WH_WORK/pgbench.log" 2>&1
          wh_wait_done true 60
          wh_stop_server
          keep "$1-$case-r$ROUND"
          read -r count _ p50 p99 _ <<<"$(wh_arrivals)"
          read -r wp50 wp99 <<<"$(wh_arrivals_after 1)"
          echo "$1 paced 200/s, $n endpoint(s): $count delivered; event→delivery p50 ${p50} ms, p99 ${p99} ms; after the first second p50 ${wp50} ms, p99 ${wp99} ms (load $(load))"
          ;;
        api1)
          wh_endpoints 1
          wh_rotate_log
          wh_start_server all
          sample_start "$1-$case-r$ROUND"
          python3 - "$WH_PORT" "$PARTNER_INTERNAL_TOKEN" <<'PY'
import http.client, sys, time
conn = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]))
body = ('{"partnerId":"wh-1","firstName":"Ann","lastName":"Lee","email":"ann@example.com",'
        '"emailConsent":true,"phone":"+1 555 0100","smsConsent":true,"origin":"managed-website",'
        '"location":"Austin, TX"}')
headers = {"Authorization": "Bearer " + sys.argv[2], "Content-Type": "application/json"}
start = time.monotonic()
for i in range(3000):  # 200/s for 15 s
    wait = start + i / 200 - time.monotonic()
    if wait > 0:
        time.sleep(wait)
    conn.request("POST", "/internal/v1/leads", body, headers)
    conn.getresponse().read()
PY
          wh_wait_done true 60
          wh_stop_server
          keep "$1-$case-r$ROUND"
          read -r count _ p50 p99 _ <<<"$(wh_arrivals)"
          read -r wp50 wp99 <<<"$(wh_arrivals_after 1)"
          echo "$1 paced 200/s through the API, 1 endpoint: $count delivered; event→delivery p50 ${p50} ms, p99 ${p99} ms; after the first second p50 ${wp50} ms, p99 ${wp99} ms (load $(load))"
          ;;
        *) echo "unknown case $case" >&2; exit 2 ;;
      esac
    done
  )
}
for ROUND in $(seq 1 "$ROUNDS"); do
  run A "$A" "${BENCH_AB_DB:-pp_bench_ab}_a" "${BENCH_AB_IDLE_A:-${BENCH_AB_IDLE:-0}}"
  run B "$B" "${BENCH_AB_DB:-pp_bench_ab}_b" "${BENCH_AB_IDLE_B:-${BENCH_AB_IDLE:-0}}"
done
