#!/usr/bin/env bash
# Runs bb.py's phases, each against its own partner-server process on one database
# (pp_bbapi_main, dropped and recreated first). One server at a time.
#   PARTNER_BIN (default /work/bin/partner-server-main), PORT (default 18500), PHASES, PACE
set -u
cd "$(dirname "$0")"
BIN=${PARTNER_BIN:-/work/bin/partner-server-main}
PORT=${PORT:-18500}
DB=${DB:-pp_bbapi_main}
PHASES=${PHASES:-"main rate careoff nopepper nointernal internalbind proxies webhooks faults sigterm startup"}
PACE=${PACE:-0}
PY=${PY:-/work/main/.ci/venv/bin/python}
OUT=${OUT:-out}
mkdir -p "$OUT"
PEPPER=bbapi-pepper-0123456789
ITOK=bbapi-internal-token-0123456789abcdef0123
export DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB"
if [[ " $PHASES " == *" main "* ]]; then
  dropdb -h 127.0.0.1 -U postgres --if-exists "$DB"
fi
SERVER=
stop() { [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null; SERVER=; }
trap stop EXIT
start() { # phase, then env assignments
  local phase=$1; shift
  env -u PARTNER_TOKEN_PEPPER -u PARTNER_INTERNAL_TOKEN PARTNER_BIND=127.0.0.1:$PORT \
      PARTNER_LOG_FORMAT=json RUST_LOG=${SERVER_RUST_LOG:-info} "$@" "$BIN" serve >"$OUT/server-$phase.log" 2>&1 &
  SERVER=$!
  for _ in $(seq 1 100); do
    curl -fs "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "server for $phase did not start"; cat "$OUT/server-$phase.log"; return 1
}
total=0
for phase in $PHASES; do
  case $phase in
    main) start main PARTNER_TOKEN_PEPPER=$PEPPER PARTNER_INTERNAL_TOKEN=$ITOK PARTNER_WEBHOOK_RETRY_SCHEDULE=50ms,50ms PARTNER_RATE_LIMIT=100000/60s PARTNER_PUBLIC_RATE=100000 PARTNER_METRICS_BIND=127.0.0.1:$((PORT + 6)) ;;
    rate) start rate PARTNER_TOKEN_PEPPER=$PEPPER PARTNER_INTERNAL_TOKEN=$ITOK PARTNER_RATE_LIMIT=4/60s PARTNER_PUBLIC_RATE=1 ;;
    careoff) start careoff PARTNER_TOKEN_PEPPER=$PEPPER PARTNER_INTERNAL_TOKEN=$ITOK CARE_SERVICES_API_ENABLED=false ;;
    nopepper) start nopepper PARTNER_INTERNAL_TOKEN=$ITOK ;;
    nointernal) start nointernal PARTNER_TOKEN_PEPPER=$PEPPER ;;
    webhooks) bash ../gen-certs.sh
      start webhooks PARTNER_TOKEN_PEPPER=$PEPPER PARTNER_INTERNAL_TOKEN=$ITOK PARTNER_WEBHOOK_ALLOW_PRIVATE=true \
        PARTNER_WEBHOOK_CA_FILE=../certs/ca.pem PARTNER_WEBHOOK_RETRY_SCHEDULE=50ms,50ms PARTNER_WEBHOOK_TIMEOUT=1s ;;
    faults)
      export BB_DBPROXY_CTL="$OUT/dbproxy.ctl"; echo up > "$BB_DBPROXY_CTL"
      python3 dbproxy.py $((PORT + 31)) 5432 "$BB_DBPROXY_CTL" & PROXY=$!
      sleep 0.3
      start faults DATABASE_URL="postgres://postgres@127.0.0.1:$((PORT + 31))/$DB" PARTNER_TOKEN_PEPPER=$PEPPER \
        PARTNER_INTERNAL_TOKEN=$ITOK ;;
    sigterm) start sigterm PARTNER_TOKEN_PEPPER=$PEPPER PARTNER_INTERNAL_TOKEN=$ITOK PARTNER_SHUTDOWN_DRAIN=2s
      export BB_SERVER_PID=$SERVER ;;
    proxies) start proxies PARTNER_TOKEN_PEPPER=$PEPPER PARTNER_INTERNAL_TOKEN=$ITOK PARTNER_PUBLIC_RATE=1 PARTNER_TRUSTED_PROXIES=127.0.0.1 ;;
    internalbind) start internalbind PARTNER_TOKEN_PEPPER=$PEPPER PARTNER_INTERNAL_TOKEN=$ITOK PARTNER_INTERNAL_BIND=127.0.0.1:$((PORT + 5)) ;;
    startup)
      # a malformed or too-short setting stops the process at start, naming the variable (operator-api; extensions §5)
      fails=0
      for kv in PARTNER_INTERNAL_TOKEN=short PARTNER_RATE_LIMIT=abc PARTNER_BIND=nonsense PARTNER_PUBLIC_RATE=0 \
                PARTNER_WEBHOOK_RETRY_SCHEDULE=10x PARTNER_EVENT_RETENTION=1d CARE_SERVICES_API_ENABLED=maybe \
                PARTNER_LOG_FORMAT=xml PARTNER_TRUSTED_PROXIES=notanip; do
        var=${kv%%=*}
        out=$(timeout 10 env PARTNER_BIND=127.0.0.1:$PORT PARTNER_TOKEN_PEPPER=$PEPPER PARTNER_INTERNAL_TOKEN=$ITOK "$kv" "$BIN" serve 2>&1)
        rc=$?
        if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "$var" <<<"$out"; then echo "  PASS $kv stops the process naming $var";
        else echo "  FAIL $kv: rc=$rc output: $(head -c 300 <<<"$out")"; fails=$((fails + 1)); fi
      done
      total=$((total + fails)); continue ;;
  esac || exit 1
  "$PY" bb.py --base "http://127.0.0.1:$PORT" --internal "$ITOK" --phase "$phase" --state "$OUT/state.json" \
      --pace "$PACE" --server-log "$OUT/server-$phase.log" --metrics "http://127.0.0.1:$((PORT + 6))/metrics" ${ONLY:+--only "$ONLY"} 2>&1 | tee "$OUT/$phase.txt"
  rc=${PIPESTATUS[0]}
  total=$((total + rc))
  stop
  if [ -n "${PROXY:-}" ]; then kill "$PROXY" 2>/dev/null; wait "$PROXY" 2>/dev/null; PROXY=; fi
done
echo "total failures: $total"
