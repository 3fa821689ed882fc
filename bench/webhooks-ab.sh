#!/usr/bin/env bash
# Paced-latency A/B of two server binaries (issue 22): 200 events/s for 15 s to 10 endpoints,
# each binary on a database of its own (their migrations may differ), alternating ROUNDS times, so
# both see the same machine. Usage:
#   bash bench/webhooks-ab.sh /path/to/old/partner-server /path/to/new/partner-server
# Loopback only; bounded; stops by itself (the receiver is bench/webhooks-lib.sh's nginx).
set -euo pipefail
cd "$(dirname "$0")/.."
A=${1:?usage: webhooks-ab.sh BIN_A BIN_B}
B=${2:?usage: webhooks-ab.sh BIN_A BIN_B}
ROUNDS=${BENCH_ROUNDS:-2}
run() { # $1 label $2 binary $3 database
  (
    export BENCH_DB=$3
    # shellcheck source=bench/webhooks-lib.sh
    source bench/webhooks-lib.sh
    BIN=$2
    trap wh_cleanup EXIT
    wh_start_receiver
    wh_start_hanging
    wh_prepare_db >/dev/null 2>&1
    wh_endpoints 10
    { echo '\set p random(1, 10)'; wh_event_sql; } > "$WH_WORK/event.sql"
    wh_notify_sql > "$WH_WORK/notify.sql"
    wh_rotate_log
    wh_start_server worker
    cat "$WH_WORK/event.sql" "$WH_WORK/notify.sql" > "$WH_WORK/paced.sql"
    pgbench -n -c 2 -j 2 -R 200 -T 15 -f "$WH_WORK/paced.sql" "$WH_DB" >"$WH_WORK/pgbench.log" 2>&1
    wh_wait_done true 60
    read -r count _ p50 p99 _ <<<"$(wh_arrivals)"
    echo "$1 paced 200/s: $count delivered; event→delivery p50 ${p50} ms, p99 ${p99} ms"
    wh_stop_server
  )
}
for _ in $(seq 1 "$ROUNDS"); do
  run A "$A" pp_bench_ab_a
  run B "$B" pp_bench_ab_b
done
