#!/usr/bin/env bash
# S-07 by delivery (see s07_gone.py).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
PARTNER_RATE_LIMIT=100000/60s start_server s07g 18550 || exit 1
start_receiver s07g 18555
trap 'stop_server; stop_receiver' EXIT
BASE=$BASE TOKEN=$TOKEN ITOKEN=$ITOKEN RECV_PORT=18555 python3 "$ATTACK_DIR/s07_gone.py"
