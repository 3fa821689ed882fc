#!/usr/bin/env bash
# Durability drill (issue 8): 10,000 lead.created events are written while a `--role worker`
# process delivers them to nginx over HTTPS; the process is killed with SIGKILL twice mid-run and
# restarted each time. Then every delivery must have reached the receiver at least once (0 lost),
# and every request the receiver saw must carry the id of a real delivery (duplicates only under
# the same X-Partner-Delivery). Exits non-zero when anything was lost. Loopback only; bounded.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/webhooks-lib.sh
trap wh_cleanup EXIT
N=${DRILL_EVENTS:-10000}
# A short attempt timeout keeps the lease (2 × timeout + 5 s) and so the recovery short.
export PARTNER_WEBHOOK_TIMEOUT=2s

wh_install
wh_start_receiver
wh_prepare_db
wh_endpoints 10
{ echo '\set p random(1, 10)'; wh_event_sql; } > "$WH_WORK/event.sql"
wh_rotate_log

wh_start_server worker
# Paced so that the writes span both kills.
pgbench -n -c 4 -j 2 -R 1000 -t $((N / 4)) -f "$WH_WORK/event.sql" "$WH_DB" >"$WH_WORK/pgbench.log" 2>&1 &
writer=$!
for round in 1 2; do
  sleep 2
  kill -9 "$WH_SERVER"; wait "$WH_SERVER" 2>/dev/null || true
  inflight=$(psql -qtA "$WH_DB" -c "SELECT count(*) FROM webhook_deliveries WHERE lease_token IS NOT NULL")
  echo "kill -9 #$round: $inflight deliveries were leased to the killed process"
  sleep 0.5
  wh_start_server worker
done
wait "$writer"
written=$(psql -qtA "$WH_DB" -c "SELECT count(*) FROM webhook_deliveries")
wh_wait_done true 120
wh_stop_server
sleep 0.5
psql -q "$WH_DB" -c "TRUNCATE bench_arrivals" -c "\\copy bench_arrivals FROM '$WH_WORK/access.log' WITH (FORMAT text, DELIMITER ' ')"
read -r delivered lost arrivals distinct strangers <<<"$(psql -qtA -F' ' "$WH_DB" -c "
  SELECT (SELECT count(*) FROM webhook_deliveries WHERE status = 'delivered'),
         (SELECT count(*) FROM webhook_deliveries d WHERE NOT EXISTS (SELECT 1 FROM bench_arrivals a WHERE a.id = d.id::text)),
         (SELECT count(*) FROM bench_arrivals),
         (SELECT count(DISTINCT id) FROM bench_arrivals),
         (SELECT count(*) FROM bench_arrivals a WHERE NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.id::text = a.id))")"
echo "events written: $written; delivered: $delivered; lost: $lost; requests received: $arrivals for $distinct distinct deliveries ($((arrivals - distinct)) duplicates, $strangers under unknown ids)"
[ "$written" = "$N" ] && [ "$lost" = 0 ] && [ "$strangers" = 0 ] && [ "$delivered" = "$N" ]
