#!/usr/bin/env bash
# N9c re-try (see n9c_tls.py): a hostile old URL holding its TLS handshakes HOLD s.
# attack6: drops its database before and after; prints the worker's check warnings.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
NAME=${N9C_NAME:-n9c}; SP=${N9C_PORT:-18840}
dropdb -h 127.0.0.1 -U postgres --if-exists "${DB_PREFIX:-attack_}$NAME"
PARTNER_RATE_LIMIT=100000/60s start_server "$NAME" "$SP" || exit 1
start_receiver "$NAME" $((SP+5))
OLD_LOG=$ATTACK_DIR/out/$NAME.old.jsonl; : >"$OLD_LOG"
python3 "$ATTACK_DIR/slowtls.py" --port $((SP+6)) --log "$OLD_LOG" --hold "${HOLD:-3}" & OLD_PID=$!
trap 'stop_server; stop_receiver; kill $OLD_PID 2>/dev/null' EXIT
sleep 0.5
echo "== $NAME HOLD=${HOLD:-3} LEAD=${LEAD:-1.0} jitter=${LEAD_JITTER:-0} slack=${SLACK:-0.05} load: $(cut -d' ' -f1-3 /proc/loadavg)"
BASE=$BASE TOKEN=$TOKEN ITOKEN=$ITOKEN RECV_LOG=$RECV_LOG RECV_PORT=$((SP+5)) NEW_PORT=$((SP+5)) \
  OLD_PORT=$((SP+6)) OLD_LOG=$OLD_LOG python3 -u "$ATTACK_DIR/n9c_tls.py"
echo "   log: $(grep -c 'changed unannounced' "$SERVER_LOG") 'changed unannounced', $(grep -c 'too late to vouch' "$SERVER_LOG") 'too late to vouch', $(grep -c "row failed" "$SERVER_LOG") check failures; load: $(cut -d' ' -f1-3 /proc/loadavg)"
stop_server; stop_receiver; kill $OLD_PID 2>/dev/null; trap - EXIT
sleep 1; dropdb -h 127.0.0.1 -U postgres --if-exists "${DB_PREFIX:-attack_}$NAME" || echo "   (db busy)"
