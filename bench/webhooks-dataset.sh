#!/usr/bin/env bash
# Webhook delivery on a database of bench/dataset.sh (issue 22, item 3): the big partner's 10
# endpoints (nginx on loopback, bench/webhooks-lib.sh) among all the dataset's endpoints (20,000
# at scale 1, 19,990 idle), beside its ~10,000,000 finished deliveries. Cases, each as in
# bench/webhooks.sh but with one event fanned out to the 10 endpoints:
#   pre-filled: BENCH_EVENTS/10 events (20,000 deliveries) written while no worker runs, then a
#     `--role worker` process drains them;
#   live (pgbench): 16 clients write the same number of events while the worker runs;
#   live (API): one `--role all` process takes leads (wrk, 32 connections, 3 s) and delivers;
#   paced: 20 events/s (200 deliveries/s) for 20 s, event→delivery latency.
# Run it on the small dataset (DATASET_SCALE=0.01: 200 endpoints) for the same cases on an
# almost empty database. Retention is set to 90 days (no pruning during the runs). The rows it
# writes stay in the database. Loopback only; stops by itself.
# BENCH_API_DURATION (default 3s) is the live API case's wrk run; BENCH_WH_CASES (default
# "prefill api pgbench paced") picks cases; the arrivals of the last case stay in the table
# `bench_arrivals` (ms, id) of the database. BENCH_WH_HOOK, if set, is a command run with
# "prefilled" after the pre-filled case's rows are written and "drained" once its worker has
# stopped (bench/dataset-prefill-ab.sh takes its statistics there).
# Usage: BENCH_DATASET=pp_dataset bash bench/webhooks-dataset.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export BENCH_DB=${BENCH_DATASET:?BENCH_DATASET=<database made by bench/dataset.sh>}
export BENCH_NGINX_PORT=$(psql -h 127.0.0.1 -U postgres -Atq "$BENCH_DB" -c "SELECT value FROM dataset_info WHERE key = 'receiver_port'")
source bench/webhooks-lib.sh
trap wh_cleanup EXIT
[ -n "${BENCH_BIN:-}" ] || wh_install
BIN=${BENCH_BIN:-$BIN}
export PARTNER_WEBHOOK_RETENTION=90d PARTNER_EVENT_RETENTION=90d PARTNER_RATE_LIMIT=1000000000/1s
N=${BENCH_EVENTS:-20000}
API_DURATION=${BENCH_API_DURATION:-3s}
CASES=" ${BENCH_WH_CASES:-prefill api pgbench paced} "
EV=$((N / 10))
BIG=$(psql -Atq "$WH_DB" -c "SELECT value FROM dataset_info WHERE key = 'big_partner'")
psql -q "$WH_DB" -c "CREATE TABLE IF NOT EXISTS bench_arrivals (ms numeric, id text)"
ENDPOINTS=$(psql -Atq "$WH_DB" -c "SELECT count(*) FROM webhook_endpoints")
OURS=$(psql -Atq "$WH_DB" -c "SELECT count(*) FROM webhook_endpoints WHERE partner_id = '$BIG' AND disabled_at IS NULL")
ROWS=$(psql -Atq "$WH_DB" -c "SELECT reltuples::bigint FROM pg_class WHERE relname = 'webhook_deliveries'")
[ "$OURS" = 10 ] || { echo "$BIG has $OURS enabled endpoints, not 10" >&2; exit 1; }
wh_start_receiver
echo "== $WH_DB: $OURS endpoints of $BIG among $ENDPOINTS, ~$ROWS deliveries; machine $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
limit=$(wh_receiver_limit 5s)
echo "receiver limit (wrk, 64 connections, HTTPS keep-alive POST): $limit req/s"
MINE="w.partner_id = '$BIG'"
since() { psql -Atq "$WH_DB" -c "SELECT now()"; }

# The outbox rows of one lead of the big partner (as wh_event_sql, for $BIG).
wh_event_sql | sed "s/'wh-' || :p/'$BIG'/" >"$WH_WORK/event.sql"
wh_notify_sql >"$WH_WORK/notify.sql"


