#!/usr/bin/env bash
# attack15: a14_marker.sh for lead d4a4fbc (claim by ctid, markers advanced at most every 50 ms), with a
# third worker process (W3: `serve --role worker`, never killed). One run of one binary:
#   a15_marker.sh TAG BIN PORTBASE DURATION
# A `demo` instance (API + worker) and a second `serve --role worker` on database pp_attack15_TAG,
# 10 endpoints of demo-clinic at a14_recv.py (500 with probability FAIL), leads through the
# operator API (a14_drive.py: RATE a second, two threads), outbox rows written directly by
# pgbench (PGB_RATE a second: one lead; three leads in one statement at one due time; backdated
# 0-3 s; due 0-2 s ahead), PATCHes (give-backs), resends, disable/enable + recover, the second
# worker SIGKILLed at DURATION/2 and restarted. A monitor reads the marker invariant in one
# snapshot every 0.2 s. Then it waits for the backlog (WAIT s) and a14_judge.py judges.
# KEEP=1 keeps the database. Ports used: PORTBASE..PORTBASE+7.
set -uo pipefail
TAG=$1 BIN=$2 PB=$3 DUR=${4:-60}
D="$(cd "$(dirname "$0")" && pwd)"
OUT=$D/out/a15_$TAG; rm -rf "$OUT"; mkdir -p "$OUT"
DB=pp_attack15_$TAG
export PGHOST=127.0.0.1 PGUSER=postgres PGPORT=5432
"$D/gen-certs.sh"
psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; [ -n "${W2:-}" ] && kill "$W2" 2>/dev/null; wait 2>/dev/null
  [ "${KEEP:-0}" = 1 ] || psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres; }
trap cleanup EXIT

RP=$((PB+5))
python3 "$D/a14_recv.py" --port $RP --log "$OUT/recv.log" --fail "${FAIL:-0.3}" --delay "${RDELAY:-0.03}" &
PIDS+=($!)
COMMON=(DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB" PARTNER_WEBHOOK_ALLOW_PRIVATE=true
  PARTNER_WEBHOOK_CA_FILE="$D/certs/ca.pem" RUST_LOG="${RUST_LOG:-warn}" PARTNER_SHUTDOWN_DRAIN=0
  PARTNER_WEBHOOK_RETRY_SCHEDULE="${SCHEDULE:-1s,1s,1s,1s,1s,1s,1s,1s,1s,1s}"
  PARTNER_WEBHOOK_TIMEOUT="${TIMEOUT:-2s}" PARTNER_WEBHOOK_ENDPOINT_CONCURRENCY="${EPC:-2}")
env "${COMMON[@]}" PARTNER_BIND=127.0.0.1:$PB PARTNER_METRICS_BIND=127.0.0.1:$((PB+1)) \
  PARTNER_DEMO_ACCESS_FILE="$OUT/access" "$BIN" demo >"$OUT/demo.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 150); do [ -s "$OUT/access" ] && break; sleep 0.2; done
[ -s "$OUT/access" ] || { echo "demo did not start"; tail "$OUT/demo.log"; exit 1; }
. "$OUT/access"
export BASE=http://127.0.0.1:$PB TOKEN=$PARTNER_TOKEN ITOKEN=$INTERNAL_TOKEN
P() { curl -s -H "Authorization: Bearer $TOKEN" -H 'content-type: application/json' "$@"; }
for id in $(P "$BASE/api/v1/webhook-endpoints" | python3 -c 'import json,sys; print(" ".join(e["id"] for e in json.load(sys.stdin)["data"]))'); do
  P -X DELETE "$BASE/api/v1/webhook-endpoints/$id" >/dev/null; done
for i in $(seq 1 10); do
  P -X POST "$BASE/api/v1/webhook-endpoints" -d "{\"url\":\"https://127.0.0.1:$RP/hook/$i\",\"events\":[\"lead.created\"]}" >/dev/null; done
echo "endpoints: $(psql -Atc "SELECT count(*) FROM webhook_endpoints WHERE partner_id='demo-clinic'" $DB)"

start_w2() { env "${COMMON[@]}" PARTNER_BIND=127.0.0.1:$((PB+2)) PARTNER_METRICS_BIND=127.0.0.1:$((PB+3)) \
  "$BIN" serve --no-migrate --role worker >>"$OUT/w2.log" 2>&1 & W2=$!; }
