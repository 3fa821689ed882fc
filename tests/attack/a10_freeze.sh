#!/usr/bin/env bash
# attack9: §11 with a SIGSTOPped (all, `pm<s>` postmaster only, `kids<s>` children only) / restarted PostgreSQL of our own (the caller's cluster:
# PGDATA, PG_PORT), the `demo` server of PARTNER_BIN on it, an HTTPS receiver with a lead.created
# endpoint, then a9_freeze.py (FREEZES="0.3 0.7 1.5 3 restart", LOOPS=2).
#   PGDATA=/tmp/attack9/pg/data PG_PORT=18400 PARTNER_BIN=/work/bin/partner-server-lead2 NAME=lead2 SP=18410 ./a9_freeze.sh
set -uo pipefail
. "$(dirname "$0")/lib.sh"
NAME=${NAME:-a9}; SP=${SP:-18410}
export DB_PREFIX=pp_attack10_
DB=${DB_PREFIX}$NAME
psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -qc "DROP DATABASE IF EXISTS $DB" >/dev/null
export PARTNER_TOKEN_PEPPER="attack10-$(date +%s%N)"
PARTNER_RATE_LIMIT=1000000/60s PARTNER_PUBLIC_RATE=1000000 RUST_LOG=${RUST_LOG:-warn} start_server "$NAME" "$SP" || exit 1
start_receiver "$NAME" $((SP+5))
trap 'kill $SERVER_PID 2>/dev/null; stop_receiver; wait 2>/dev/null' EXIT
for id in $(P "$BASE/api/v1/webhook-endpoints" | jq -r '.data[].id'); do P -X DELETE "$BASE/api/v1/webhook-endpoints/$id" >/dev/null; done
P -X POST "$BASE/api/v1/webhook-endpoints" -d "{\"url\":\"https://127.0.0.1:$((SP+5))/a9\",\"events\":[\"lead.created\"],\"secret\":true}" | jq -c '.data | {id,url}'
echo "== $NAME: $BIN, PARTNER_DB_PROBE_TIMEOUT=${PARTNER_DB_PROBE_TIMEOUT:-default}, load $(cut -d' ' -f1-3 /proc/loadavg)"
BASE=$BASE TOKEN=$TOKEN ITOKEN=$ITOKEN PGDATA=$PGDATA PG_PORT=$PG_PORT DB=$DB RECV_LOG=$RECV_LOG TAG=$NAME \
  python3 -u "$ATTACK_DIR/a10_freeze.py"; rc=$?
echo "== metrics: $(curl -s "$METRICS" | grep -E '^db_unreachable_total|^db_probe_duration_seconds_count' | tr '\n' ' ')"
echo "== log: $(grep -ci 'unreachable' "$SERVER_LOG") lines naming 'unreachable', $(grep -ci 'panic' "$SERVER_LOG") panics, $(grep -c '"status":500' "$SERVER_LOG") 500s; load $(cut -d' ' -f1-3 /proc/loadavg)"
exit $rc
