#!/usr/bin/env bash
# S-05: concurrent PATCHes of one endpoint (see s05.py). TRIALS=25 by default.
# S05_PORT (attack6): the server's port (receiver on +5), default 18470.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
SP=${S05_PORT:-18470}; NAME=${S05_NAME:-s05}
dropdb -h 127.0.0.1 -U postgres --if-exists "${DB_PREFIX:-attack_}$NAME" 2>/dev/null
PARTNER_RATE_LIMIT=${PARTNER_RATE_LIMIT:-100000/60s} PARTNER_WEBHOOK_RETRY_SCHEDULE=${PARTNER_WEBHOOK_RETRY_SCHEDULE:-30s} start_server "$NAME" "$SP" || exit 1
start_receiver "$NAME" $((SP+5))
trap 'stop_server; stop_receiver' EXIT
BASE=$BASE TOKEN=$TOKEN ITOKEN=$ITOKEN RECV_LOG=$RECV_LOG RECV_PORT=$((SP+5)) python3 "$ATTACK_DIR/s05.py"
stop_server; stop_receiver; trap - EXIT
sleep 1; dropdb -h 127.0.0.1 -U postgres --if-exists "${DB_PREFIX:-attack_}$NAME" || echo "   (db busy)"
