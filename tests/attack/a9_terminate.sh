#!/usr/bin/env bash
# attack9: pg_terminate_backend of the liveness probe's connection (the backend whose last query
# is `SELECT 1`; WHO=all: every backend of the database) every EVERY seconds for SECS seconds
# while a9_freeze.py's request loops run on a healthy database: any 503? db_unreachable_total?
set -uo pipefail
. "$(dirname "$0")/lib.sh"
NAME=${NAME:-a9term}; SP=${SP:-18440}; SECS=${SECS:-20}; EVERY=${EVERY:-1}; WHO=${WHO:-probe}
export DB_PREFIX=pp_attack9_
DB=${DB_PREFIX}$NAME
psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -qc "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1
export PARTNER_TOKEN_PEPPER="attack9-$(date +%s%N)"
PARTNER_RATE_LIMIT=1000000/60s PARTNER_PUBLIC_RATE=1000000 RUST_LOG=${RUST_LOG:-warn} start_server "$NAME" "$SP" || exit 1
start_receiver "$NAME" $((SP+5))
trap 'kill $SERVER_PID 2>/dev/null; stop_receiver; wait 2>/dev/null' EXIT
echo "== $NAME: $BIN, terminate $WHO every ${EVERY}s for ${SECS}s, load $(cut -d' ' -f1-3 /proc/loadavg)"
( end=$((SECONDS + SECS)); n=0
  while [ $SECONDS -lt $end ]; do
    if [ "$WHO" = all ]; then w="datname='$DB' AND pid <> pg_backend_pid()"; else w="datname='$DB' AND query='SELECT 1'"; fi
    k=$(psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -Atc "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity WHERE $w")
    n=$((n + k)); sleep "$EVERY"
  done; echo "== terminated $n backends" ) &
KILLER=$!
BASE=$BASE TOKEN=$TOKEN ITOKEN=$ITOKEN PGDATA=$PGDATA PG_PORT=$PG_PORT DB=$DB RECV_LOG=$RECV_LOG TAG=$NAME \
  FREEZES="idle$SECS" python3 -u "$ATTACK_DIR/a9_freeze.py"; rc=$?
wait $KILLER
curl -s "$METRICS" | grep -E '^db_unreachable_total|^db_probe_duration_seconds_count'
echo "== log: $(grep -c 'marked unreachable' "$SERVER_LOG") 'marked unreachable', $(grep -c '"status":500' "$SERVER_LOG") 500s; load $(cut -d' ' -f1-3 /proc/loadavg)"
grep -i 'probe\|unreachable' "$SERVER_LOG" | head -3 | cut -c1-300
exit $rc
