#!/usr/bin/env bash
# attack12, item 2: keyed writes cut by a SIGSTOP of our own cluster, retried from SIGCONT every
# 0.2 s (attack10/11's a10_freeze.py with IDEM=1 RETRY_NOW=1, unchanged), on databases
# pp_attack12_*. PGDATA, PG_PORT: the cluster (never the shared 5432); PARTNER_BIN: the binary.
#   PGDATA=/tmp/attack12/data PG_PORT=18540 PARTNER_BIN=/work/bin/partner-server-idem-lock \
#     NAME=fz_lead SP=18510 FREEZES="3 3 3 3 3" ./attack12_freeze.sh
set -uo pipefail
. "$(dirname "$0")/lib.sh"
NAME=${NAME:-fz}; SP=${SP:-18510}
export DB_PREFIX=pp_attack12_
DB=${DB_PREFIX}$NAME
psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -qc "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1
export PARTNER_TOKEN_PEPPER="attack12-$(date +%s%N)"
PARTNER_RATE_LIMIT=1000000/60s PARTNER_PUBLIC_RATE=1000000 RUST_LOG=${RUST_LOG:-warn} start_server "$NAME" "$SP" || exit 1
start_receiver "$NAME" $((SP+5))
trap 'kill $SERVER_PID 2>/dev/null; stop_receiver; wait 2>/dev/null' EXIT
for id in $(P "$BASE/api/v1/webhook-endpoints" | jq -r '.data[].id'); do P -X DELETE "$BASE/api/v1/webhook-endpoints/$id" >/dev/null; done
P -X POST "$BASE/api/v1/webhook-endpoints" -d "{\"url\":\"https://127.0.0.1:$((SP+5))/a12\",\"events\":[\"lead.created\"],\"secret\":true}" | jq -c '.data | {id,url}'
echo "== $NAME: $BIN, FREEZES=${FREEZES:-3}, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%H:%M:%S)"
BASE=$BASE TOKEN=$TOKEN ITOKEN=$ITOKEN PGDATA=$PGDATA PG_PORT=$PG_PORT DB=$DB RECV_LOG=$RECV_LOG TAG=$NAME \
  IDEM=1 RETRY_NOW=1 python3 -u "$ATTACK_DIR/a10_freeze.py"; rc=$?
echo "== log: $(grep -ci panic "$SERVER_LOG") panics, $(grep -c '"status":500' "$SERVER_LOG") 500s, $(grep -c 'could not commit an idempotent' "$SERVER_LOG") 'could not commit an idempotent request'; load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%H:%M:%S)"
exit $rc
