#!/usr/bin/env bash
# attack9: false positives of the liveness probe: BUSY busy loops (default 16) at the server's
# nice for SECS seconds on a healthy database, while a9_freeze.py's request loops run (FREEZES=idle).
# FREEZES="3 3" freezes PostgreSQL under that load instead (a9_freeze.py). Prints 503s, db_unreachable_total and db_probe_duration_seconds' buckets.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
NAME=${NAME:-a9cpu}; SP=${SP:-18430}; BUSY=${BUSY:-16}; SECS=${SECS:-90}
export DB_PREFIX=pp_attack9_
DB=${DB_PREFIX}$NAME
psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -qc "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1
export PARTNER_TOKEN_PEPPER="attack9-$(date +%s%N)"
PARTNER_RATE_LIMIT=1000000/60s PARTNER_PUBLIC_RATE=1000000 RUST_LOG=${RUST_LOG:-warn} start_server "$NAME" "$SP" || exit 1
start_receiver "$NAME" $((SP+5))
P -X POST "$BASE/api/v1/webhook-endpoints" -d "{\"url\":\"https://127.0.0.1:$((SP+5))/a9\",\"events\":[\"lead.created\"],\"secret\":true}" >/dev/null
BUSY_PIDS=()
trap 'kill $SERVER_PID "${BUSY_PIDS[@]}" 2>/dev/null; stop_receiver; wait 2>/dev/null' EXIT
echo "== $NAME: $BIN, $BUSY busy loops for ${SECS}s at nice $(nice), PARTNER_DB_PROBE_TIMEOUT=${PARTNER_DB_PROBE_TIMEOUT:-default}, load $(cut -d' ' -f1-3 /proc/loadavg)"
for _ in $(seq 1 "$BUSY"); do ( while :; do :; done ) & BUSY_PIDS+=($!); done
BASE=$BASE TOKEN=$TOKEN ITOKEN=$ITOKEN PGDATA=$PGDATA PG_PORT=$PG_PORT DB=$DB RECV_LOG=$RECV_LOG TAG=$NAME \
  FREEZES="${FREEZES:-idle$SECS}" python3 -u "$ATTACK_DIR/a9_freeze.py"; rc=$?
kill "${BUSY_PIDS[@]}" 2>/dev/null; wait "${BUSY_PIDS[@]}" 2>/dev/null; BUSY_PIDS=()
curl -s "$METRICS" | grep -E '^db_unreachable_total|^db_probe_duration_seconds_(bucket|count|sum)'
echo "== log: $(grep -ci 'unreachable' "$SERVER_LOG") lines naming 'unreachable', $(grep -c '"status":500' "$SERVER_LOG") 500s; load $(cut -d' ' -f1-3 /proc/loadavg)"
exit $rc
