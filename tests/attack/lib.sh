# Shared helpers: source from the attack scripts.
# start_server NAME PORT   (extra settings from the caller's environment, e.g. RUST_LOG)
#   starts target/debug/partner-server demo on 127.0.0.1:PORT, metrics on PORT+1, database
#   ${DB_PREFIX:-attack_}NAME, webhooks allowed to private addresses and trusting certs/ca.pem.
#   PG_PORT: the server's PostgreSQL port (default 5432; pgproxy.py's for BLACKHOLE runs).
#   Sets PORT, BASE, TOKEN, ITOKEN, METRICS, SERVER_PID, SERVER_LOG.
ATTACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BIN="${PARTNER_BIN:-$ATTACK_DIR/../../target/debug/partner-server}"
mkdir -p "$ATTACK_DIR/out"

start_server() {
  local name=$1 port=$2
  "$ATTACK_DIR/gen-certs.sh"
  SERVER_LOG="$ATTACK_DIR/out/$name.server.log"
  local access="$ATTACK_DIR/out/$name.access"
  rm -f "$access"
  env DATABASE_URL="postgres://postgres@127.0.0.1:${PG_PORT:-5432}/${DB_PREFIX:-attack_}$name" \
      PARTNER_BIND="127.0.0.1:$port" PARTNER_METRICS_BIND="127.0.0.1:$((port+1))" \
      PARTNER_WEBHOOK_ALLOW_PRIVATE=true PARTNER_WEBHOOK_CA_FILE="$ATTACK_DIR/certs/ca.pem" \
      PARTNER_DEMO_ACCESS_FILE="$access" PARTNER_LOG_FORMAT="${PARTNER_LOG_FORMAT:-json}" \
      RUST_LOG="${RUST_LOG:-info}" \
      "$BIN" demo >"$SERVER_LOG" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 300); do [ -s "$access" ] && break; sleep 0.2; done
  [ -s "$access" ] || { echo "server $name did not start"; tail -20 "$SERVER_LOG"; return 1; }
  # shellcheck disable=SC1090
  . "$access"
  BASE="http://127.0.0.1:$PORT"; TOKEN=$PARTNER_TOKEN; ITOKEN=$INTERNAL_TOKEN
  METRICS="http://127.0.0.1:$((port+1))/metrics"
  echo "server $name pid $SERVER_PID on $BASE (log $SERVER_LOG)"
}

stop_server() { [ -n "${SERVER_PID:-}" ] && kill "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null || true; }

# Receiver on PORT logging to out/NAME.recv.jsonl; mode file out/NAME.mode ("<status> [delay]").
start_receiver() {
  local name=$1 port=$2
  RECV_LOG="$ATTACK_DIR/out/$name.recv.jsonl"; RECV_MODE="$ATTACK_DIR/out/$name.mode"
  : >"$RECV_LOG"; echo 200 >"$RECV_MODE"
  python3 "$ATTACK_DIR/receiver.py" --port "$port" --log "$RECV_LOG" --mode-file "$RECV_MODE" &
  RECV_PID=$!
  sleep 0.5
}
stop_receiver() { [ -n "${RECV_PID:-}" ] && kill "$RECV_PID" 2>/dev/null; wait "$RECV_PID" 2>/dev/null || true; }

P() { curl -s -H "Authorization: Bearer $TOKEN" -H 'content-type: application/json' "$@"; }
I() { curl -s -H "Authorization: Bearer $ITOKEN" -H 'content-type: application/json' "$@"; }
lead() {  # lead PARTNER EMAIL
  I -X POST "$BASE/internal/v1/leads" -d "{\"partnerId\":\"$1\",\"firstName\":\"Ann\",\"lastName\":\"Lee\",\"email\":\"$2\",\"emailConsent\":true,\"phone\":\"+1 555 0100\",\"smsConsent\":true,\"origin\":\"managed-website\",\"location\":\"Austin, TX\"}"
}
