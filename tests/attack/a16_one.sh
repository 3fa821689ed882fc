#!/usr/bin/env bash
# attack16: one binary's run of a16_backlog.py (see there), as n9e_many.sh runs n9e_many.py.
# Env: PARTNER_BIN, A16_NAME, A16_PORT (server; +1 metrics, +5 receiver), A16_PROXY (pgproxy.py's
# port), DELAY (the LISTEN connection's answers held DELAY s by pgproxy.py, so announcements are
# late and the row check is the only guard; 0: relayed, not held), NOPROXY=1 (PostgreSQL direct:
# announcements on time), RECV=close HOLD=s (slowtls.py: a new connection per attempt, its TLS
# handshake held HOLD s), and a16_backlog.py's K ROUNDS N CHANGES GAP DRAIN FLOW PAUSE.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
NAME=$A16_NAME SP=$A16_PORT PP=$A16_PROXY
DB=${DB_PREFIX:-attack_}$NAME
FREEZE=$ATTACK_DIR/out/$NAME.freeze; : >"$FREEZE"
dropdb -h 127.0.0.1 -U postgres --if-exists "$DB"
PROXY=""
if [ "${NOPROXY:-0}" = 1 ]; then
  SRV_PG=5432
else
  python3 "$ATTACK_DIR/pgproxy.py" "$PP" "$FREEZE" & PROXY=$!
  for _ in $(seq 1 50); do (exec 3<>/dev/tcp/127.0.0.1/"$PP") 2>/dev/null && break; sleep 0.2; done
  SRV_PG=$PP
fi
PG_PORT=$SRV_PG PARTNER_RATE_LIMIT=100000/60s start_server "$NAME" "$SP" || { kill $PROXY 2>/dev/null; exit 1; }
if [ "${RECV:-keep}" = close ]; then  # slowtls.py: every attempt a new connection, its handshake held HOLD s
  RECV_LOG=$ATTACK_DIR/out/$NAME.recv.jsonl; RECV_MODE=$ATTACK_DIR/out/$NAME.mode; : >"$RECV_LOG"
  python3 "$ATTACK_DIR/slowtls.py" --port $((SP+5)) --log "$RECV_LOG" --hold "${HOLD:-0}" & RECV_PID=$!
  sleep 0.5
else  # receiver.py (answers in one write, TCP_NODELAY: a fast receiver since attack16)
  RECV_LOG=$ATTACK_DIR/out/$NAME.recv.jsonl; RECV_MODE=$ATTACK_DIR/out/$NAME.mode; : >"$RECV_LOG"; echo 200 >"$RECV_MODE"
  python3 "$ATTACK_DIR/${RECV_PY:-receiver.py}" --port $((SP+5)) --log "$RECV_LOG" --mode-file "$RECV_MODE" & RECV_PID=$!
  sleep 0.5
fi
trap 'stop_server; stop_receiver; [ -n "$PROXY" ] && kill $PROXY 2>/dev/null; wait 2>/dev/null' EXIT
for id in $(P "$BASE/api/v1/webhook-endpoints" | jq -r '.data[].id'); do P -X DELETE "$BASE/api/v1/webhook-endpoints/$id" >/dev/null; done
if [ -n "$PROXY" ]; then
  psql -h 127.0.0.1 -U postgres -d "$DB" -Atc "select client_port from pg_stat_activity where datname='$DB' and query ilike 'listen%'" \
    | sed "s/\$/:delay${DELAY:-0}/" >"$FREEZE"
fi
echo "== $NAME ($PARTNER_BIN): load $(cut -d' ' -f1-3 /proc/loadavg); proxy=${PROXY:+yes} LISTEN held ${DELAY:-0}s (ports: $(tr '\n' ' ' <"$FREEZE"))"
BASE=$BASE TOKEN=$TOKEN ITOKEN=$ITOKEN RECV_LOG=$RECV_LOG RECV_MODE=$RECV_MODE RECV_PORT=$((SP+5)) DB=$DB \
  python3 -u "$ATTACK_DIR/a16_backlog.py"
echo "   log: $(grep -c 'changed unannounced' "$SERVER_LOG") 'changed unannounced', $(grep -c 'row failed' "$SERVER_LOG") check failures, $(grep -c 'too late to vouch' "$SERVER_LOG") 'too late to vouch', $(grep -c '"level":"ERROR"' "$SERVER_LOG") errors; $(wc -l <"$RECV_LOG") received; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "   metrics: $(curl -s "$METRICS" | grep -E '^webhook_(sends_vouched_total|checks_late_total|check_reads_total|attempts_total|claims_total)' | tr '\n' ' ')"
stop_server; stop_receiver; [ -n "$PROXY" ] && { kill $PROXY; wait $PROXY 2>/dev/null; }
sleep 1; dropdb -h 127.0.0.1 -U postgres --if-exists "$DB" || echo "   (db busy)"
