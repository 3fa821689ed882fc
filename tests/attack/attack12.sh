#!/usr/bin/env bash
# attack12: the advisory-lock claim of Idempotency-Key (lead 07b8110) against main (3d21eed).
# A PostgreSQL cluster of our own on PG_PORT (default 18540; initdb it first, see RESULTS.md),
# release binaries given as paths; ports PORT..PORT+5 (default 18500).
#   attack12.sh race  BIN_A BIN_B ROUNDS CLIENTS   # two instances (may be two binaries)
#   attack12.sh kill9 BIN [RUNS]                   # B SIGKILLed mid request, retry on A
#   attack12.sh pool  BIN POOL SECS THREADS        # DNS=1: the server resolves through a
#                                                  # blackholed name server (3 s a lookup)
#   attack12.sh sem   BIN                          # semantics, + a rate-limited third instance
set -uo pipefail
. "$(dirname "$0")/attack12_lib.sh"
MODE=$1; shift
PORT=${PORT:-18500}
NAME=${NAME:-$MODE}
export PG_PORT
trap 'a12_stop ${A_PID:-} ${B_PID:-} ${C_PID:-} ${DNS_PID:-}' EXIT
py() { BASE=$BASE BASE2=${BASE2:-$BASE} TOKEN=$TOKEN ITOKEN=$ITOKEN DB=$DB python3 -u "$ATTACK_DIR/attack12.py" "$@"; }
echo "== attack12 $MODE $* ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))"
case $MODE in
race)
  a12_start_a "$NAME" "$PORT" "$1" || exit 1
  a12_start_b "$NAME" $((PORT+2)) "$2" || exit 1
  py race "$3" "$4"; rc=$?
  ;;
kill9)
  BIN=$1; RUNS=${2:-1}
  if [ "${K9_MODE:-}" = dns ]; then
    printf 'nameserver 127.0.0.2\noptions timeout:5 attempts:1\n' >"$ATTACK_DIR/out/a12_resolv.conf"
    python3 -c 'import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.2", 53))
while True: s.recvfrom(2048)' &
    DNS_PID=$!
    export NS_RESOLV="$ATTACK_DIR/out/a12_resolv.conf" PARTNER_WEBHOOK_ALLOW_PRIVATE=false K9_MODE
  fi
  a12_start_a "$NAME" "$PORT" "$BIN" || exit 1
  rc=0
  for i in $(seq 1 "$RUNS"); do
    a12_start_b "$NAME" $((PORT+2)) "$BIN" || exit 1
    py kill9 "$B_PID" || rc=1
    wait "$B_PID" 2>/dev/null; B_PID=
  done
  ;;
dns1|pool)
  BIN=$1; [ "$MODE" = pool ] && export PARTNER_DB_POOL_SIZE=$2
  [ "$MODE" = dns1 ] && DNS=1
  if [ "${DNS:-0}" = 1 ]; then
    # A name server that never answers, seen only by the servers (their own mount namespace).
    printf 'nameserver 127.0.0.2\noptions timeout:5 attempts:1\n' >"$ATTACK_DIR/out/a12_resolv.conf"
    python3 -c 'import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.2", 53))