# Pre-filled drain.
if [[ $CASES == *" prefill "* ]]; then
wh_prefill_partner "$BIG" "$EV"
[ -z "${BENCH_WH_HOOK:-}" ] || "$BENCH_WH_HOOK" prefilled
wh_rotate_log
wh_start_server worker
wh_wait_done "$MINE" 600
wh_stop_server
[ -z "${BENCH_WH_HOOK:-}" ] || "$BENCH_WH_HOOK" drained
read -r count rate _ _ _ <<<"$(wh_arrivals "$MINE")"
echo "pre-filled, $EV events to 10 endpoints: $count delivered, $rate deliveries/s ($(awk -v a="$rate" -v b="$limit" 'BEGIN {printf "%.3f", a / b}') of the receiver); load average $(cut -d' ' -f1-3 /proc/loadavg)"
fi

# Live through the API.
if [[ $CASES == *" api "* ]]; then
cat >"$WH_WORK/ingest.lua" <<LUA
wrk.method = "POST"
wrk.body = '{"partnerId":"$BIG","firstName":"Ann","lastName":"Lee","email":"ann@example.com","emailConsent":true,"phone":"+1 555 0100","smsConsent":true,"origin":"managed-website","location":"Austin, TX"}'
wrk.headers["Authorization"] = "Bearer $PARTNER_INTERNAL_TOKEN"
wrk.headers["Content-Type"] = "application/json"
LUA
wh_rotate_log
wh_start_server all
t=$(since)
ingest=$(wrk -t1 -c32 -d"$API_DURATION" -s "$WH_WORK/ingest.lua" "http://127.0.0.1:$WH_PORT/internal/v1/leads" | awk '/Requests\/sec/ {printf "%.0f", $2}')
wh_wait_done "$MINE" 600
wh_stop_server
read -r count rate p50 p99 live <<<"$(wh_arrivals "$MINE AND d.created_at >= '$t'")"
echo "live through the API (wrk, 32 connections, $API_DURATION, $ingest leads/s accepted, one --role all process): $count delivered, $live deliveries/s from the first event to the last arrival; event→delivery p50 ${p50} ms, p99 ${p99} ms; load average $(cut -d' ' -f1-3 /proc/loadavg)"
fi

# Live: pgbench writes while the worker runs.
if [[ $CASES == *" pgbench "* ]]; then
wh_rotate_log
wh_start_server worker
t=$(since)
start=$(date +%s.%N)
pgbench -n -c 16 -j 2 -t $((EV * 9 / 8 / 16)) -f "$WH_WORK/event.sql@8" -f "$WH_WORK/notify.sql@1" "$WH_DB" >"$WH_WORK/pgbench.log" 2>&1
written=$(psql -Atq "$WH_DB" -c "SELECT count(*) FROM domain_events WHERE partner_id = '$BIG' AND created_at >= '$t'")
ingest=$(awk -v s="$start" -v e="$(date +%s.%N)" -v n="$written" 'BEGIN {printf "%.0f", n / (e - s)}')
wh_wait_done "$MINE" 600
read -r count rate p50 p99 live <<<"$(wh_arrivals "$MINE AND d.created_at >= '$t'")"
echo "live (pgbench, 16 clients, $ingest events/s written = $((ingest * 10)) deliveries/s): $count delivered, $live deliveries/s from the first event to the last arrival; event→delivery p50 ${p50} ms, p99 ${p99} ms; load average $(cut -d' ' -f1-3 /proc/loadavg)"
fi

# Paced: 20 events/s (200 deliveries/s) for 20 s.
if [[ $CASES == *" paced "* ]]; then
cat "$WH_WORK/event.sql" "$WH_WORK/notify.sql" >"$WH_WORK/paced.sql"
# Alone (BENCH_WH_CASES=paced), no worker runs yet: one is started and warmed for 3 s at the
# same pace (its connections, prepared statements and the receiver's keep-alive), outside the
# measured run.
if [ -z "$WH_SERVER" ]; then
  wh_start_server worker
  pgbench -n -c 2 -j 2 -R 20 -T 3 -f "$WH_WORK/paced.sql" "$WH_DB" >/dev/null 2>&1
  wh_wait_done "$MINE" 60
fi
wh_rotate_log
t=$(since)
pgbench -n -c 2 -j 2 -R 20 -T 20 -f "$WH_WORK/paced.sql" "$WH_DB" >"$WH_WORK/pgbench.log" 2>&1
wh_wait_done "$MINE" 60
read -r count _ p50 p99 _ <<<"$(wh_arrivals "$MINE AND d.created_at >= '$t'")"
echo "paced 20 events/s to 10 endpoints (200 deliveries/s): $count delivered; event→delivery p50 ${p50} ms, p99 ${p99} ms; load average $(cut -d' ' -f1-3 /proc/loadavg)"
wh_stop_server
fi
