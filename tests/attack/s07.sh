#!/usr/bin/env bash
# S-07 (see s07.py). TRIALS=30 by default.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
PARTNER_RATE_LIMIT=100000/60s PARTNER_WEBHOOK_RETRY_SCHEDULE=200ms start_server s07 18510 || exit 1
start_receiver s07 18515
echo 500 >"$RECV_MODE"
trap 'stop_server; stop_receiver' EXIT
BASE=$BASE TOKEN=$TOKEN ITOKEN=$ITOKEN RECV_PORT=18515 python3 "$ATTACK_DIR/s07.py"