start_w2
env "${COMMON[@]}" PARTNER_BIND=127.0.0.1:$((PB+6)) PARTNER_METRICS_BIND=127.0.0.1:$((PB+7)) \
  "$BIN" serve --no-migrate --role worker >>"$OUT/w3.log" 2>&1 &
PIDS+=($!)

# monitor: the invariant, in one snapshot
MON="SELECT to_char(clock_timestamp(),'HH24:MI:SS.MS'), count(*) FILTER (WHERE q.endpoint_id IS NULL),
  count(*) FILTER (WHERE d.next_attempt_at < q.due_at), count(*),
  coalesce(string_agg(d.id||'/'||d.next_attempt_at||'/'||coalesce(q.due_at::text,'-')||'/'||(d.lease_token IS NOT NULL), ' ')
    FILTER (WHERE q.endpoint_id IS NULL OR d.next_attempt_at < q.due_at), '')
  FROM webhook_deliveries d LEFT JOIN webhook_endpoint_queue q ON q.endpoint_id = d.endpoint_id
  WHERE d.status = 'pending' AND d.next_attempt_at IS NOT NULL"
( while :; do psql -AtF' ' -c "$MON" $DB; sleep 0.2; done >"$OUT/monitor.log" 2>&1 ) &
PIDS+=($!)

# pgbench writers
ID=$(psql -Atc "SELECT COALESCE(to_regprocedure('uuid_v7()')::text, 'gen_random_uuid()')" $DB)
mk() { sed -e "s/@ID@/$ID/g" -e "s/@N@/$1/" -e "s/@DUE@/$2/g" "$D/a14_sql/tmpl.sql" >"$OUT/$3.sql"; }
mk 1 "ev.created_at" one
mk 3 "now()" three_equal
mk 1 "ev.created_at - random() * interval '3 s'" back
mk 1 "ev.created_at + random() * interval '2 s'" ahead
PGB_RATE=${PGB_RATE:-4}
if [ "$PGB_RATE" != 0 ]; then
  pgbench -n -c 2 -R "$PGB_RATE" -T "$DUR" -f "$OUT/one.sql@3" -f "$OUT/three_equal.sql@1" \
    -f "$OUT/back.sql@1" -f "$OUT/ahead.sql@1" $DB >"$OUT/pgbench.log" 2>&1 &
  PIDS+=($!)
fi

# the kill
( sleep "$(echo "$DUR / 2" | bc)"; echo "kill $(date +%s.%N)" >"$OUT/kill"; kill -9 $W2 ) &
KP=$!
T0=$(date +%s.%N)
DURATION=$DUR RATE=${RATE:-4} OUT="$OUT/drive.json" python3 "$D/a14_drive.py"
wait $KP
echo "t0 $T0" >>"$OUT/kill"
sleep 1; start_w2
echo "load stopped $(date -u +%T); waiting for the backlog"
for _ in $(seq 1 $((${WAIT:-60} * 2))); do
  left=$(psql -Atc "SELECT count(*) FROM webhook_deliveries WHERE status='pending'" $DB)
  [ "$left" = 0 ] && break; sleep 0.5; done
echo "pending left: $left at $(date -u +%T)"
sleep 1
psql -AtF' ' -c "$MON" $DB >"$OUT/final_monitor"
psql -c "SELECT status, count(*), max(attempts) FROM webhook_deliveries GROUP BY 1" $DB
psql -c "SELECT q.endpoint_id, q.due_at, (SELECT min(next_attempt_at) FROM webhook_deliveries d WHERE d.endpoint_id=q.endpoint_id AND d.status='pending') AS min_pending FROM webhook_endpoint_queue q" $DB
psql -At -F' ' -c "SELECT d.id, d.status, d.endpoint_id, extract(epoch FROM d.created_at), extract(epoch FROM d.next_attempt_at),
    d.attempts, coalesce(d.last_error,'')='' FROM webhook_deliveries d" $DB >"$OUT/deliveries.txt"
psql -At -F' ' -c "SELECT a.delivery_id, extract(epoch FROM a.attempted_at), coalesce(a.duration_ms,0), coalesce(a.status_code,0)
    FROM webhook_attempts a ORDER BY a.delivery_id, a.attempted_at" $DB >"$OUT/attempts.txt"
python3 "$D/a14_judge.py" "$OUT"
