#!/usr/bin/env bash
# N9e re-try (see n9e_many.py): many endpoints, concurrent changes, the LISTEN connection held
# DELAY s by pgproxy.py (DELAY=0: through the relay, nothing held: the control).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
NAME=${N9E_NAME:-n9e}; SP=${N9E_PORT:-18880}; PP=${N9E_PROXY:-15483}
FREEZE=$ATTACK_DIR/out/$NAME.freeze; : >"$FREEZE"
dropdb -h 127.0.0.1 -U postgres --if-exists "${DB_PREFIX:-attack_}$NAME"
python3 "$ATTACK_DIR/pgproxy.py" "$PP" "$FREEZE" & PROXY=$!
for _ in $(seq 1 50); do (exec 3<>/dev/tcp/127.0.0.1/"$PP") 2>/dev/null && break; sleep 0.2; done
SRV_PG=$PP
if [ -n "${LINK_DELAY:-}" ]; then  # attack13: the whole link slowed too (pgslow.py delayall, in front of pgproxy.py)
  echo "delayall $LINK_DELAY" >"$ATTACK_DIR/out/$NAME.ctl"; SRV_PG=$((PP-1))
  python3 "$ATTACK_DIR/pgslow.py" "$SRV_PG" "$ATTACK_DIR/out/$NAME.ctl" "$PP" & SLOW=$!
  for _ in $(seq 1 50); do (exec 3<>/dev/tcp/127.0.0.1/"$SRV_PG") 2>/dev/null && break; sleep 0.2; done
fi
PG_PORT=$SRV_PG PARTNER_RATE_LIMIT=100000/60s start_server "$NAME" "$SP" || { kill $PROXY ${SLOW:-}; exit 1; }
if [ "${RECV:-keep}" = close ]; then  # attack6: slowtls.py, HOLD s handshakes, one answer per connection
  RECV_LOG=$ATTACK_DIR/out/$NAME.recv.jsonl; RECV_MODE=$ATTACK_DIR/out/$NAME.mode; : >"$RECV_LOG"
  python3 "$ATTACK_DIR/slowtls.py" --port $((SP+5)) --log "$RECV_LOG" --hold "${HOLD:-0}" & RECV_PID=$!
  sleep 0.5
else
  start_receiver "$NAME" $((SP+5))
fi
trap 'stop_server; stop_receiver; kill $PROXY ${SLOW:-} 2>/dev/null; wait 2>/dev/null' EXIT
for id in $(P "$BASE/api/v1/webhook-endpoints" | jq -r '.data[].id'); do P -X DELETE "$BASE/api/v1/webhook-endpoints/$id" >/dev/null; done
DB=${DB_PREFIX:-attack_}$NAME
psql -h 127.0.0.1 -U postgres -d "$DB" -Atc "select client_port from pg_stat_activity where datname='$DB' and query ilike 'listen%'" \
  | sed "s/\$/:delay${DELAY:-0.5}/" >"$FREEZE"
echo "== $NAME: link=${LINK_DELAY:-direct} recv=${RECV:-keep} hold=${HOLD:-0} load $(cut -d' ' -f1-3 /proc/loadavg); LISTEN held ${DELAY:-0.5}s (ports: $(tr '\n' ' ' <"$FREEZE")), K=${K:-6} rounds=${ROUNDS:-4}"
BASE=$BASE TOKEN=$TOKEN ITOKEN=$ITOKEN RECV_LOG=$RECV_LOG RECV_MODE=$RECV_MODE RECV_PORT=$((SP+5)) \
  python3 -u "$ATTACK_DIR/${N9E_PY:-n9e_many.py}"  # attack13: N9E_PY=a13_race.py
echo "   log: $(grep -c 'changed unannounced' "$SERVER_LOG") 'changed unannounced', $(grep -c 'echoes no probe' "$SERVER_LOG") 'echoes no probe', $(grep -c "row failed" "$SERVER_LOG") check failures, $(grep -c 'too late to vouch' "$SERVER_LOG") 'too late to vouch'; $(wc -l <"$RECV_LOG") deliveries received; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "   metrics: $(curl -s "$METRICS" | grep -E '^webhook_(sends_vouched_total|checks_late_total)' | tr '\n' ' ')"  # attack13
stop_server; kill $PROXY ${SLOW:-}; wait $PROXY ${SLOW:-} 2>/dev/null
sleep 1; dropdb -h 127.0.0.1 -U postgres --if-exists "$DB" || echo "   (db busy)"
