#!/usr/bin/env bash
# N8 variation (see n8_refund.py): requests refused AFTER their read (portal scope 403, revoked
# token 401) get their unit back; do they read partner data, unbudgeted?
set -uo pipefail
. "$(dirname "$0")/lib.sh"
dropdb -h 127.0.0.1 -U postgres --if-exists attack_n8r
PARTNER_RATE_LIMIT=3/60s RUST_LOG=warn start_server n8r 18690 || exit 1
trap stop_server EXIT
BASE=$BASE TOKEN=$TOKEN ITOKEN=$ITOKEN DB=attack_n8r READ_PATH=${READ_PATH:-} TABLE=${TABLE:-leads} python3 -u "$ATTACK_DIR/n8_refund.py"
