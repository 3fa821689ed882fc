#!/usr/bin/env bash
# N10 variations (see n10_more.py).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
dropdb -h 127.0.0.1 -U postgres --if-exists attack_n10m
PARTNER_RATE_LIMIT=100000/60s RUST_LOG=warn start_server n10m 18700 || exit 1
trap stop_server EXIT
BASE=$BASE TOKEN=$TOKEN ITOKEN=$ITOKEN DB=attack_n10m python3 -u "$ATTACK_DIR/n10_more.py"