while True: s.recvfrom(2048)' &
    DNS_PID=$!
    export NS_RESOLV="$ATTACK_DIR/out/a12_resolv.conf" PARTNER_WEBHOOK_ALLOW_PRIVATE=false
    export DNS_HOST=${DNS_HOST:-slow.attack12.test}
  fi
  a12_start_a "$NAME" "$PORT" "$BIN" || exit 1
  a12_start_b "$NAME" $((PORT+2)) "$BIN" || exit 1
  if [ "$MODE" = dns1 ]; then
    # One operator endpoint create at a time, whose host the server resolves in vain: 3 s for
    # `h.slow…`, 6 s for `h.slow….` (the name with its dot, then without). Without and with a key.
    rc=0
    for host in "h1.$DNS_HOST" "h2.$DNS_HOST." ; do
      for key in "" "dns-$RANDOM-$host"; do
        t0=$(date +%s.%N)
        out=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$BASE/internal/v1/partners/demo-clinic/webhook-endpoints" \
          -H "Authorization: Bearer $ITOKEN" -H 'content-type: application/json' ${key:+-H "Idempotency-Key: $key"} \
          -d "{\"url\":\"https://$host/x$RANDOM\",\"events\":[\"lead.created\"]}")
        printf 'dns1: host %-28s key %-5s -> %s in %.2f s\n' "$host" "$([ -n "$key" ] && echo yes || echo no)" "$out" "$(echo "$(date +%s.%N) - $t0" | bc)"
      done
    done
    # The partner's own create (no statement before its DNS), and the operator's PATCH of a URL.
    eid=$(curl -s "$BASE/api/v1/webhook-endpoints" -H "Authorization: Bearer $TOKEN" | jq -r '.data[0].id')
    for what in "partner POST" "operator PATCH" "partner PATCH"; do
      for key in "" "dns-$RANDOM-$what"; do
        case $what in
          "partner POST") m=POST; u="$BASE/api/v1/webhook-endpoints"; tok=$TOKEN
             d="{\"url\":\"https://h3.$DNS_HOST./x$RANDOM\",\"events\":[\"lead.created\"]}";;
          "operator PATCH") m=PATCH; u="$BASE/internal/v1/partners/demo-clinic/webhook-endpoints/$eid"; tok=$ITOKEN
             d="{\"url\":\"https://h4.$DNS_HOST./x$RANDOM\"}";;
          "partner PATCH") m=PATCH; u="$BASE/api/v1/webhook-endpoints/$eid"; tok=$TOKEN
             d="{\"url\":\"https://h5.$DNS_HOST./x$RANDOM\"}";;
        esac
        t0=$(date +%s.%N)
        out=$(curl -s -o /dev/null -w '%{http_code}' -X $m "$u" -H "Authorization: Bearer $tok" \
          -H 'content-type: application/json' ${key:+-H "Idempotency-Key: ${key// /-}"} -d "$d")
        printf 'dns1: %-15s (6 s of DNS) key %-5s -> %s in %.2f s\n' "$what" "$([ -n "$key" ] && echo yes || echo no)" "$out" "$(echo "$(date +%s.%N) - $t0" | bc)"
      done
    done
    echo "-- A log: $(grep -c 'PARTNER_DB_HOLD_TIMEOUT' "$A_LOG") hold-bound closes"
    grep -m3 -E 'HOLD_TIMEOUT|could not commit' "$A_LOG" | cut -c1-300
    echo "== end $(date -u +%H:%M:%S)"; exit $rc
  fi
  py pool "$3" "$4"; rc=$?
  echo "-- logs: A $(grep -c 'PARTNER_DB_HOLD_TIMEOUT' "$A_LOG") hold-bound closes, $(grep -ci panic "$A_LOG") panics, $(grep -c 'could not commit' "$A_LOG") 'could not commit'; B $(grep -c 'PARTNER_DB_HOLD_TIMEOUT' "$B_LOG") / $(grep -ci panic "$B_LOG") / $(grep -c 'could not commit' "$B_LOG")"
  ;;
sem)
  BIN=$1
  a12_start_a "$NAME" "$PORT" "$BIN" || exit 1
  a12_start_b "$NAME" $((PORT+2)) "$BIN" || exit 1
  py sem; rc=$?
  # A third instance with a budget of 4 sub-account calls a minute.
  C_LOG="$ATTACK_DIR/out/a12_$NAME.c.log"
  # shellcheck disable=SC2046
  a12_run "$C_LOG" env $(PARTNER_RATE_LIMIT=4/60s a12_env) DATABASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/$DB" \
    PARTNER_BIND="127.0.0.1:$((PORT+4))" PARTNER_METRICS_BIND="127.0.0.1:$((PORT+5))" \
    PARTNER_INTERNAL_TOKEN="$ITOKEN" "$BIN" serve --no-migrate --role api
  C_PID=$RUN_PID
  for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$((PORT+4))/healthz" >/dev/null && break; sleep 0.2; done
  py ratelimit "http://127.0.0.1:$((PORT+4))" || rc=1
  ;;
diff)
  a12_start_a "$NAME" "$PORT" "$1" || exit 1
  a12_start_b "$NAME" $((PORT+2)) "$1" || exit 1
  py diff; rc=$?
  echo "-- logs: A $(grep -c '"level":"ERROR"' "$A_LOG") errors, $(grep -c 'could not commit' "$A_LOG") 'could not commit'"
  grep -h -m5 -E '"level":"(ERROR|WARN)"' "$A_LOG" "$B_LOG" | cut -c1-260
  ;;
*) echo "unknown mode $MODE"; exit 2 ;;
esac
echo "== end $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg)"
exit $rc
