#!/usr/bin/env bash
# S-03 (see s03.py).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
PARTNER_RATE_LIMIT=100000/60s PARTNER_WEBHOOK_RETRY_SCHEDULE=200ms PARTNER_WEBHOOK_TIMEOUT=2s start_server s03 18520 || exit 1
start_receiver s03 18525
trap 'stop_server; stop_receiver' EXIT
BASE=$BASE TOKEN=$TOKEN ITOKEN=$ITOKEN RECV_LOG=$RECV_LOG RECV_MODE=$RECV_MODE RECV_PORT=18525 \
  DB=postgresql://postgres@127.0.0.1:5432/attack_s03 python3 "$ATTACK_DIR/s03.py"
