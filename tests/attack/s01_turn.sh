#!/usr/bin/env bash
# S-01 at the window's turn (see s01_turn.py); in-process limiter, then Redis (db REDIS_DB).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
REDIS_DB=${REDIS_DB:-11}
WINDOW=${WINDOW:-20}
unset PARTNER_REDIS_URL
PARTNER_RATE_LIMIT=3/${WINDOW}s RUST_LOG=warn start_server s01t 18640 || exit 1
echo "-- in-process"; BASE=$BASE TOKEN=$TOKEN DB=attack_s01t WINDOW=$WINDOW python3 -u "$ATTACK_DIR/s01_turn.py"
stop_server
redis-cli -n "$REDIS_DB" --scan | xargs -r redis-cli -n "$REDIS_DB" del >/dev/null
PARTNER_REDIS_URL=redis://127.0.0.1:6379/$REDIS_DB PARTNER_RATE_LIMIT=3/${WINDOW}s RUST_LOG=warn start_server s01tr 18645 || exit 1
echo "-- Redis db $REDIS_DB"; BASE=$BASE TOKEN=$TOKEN DB=attack_s01tr WINDOW=$WINDOW python3 -u "$ATTACK_DIR/s01_turn.py"
stop_server
