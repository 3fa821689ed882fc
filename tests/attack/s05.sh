#!/usr/bin/env bash
# S-05: concurrent PATCHes of one endpoint (see s05.py). TRIALS=25 by default.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
PARTNER_RATE_LIMIT=${PARTNER_RATE_LIMIT:-100000/60s} PARTNER_WEBHOOK_RETRY_SCHEDULE=${PARTNER_WEBHOOK_RETRY_SCHEDULE:-30s} start_server s05 18470 || exit 1
start_receiver s05 18475
trap 'stop_server; stop_receiver' EXIT
BASE=$BASE TOKEN=$TOKEN ITOKEN=$ITOKEN RECV_LOG=$RECV_LOG RECV_PORT=18475 python3 "$ATTACK_DIR/s05.py"
