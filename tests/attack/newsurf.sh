#!/usr/bin/env bash
# New surfaces (portal sessions, Idempotency-Key, events-feed cursors) probed as an attacker.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
dropdb -h 127.0.0.1 -U postgres --if-exists attack_newsurf
PARTNER_RATE_LIMIT=100000/60s start_server newsurf 18680 || exit 1
trap stop_server EXIT
BASE=$BASE TOKEN=$TOKEN ITOKEN=$ITOKEN python3 -u "$ATTACK_DIR/newsurf.py"
