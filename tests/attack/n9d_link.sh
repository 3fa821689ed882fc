#!/usr/bin/env bash
# N9d re-try: the endpoint-row check's answer is as old as the link it comes through. Two
# instances on one database: A (demo: API + webhook worker) reaches PostgreSQL through
# pgslow.py, which slows its WHOLE link (every connection: claims, checks, LISTEN) by LINK_DELAY
# s from the server; B (`serve --role api`, no worker) is direct and takes the partner's changes
# (s05_inflight.py with BASE=B: rotation, rotation+expirePrevious, move, disable, 16 deliveries
# each to a receiver answering in 1.5 s; N9D_PY=n9e_many.py: many endpoints instead). STORM=1: just before each change the relay resets every
# connection of A for STORM_FOR s (every read fails: nothing may be sent meanwhile). STORM_MODE=freeze:
# instead every connection of A stops forwarding, open (a silent death of the whole link).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
NAME=${N9D_NAME:-n9d}; SP=${N9D_PORT:-18860}; PP=${N9D_PROXY:-15463}
CTL=$ATTACK_DIR/out/$NAME.ctl; echo pass >"$CTL"
dropdb -h 127.0.0.1 -U postgres --if-exists "${DB_PREFIX:-attack_}$NAME"
python3 "$ATTACK_DIR/pgslow.py" "$PP" "$CTL" & PROXY=$!
for _ in $(seq 1 50); do (exec 3<>/dev/tcp/127.0.0.1/"$PP") 2>/dev/null && break; sleep 0.2; done
export PARTNER_TOKEN_PEPPER="attack-n9d-pepper-$(date +%s%N)"
PG_PORT=$PP PARTNER_RATE_LIMIT=100000/60s start_server "$NAME" "$SP" || { kill $PROXY; exit 1; }
A_PID=$SERVER_PID; A_BASE=$BASE
env DATABASE_URL="postgres://postgres@127.0.0.1:5432/${DB_PREFIX:-attack_}$NAME" PARTNER_BIND=127.0.0.1:$((SP+2)) \
    PARTNER_METRICS_BIND=127.0.0.1:$((SP+3)) PARTNER_RATE_LIMIT=100000/60s RUST_LOG=warn PARTNER_DB_POOL_SIZE=${B_POOL:-${PARTNER_DB_POOL_SIZE:-16}} \
    PARTNER_WEBHOOK_ALLOW_PRIVATE=true PARTNER_WEBHOOK_CA_FILE="$ATTACK_DIR/certs/ca.pem" \
    PARTNER_INTERNAL_TOKEN="$ITOKEN" "$BIN" serve --no-migrate --role api >"$ATTACK_DIR/out/${NAME}b.server.log" 2>&1 &
B_PID=$!
start_receiver "$NAME" $((SP+5))
trap 'kill $A_PID $B_PID $PROXY 2>/dev/null; stop_receiver; wait 2>/dev/null' EXIT
for _ in $(seq 1 100); do curl -sf http://127.0.0.1:$((SP+2))/healthz >/dev/null && break; sleep 0.2; done
for id in $(P "$BASE/api/v1/webhook-endpoints" | jq -r '.data[].id'); do P -X DELETE "$BASE/api/v1/webhook-endpoints/$id" >/dev/null; done
echo "${LINK_MODE:-delay} ${LINK_DELAY:-0.3}" >"$CTL"  # LINK_MODE=delayall (attack6): new connections slowed too
echo "== $NAME: A's whole link delay ${LINK_DELAY:-0.3}s, changes through B, storm=${STORM:-0} ${STORM_MODE:-} load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "${STORM:-0}" = 1 ]; then
  : >"$ATTACK_DIR/out/$NAME.storms"
  export BEFORE_PATCH="date +%s.%N >>'$ATTACK_DIR/out/$NAME.storms'; echo ${STORM_MODE:-storm} >'$CTL'; (sleep ${STORM_FOR:-2}; echo 'delay ${LINK_DELAY:-0.3}' >'$CTL') &"
  export BLACKHOLE_LEAD=${BLACKHOLE_LEAD:-0.3}
fi
BASE=http://127.0.0.1:$((SP+2)) TOKEN=$TOKEN ITOKEN=$ITOKEN RECV_LOG=$RECV_LOG RECV_MODE=$RECV_MODE \
  RECV_PORT=$((SP+5)) DB=${DB_PREFIX:-attack_}$NAME python3 -u "$ATTACK_DIR/${N9D_PY:-s05_inflight.py}"
if [ "${STORM:-0}" = 1 ]; then  # deliveries that arrived while every read of A failed
  python3 - "$RECV_LOG" "$ATTACK_DIR/out/$NAME.storms" "${STORM_FOR:-2}" <<'PY'
import json, sys
storms = [float(x) for x in open(sys.argv[2]).read().split()]
recs = [json.loads(l) for l in open(sys.argv[1])]
n = [sum(1 for r in recs if s + 0.1 < r["t"] < s + float(sys.argv[3])) for s in storms]
print(f"   storm: deliveries arriving 0.1-{sys.argv[3]}s into each storm (every read failing): {n}")
PY
fi
echo "   A's log: $(grep -c 'changed unannounced' "$SERVER_LOG") 'changed unannounced', $(grep -c "checking a webhook endpoint's row failed" "$SERVER_LOG") check failures, $(grep -c 'too late to vouch' "$SERVER_LOG") 'too late to vouch', $(grep -c 'webhook attempt failed' "$SERVER_LOG") failed attempts, $(grep -c 'closing it' "$SERVER_LOG") held connections closed; $(wc -l <"$RECV_LOG") deliveries received in all (of 64 ingested for s05_inflight); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "   A's metrics: $(curl -s "$METRICS" | grep -E '^webhook_(sends_vouched_total|checks_late_total)' | tr '\n' ' ')"  # attack13
kill $A_PID $B_PID; wait $A_PID $B_PID 2>/dev/null; kill $PROXY; wait $PROXY 2>/dev/null
sleep 1; dropdb -h 127.0.0.1 -U postgres --if-exists "${DB_PREFIX:-attack_}$NAME" || echo "   (db busy)"
