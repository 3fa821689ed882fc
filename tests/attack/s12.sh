#!/usr/bin/env bash
# S-12: the public limiter under a flood from one address; X-Forwarded-For spoofing; partner
# reads meanwhile. In-process, then through Redis (db REDIS_DB, default 11: only its keys deleted).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
REDIS_DB=${REDIS_DB:-11}
RATE=${RATE:-50}
export PARTNER_PUBLIC_RATE=$RATE PARTNER_RATE_LIMIT=1000000/60s RUST_LOG=${RUST_LOG:-warn}
run() {  # run NAME PORT MODE [redis]
  if [ "${4:-}" = redis ]; then
    redis-cli -n "$REDIS_DB" --scan | xargs -r redis-cli -n "$REDIS_DB" del >/dev/null
    export PARTNER_REDIS_URL="redis://127.0.0.1:6379/$REDIS_DB"; echo "-- through Redis db $REDIS_DB"
  else unset PARTNER_REDIS_URL; fi
  start_server "$1" "$2" || return 1
  PORT=$2 TOKEN=$TOKEN RATE=$RATE MODE=$3 TRUSTED=${PARTNER_TRUSTED_PROXIES:-} python3 -u "$ATTACK_DIR/s12.py"
  stop_server
}
run s12 18650 untrusted
run s12r 18660 untrusted redis
PARTNER_TRUSTED_PROXIES=127.0.0.20,10.0.0.0/8 run s12t 18670 trusted
