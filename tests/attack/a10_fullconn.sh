#!/usr/bin/env bash
# attack10: a9_fullconn.sh with a10_full.py: max_connections filled by FILL pg_sleep sessions, SIGSTOP
# FREEZE s, another client (HOLD > 0) takes the freed slots until HOLD s after SIGCONT, then lets go.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
NAME=${NAME:-a10full}; SP=${SP:-18530}; FILL=${FILL:-100}
export DB_PREFIX=pp_attack10_
DB=${DB_PREFIX}$NAME
psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -qc "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1
export PARTNER_TOKEN_PEPPER="attack10-$(date +%s%N)"
PARTNER_RATE_LIMIT=1000000/60s PARTNER_PUBLIC_RATE=1000000 RUST_LOG=${RUST_LOG:-warn} start_server "$NAME" "$SP" || exit 1
start_receiver "$NAME" $((SP+5))
FILL_PIDS=()
trap 'kill $SERVER_PID "${FILL_PIDS[@]}" 2>/dev/null; stop_receiver; wait 2>/dev/null' EXIT
sleep 1
# warm the pools: 40 calls at once, so the server holds its connections before the slots go
W=(); for _ in $(seq 1 40); do curl -s -o /dev/null -H "Authorization: Bearer $TOKEN" "$BASE/api/v1/leads?limit=5" & W+=($!); done; wait "${W[@]}"
echo "== server backends before filling: $(psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -Atc "select count(*) from pg_stat_activity where datname='$DB'")"
for _ in $(seq 1 "$FILL"); do psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -qAtc "select pg_sleep(${FILL_SECS:-100})" >/dev/null 2>&1 & FILL_PIDS+=($!); done
sleep 3
GRABBER=""; GRAB=""  # the grabber is a10_full.py's own (HOLD)
if [ -n "${GRAB:-}" ]; then  # another client that takes any slot that frees up
  ( trap 'kill $(jobs -p) 2>/dev/null; exit' TERM; while :; do psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -qAtc "select pg_sleep(${FILL_SECS:-100})" >/dev/null 2>&1 & sleep 0.05; done ) & GRABBER=$!
fi
echo "== $NAME: $BIN, load $(cut -d" " -f1-3 /proc/loadavg)"
BASE=$BASE TOKEN=$TOKEN ITOKEN=$ITOKEN PGDATA=$PGDATA PG_PORT=$PG_PORT DB=$DB RECV_LOG=$RECV_LOG TAG=$NAME \
  EMAILS_OUT=$ATTACK_DIR/out/$NAME.emails FREEZE=${FREEZE:-3} HOLD=${HOLD:-5} python3 -u "$ATTACK_DIR/a10_full.py"; rc=$?
[ -n "$GRABBER" ] && { kill $GRABBER; wait $GRABBER 2>/dev/null; }
kill "${FILL_PIDS[@]}" 2>/dev/null; wait "${FILL_PIDS[@]}" 2>/dev/null; FILL_PIDS=()
# the fillers' backends sleep on after their psql is gone: end them before counting
for _ in $(seq 1 30); do
  c=$(psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -Atc "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query LIKE 'select pg_sleep%'" 2>/dev/null) && [ "$c" = 0 ] && break
  sleep 1
done
n201=$(grep -c @ "$ATTACK_DIR/out/$NAME.emails"); indb=$(psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d "$DB" -Atc "SELECT email FROM leads WHERE email LIKE '$NAME-%'" | sort | comm -13 - <(sort "$ATTACK_DIR/out/$NAME.emails") | grep -c @)
echo "== writes re-checked after the slots were freed: $n201 answered 201, missing from the database: $indb"
curl -s "$METRICS" | grep -E '^db_unreachable_total|^db_probe_duration_seconds_count'
echo "== log: $(grep -c 'marked unreachable' "$SERVER_LOG") 'marked unreachable', $(grep -ci 'too many' "$SERVER_LOG") 'too many', $(grep -c '"status":500' "$SERVER_LOG") 500s; load $(cut -d' ' -f1-3 /proc/loadavg)"
exit $rc
