#!/usr/bin/env bash
# S-05 in flight (see s05_inflight.py).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
NAME=${S05_NAME:-s05i}; SP=${S05_PORT:-18540}
PARTNER_RATE_LIMIT=100000/60s start_server "$NAME" "$SP" || exit 1
start_receiver "$NAME" $((SP+5))
trap 'stop_server; stop_receiver' EXIT
for id in $(P "$BASE/api/v1/webhook-endpoints" | jq -r '.data[].id'); do P -X DELETE "$BASE/api/v1/webhook-endpoints/$id" >/dev/null; done
BASE=$BASE TOKEN=$TOKEN ITOKEN=$ITOKEN RECV_LOG=$RECV_LOG RECV_MODE=$RECV_MODE RECV_PORT=$((SP+5)) DB=${DB_PREFIX:-attack_}$NAME python3 "$ATTACK_DIR/s05_inflight.py"
