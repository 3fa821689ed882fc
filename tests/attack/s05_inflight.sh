#!/usr/bin/env bash
# S-05 in flight (see s05_inflight.py).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
PARTNER_RATE_LIMIT=100000/60s start_server s05i 18540 || exit 1
start_receiver s05i 18545
trap 'stop_server; stop_receiver' EXIT
for id in $(P "$BASE/api/v1/webhook-endpoints" | jq -r '.data[].id'); do P -X DELETE "$BASE/api/v1/webhook-endpoints/$id" >/dev/null; done
BASE=$BASE TOKEN=$TOKEN ITOKEN=$ITOKEN RECV_LOG=$RECV_LOG RECV_MODE=$RECV_MODE RECV_PORT=18545 python3 "$ATTACK_DIR/s05_inflight.py"
