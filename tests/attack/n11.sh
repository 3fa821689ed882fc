#!/usr/bin/env bash
# N11 re-try (see n11.py): 403s decided by the caller (portal scope, DNA requirement), rights
# changed while a token is in the seen cache, on every partner read path; with Redis (db
# REDIS_DB, default 13) and a second instance on the same database (BASE2).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
REDIS_DB=${REDIS_DB:-13}
redis-cli -n "$REDIS_DB" --scan | xargs -r redis-cli -n "$REDIS_DB" del >/dev/null
export PARTNER_REDIS_URL=redis://127.0.0.1:6379/$REDIS_DB
export PARTNER_TOKEN_PEPPER="attack-n11-pepper-$(date +%s%N)"
dropdb -h 127.0.0.1 -U postgres --if-exists attack_n11
P1=${N11_PORT:-18760}
PARTNER_RATE_LIMIT=3/60s RUST_LOG=warn start_server n11 "$P1" || exit 1
FIRST_PID=$SERVER_PID
env DATABASE_URL="postgres://postgres@127.0.0.1:5432/attack_n11" PARTNER_BIND=127.0.0.1:$((P1+2)) \
    PARTNER_METRICS_BIND=127.0.0.1:$((P1+3)) PARTNER_RATE_LIMIT=3/60s RUST_LOG=warn \
    PARTNER_INTERNAL_TOKEN="$ITOKEN" "$BIN" serve --no-migrate --role api >"$ATTACK_DIR/out/n11b.server.log" 2>&1 &
SECOND_PID=$!
trap 'kill $FIRST_PID $SECOND_PID 2>/dev/null; wait 2>/dev/null; redis-cli -n "$REDIS_DB" --scan | xargs -r redis-cli -n "$REDIS_DB" del >/dev/null' EXIT
for _ in $(seq 1 100); do curl -sf http://127.0.0.1:$((P1+2))/healthz >/dev/null && break; sleep 0.2; done
BASE=$BASE BASE2=http://127.0.0.1:$((P1+2)) TOKEN=$TOKEN ITOKEN=$ITOKEN DB=attack_n11 python3 -u "$ATTACK_DIR/n11.py"
