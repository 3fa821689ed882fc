# attack12 helpers (source them): instances of a release binary on a PostgreSQL cluster of our own.
#   PG_PORT (default 18540): the cluster (initdb'd by the caller, never the shared 5432).
#   a12_start_a NAME PORT BIN   `demo` server on database pp_attack12_NAME (created afresh);
#                               sets BASE, TOKEN, ITOKEN, A_PID.
#   a12_start_b NAME PORT BIN   a second instance (`serve --no-migrate --role api`) on the same
#                               database; sets BASE2, B_PID.
# Extra settings come from the environment (PARTNER_DB_POOL_SIZE, PARTNER_WEBHOOK_ALLOW_PRIVATE,
# PARTNER_RATE_LIMIT, …). NS_RESOLV=<file>: the server runs in a mount namespace of its own whose
# /etc/resolv.conf is that file (a slow name server for the DNS cases; nothing else changes).
ATTACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PG_PORT=${PG_PORT:-18540}
mkdir -p "$ATTACK_DIR/out"
export PARTNER_TOKEN_PEPPER=${PARTNER_TOKEN_PEPPER:-attack12-pepper}
PSQL() { psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -qAt "$@"; }

a12_run() {  # a12_run LOG BIN ARGS… (env as given), in the background; pid in RUN_PID
  local log=$1; shift
  if [ -n "${NS_RESOLV:-}" ]; then
    unshare -m sh -c 'mount --bind "$0" /etc/resolv.conf && exec "$@"' "$NS_RESOLV" "$@" >"$log" 2>&1 &
  else
    "$@" >"$log" 2>&1 &
  fi
  RUN_PID=$!
}

a12_env() {  # the settings both instances share
  echo PARTNER_RATE_LIMIT="${PARTNER_RATE_LIMIT:-1000000/60s}" PARTNER_PUBLIC_RATE=1000000 \
    PARTNER_WEBHOOK_ALLOW_PRIVATE="${PARTNER_WEBHOOK_ALLOW_PRIVATE:-true}" \
    PARTNER_LOG_FORMAT=json RUST_LOG="${RUST_LOG:-warn}"
}

a12_start_a() {
  local name=$1 port=$2 bin=$3
  local db=pp_attack12_$name access="$ATTACK_DIR/out/a12_$name.access"
  PSQL -c "DROP DATABASE IF EXISTS $db" >/dev/null
  rm -f "$access"
  A_LOG="$ATTACK_DIR/out/a12_$name.a.log"
  # shellcheck disable=SC2046
  a12_run "$A_LOG" env $(a12_env) DATABASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/$db" \
    PARTNER_BIND="127.0.0.1:$port" PARTNER_METRICS_BIND="127.0.0.1:$((port+1))" \
    PARTNER_DEMO_ACCESS_FILE="$access" "$bin" demo
  A_PID=$RUN_PID
  for _ in $(seq 1 300); do [ -s "$access" ] && break; sleep 0.2; done
  [ -s "$access" ] || { echo "instance A ($name) did not start"; tail -20 "$A_LOG"; return 1; }
  # shellcheck disable=SC1090
  . "$access"
  BASE="http://127.0.0.1:$PORT"; TOKEN=$PARTNER_TOKEN; ITOKEN=$INTERNAL_TOKEN; DB=$db
  echo "A: $bin pid $A_PID on $BASE (db $db, pool ${PARTNER_DB_POOL_SIZE:-default})"
}

a12_start_b() {
  local name=$1 port=$2 bin=$3
  B_LOG="$ATTACK_DIR/out/a12_$name.b.log"
  # shellcheck disable=SC2046
  a12_run "$B_LOG" env $(a12_env) DATABASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/pp_attack12_$name" \
    PARTNER_BIND="127.0.0.1:$port" PARTNER_METRICS_BIND="127.0.0.1:$((port+1))" \
    PARTNER_INTERNAL_TOKEN="$ITOKEN" "$bin" serve --no-migrate --role api
  B_PID=$RUN_PID
  BASE2="http://127.0.0.1:$port"
  for _ in $(seq 1 100); do curl -sf "$BASE2/healthz" >/dev/null && break; sleep 0.2; done
  curl -sf "$BASE2/healthz" >/dev/null || { echo "instance B did not start"; tail -20 "$B_LOG"; return 1; }
  echo "B: $bin pid $B_PID on $BASE2"
}

# `unshare` (without --fork) and `sh -c 'exec …'` exec the server: RUN_PID is the server's pid.
a12_stop() { for p in "$@"; do [ -n "$p" ] && kill "$p" 2>/dev/null; done; wait 2>/dev/null; true; }
