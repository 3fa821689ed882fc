#!/usr/bin/env bash
# N11b re-try (see n11b.py): tokens seen by the process that stop authenticating (revoked,
# rotated, expired, user deleted, partner deactivated, portal session of a rotated minter), two
# instances on one database and one Redis (db REDIS_DB, default 14), tuple counters of every table.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
REDIS_DB=${REDIS_DB:-14}
redis-cli -n "$REDIS_DB" --scan | xargs -r redis-cli -n "$REDIS_DB" del >/dev/null
export PARTNER_REDIS_URL=redis://127.0.0.1:6379/$REDIS_DB
export PARTNER_TOKEN_PEPPER="attack-n11b-pepper-$(date +%s%N)"
NAME=${N11B_NAME:-n11b}
dropdb -h 127.0.0.1 -U postgres --if-exists "attack_$NAME"
P1=${N11B_PORT:-18860}
PARTNER_RATE_LIMIT=${RATE:-100000/60s} RUST_LOG=warn start_server "$NAME" "$P1" || exit 1
FIRST_PID=$SERVER_PID
env DATABASE_URL="postgres://postgres@127.0.0.1:5432/attack_$NAME" PARTNER_BIND=127.0.0.1:$((P1+2)) \
    PARTNER_METRICS_BIND=127.0.0.1:$((P1+3)) PARTNER_RATE_LIMIT=${RATE:-100000/60s} RUST_LOG=warn \
    PARTNER_INTERNAL_TOKEN="$ITOKEN" "$BIN" serve --no-migrate --role api >"$ATTACK_DIR/out/${NAME}2.server.log" 2>&1 &
SECOND_PID=$!
trap 'kill $FIRST_PID $SECOND_PID 2>/dev/null; wait 2>/dev/null; redis-cli -n "$REDIS_DB" --scan | xargs -r redis-cli -n "$REDIS_DB" del >/dev/null' EXIT
for _ in $(seq 1 100); do curl -sf http://127.0.0.1:$((P1+2))/healthz >/dev/null && break; sleep 0.2; done
BASE=$BASE BASE2=http://127.0.0.1:$((P1+2)) TOKEN=$TOKEN ITOKEN=$ITOKEN DB=attack_$NAME python3 -u "$ATTACK_DIR/${N11B_PY:-n11b.py}"
