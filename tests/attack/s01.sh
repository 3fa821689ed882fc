#!/usr/bin/env bash
# S-01: over-budget GETs read no partner data (pg_stat_user_tables), in-process limiter and Redis.
# REDIS_DB (default 11) is a db number of our own on the shared Redis; only its keys are deleted.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
REDIS_DB=${REDIS_DB:-11}
run() {  # run LABEL NAME PORT [redis]
  local label=$1 name=$2 port=$3
  if [ "${4:-}" = redis ]; then
    redis-cli -n "$REDIS_DB" --scan | xargs -r redis-cli -n "$REDIS_DB" del >/dev/null
    export PARTNER_REDIS_URL="redis://127.0.0.1:6379/$REDIS_DB"
  else unset PARTNER_REDIS_URL; fi
  PARTNER_RATE_LIMIT=${LIMIT:-3}/3600s start_server "$name" "$port" || return 1
  BASE=$BASE TOKEN=$TOKEN DB=attack_$name LIMIT=${LIMIT:-3} BURST=${BURST:-30} LABEL=$label \
    python3 -u "$ATTACK_DIR/s01.py"
  stop_server
}
run in-process s01 18610
run redis s01r 18620 redis
