#!/usr/bin/env bash
# N12 re-try (attack6): every PostgreSQL connection of instance A (demo: API + worker) silently
# frozen by pgproxy.py (no FIN/RST; the proxy's kernel keeps acknowledging, so only the
# server's own bound on a pooled use, PARTNER_DB_HOLD_TIMEOUT, can see it; new connections pass).
# B (`serve --role api`, direct) ingests a lead every 0.2 s. n12_freeze.py measures, after the
# freeze: the gap in deliveries, A's /readyz and a partner read through A (status, latency),
# then freezes again and sends A SIGTERM, timing its exit.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
NAME=${N12_NAME:-n12}; SP=${N12_PORT:-18900}; PP=${N12_PROXY:-15493}
DB=${DB_PREFIX:-attack_}$NAME
FREEZE=$ATTACK_DIR/out/$NAME.freeze; : >"$FREEZE"
dropdb -h 127.0.0.1 -U postgres --if-exists "$DB"
python3 "$ATTACK_DIR/pgproxy.py" "$PP" "$FREEZE" & PROXY=$!
for _ in $(seq 1 50); do (exec 3<>/dev/tcp/127.0.0.1/"$PP") 2>/dev/null && break; sleep 0.2; done
export PARTNER_TOKEN_PEPPER="attack-n12-pepper-$(date +%s%N)" PARTNER_DB_POOL_SIZE=${PARTNER_DB_POOL_SIZE:-6}
PG_PORT=$PP PARTNER_RATE_LIMIT=100000/60s start_server "$NAME" "$SP" || { kill $PROXY; exit 1; }
A_PID=$SERVER_PID
env DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB" PARTNER_BIND=127.0.0.1:$((SP+2)) \
    PARTNER_METRICS_BIND=127.0.0.1:$((SP+3)) PARTNER_RATE_LIMIT=100000/60s RUST_LOG=warn \
    PARTNER_WEBHOOK_ALLOW_PRIVATE=true PARTNER_WEBHOOK_CA_FILE="$ATTACK_DIR/certs/ca.pem" \
    PARTNER_INTERNAL_TOKEN="$ITOKEN" "$BIN" serve --no-migrate --role api >"$ATTACK_DIR/out/${NAME}b.server.log" 2>&1 &
B_PID=$!
start_receiver "$NAME" $((SP+5))
trap 'kill $A_PID $B_PID $PROXY 2>/dev/null; stop_receiver; wait 2>/dev/null' EXIT
for _ in $(seq 1 100); do curl -sf http://127.0.0.1:$((SP+2))/healthz >/dev/null && break; sleep 0.2; done
for id in $(P "$BASE/api/v1/webhook-endpoints" | jq -r '.data[].id'); do P -X DELETE "$BASE/api/v1/webhook-endpoints/$id" >/dev/null; done
echo "== $NAME: hold timeout ${PARTNER_DB_HOLD_TIMEOUT:-default}, pool ${PARTNER_DB_POOL_SIZE}, load $(cut -d' ' -f1-3 /proc/loadavg)"
A_BASE=$BASE BASE=http://127.0.0.1:$((SP+2)) TOKEN=$TOKEN ITOKEN=$ITOKEN RECV_LOG=$RECV_LOG RECV_MODE=$RECV_MODE \
  RECV_PORT=$((SP+5)) DB=$DB FREEZE=$FREEZE A_PID=$A_PID python3 -u "$ATTACK_DIR/n12_freeze.py"
echo "   A's log: $(grep -c 'closing it' "$SERVER_LOG") held connections closed, $(grep -c 'claiming webhook deliveries failed' "$SERVER_LOG") failed claims, $(grep -c "row failed" "$SERVER_LOG") failed checks, $(grep -c 'too late to vouch' "$SERVER_LOG") 'too late to vouch', $(grep -c 'echoes no probe' "$SERVER_LOG") 'echoes no probe'; load $(cut -d' ' -f1-3 /proc/loadavg)"
kill -9 $A_PID 2>/dev/null; kill $B_PID 2>/dev/null; wait $A_PID $B_PID 2>/dev/null; kill $PROXY; wait $PROXY 2>/dev/null; stop_receiver; trap - EXIT
sleep 1; dropdb -h 127.0.0.1 -U postgres --if-exists "$DB" || echo "   (db busy)"
