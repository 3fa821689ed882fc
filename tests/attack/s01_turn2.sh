#!/usr/bin/env bash
# N8 with Redis and two instances (same database, same Redis db REDIS_DB): the burst at the
# window's turn alternates between them (s01_turn.py with BASE2). KEYED=<key>: the burst replays
# one Idempotency-Key (POST /sub-accounts) and counts idempotency_keys tuples instead.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
REDIS_DB=${REDIS_DB:-14}
WINDOW=${WINDOW:-20}
redis-cli -n "$REDIS_DB" --scan | xargs -r redis-cli -n "$REDIS_DB" del >/dev/null
export PARTNER_REDIS_URL=redis://127.0.0.1:6379/$REDIS_DB
export PARTNER_TOKEN_PEPPER="attack-s01t2-pepper-$(date +%s%N)"  # both instances hash tokens alike
P1=${S01_PORT:-18720}; NAME=${S01_NAME:-s01t2}
PARTNER_RATE_LIMIT=3/${WINDOW}s RUST_LOG=warn start_server "$NAME" "$P1" || exit 1
FIRST_PID=$SERVER_PID
env DATABASE_URL="postgres://postgres@127.0.0.1:5432/attack_$NAME" PARTNER_BIND=127.0.0.1:$((P1+2)) \
    PARTNER_METRICS_BIND=127.0.0.1:$((P1+3)) PARTNER_RATE_LIMIT=3/${WINDOW}s RUST_LOG=warn \
    PARTNER_INTERNAL_TOKEN="$ITOKEN" "$BIN" serve --no-migrate --role api >"$ATTACK_DIR/out/${NAME}b.server.log" 2>&1 &
SECOND_PID=$!
trap 'kill $FIRST_PID $SECOND_PID 2>/dev/null; wait 2>/dev/null' EXIT
for _ in $(seq 1 100); do curl -sf http://127.0.0.1:$((P1+2))/healthz >/dev/null && break; sleep 0.2; done
echo "second instance pid $SECOND_PID on http://127.0.0.1:$((P1+2))"
echo "-- Redis db $REDIS_DB, two instances"
BASE=$BASE BASE2=http://127.0.0.1:$((P1+2)) TOKEN=$TOKEN DB=attack_$NAME WINDOW=$WINDOW python3 -u "$ATTACK_DIR/s01_turn.py"
redis-cli -n "$REDIS_DB" --scan | xargs -r redis-cli -n "$REDIS_DB" del >/dev/null
