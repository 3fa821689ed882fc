#!/usr/bin/env bash
# What the server sends to PostgreSQL for ONE request of each authenticated partner read: the
# statements (from PostgreSQL's own log, `log_statement = all`) and the round trips (the
# server's writes to its database socket, counted with strace: statements pipelined on one
# connection leave in one write, and the server waits for their answers once). Not a benchmark:
# it needs no quiet machine. One server, a pool of ONE connection per HTTP worker thread (every
# statement of a request on one backend), `--role api` (no delivery worker writing to the log);
# each read is requested once per worker and once more to warm up (prepared statements, the
# `lastUsedAt` touch: each worker's connection prepares its own), then once measured.
#
#   bash bench/round_trips.sh                 # builds the debug binary of this tree
#   BENCH_BIN=/path/to/partner-server bash bench/round_trips.sh
set -euo pipefail
cd "$(dirname "$0")/.."

PGHOST=127.0.0.1; PGPORT=5432; PGUSER=postgres
export PGHOST PGPORT PGUSER
DB=${BENCH_DB:-pp_round_trips}
PORT=${BENCH_PORT:-18091}
export DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB"
export PARTNER_BIND="127.0.0.1:$PORT" PARTNER_TOKEN_PEPPER=bench-pepper PARTNER_INTERNAL_TOKEN=bench-internal-token-0123456789abcdef
export RUST_LOG=warn PARTNER_DB_POOL_SIZE=1
PGLOG=${BENCH_PGLOG:-/var/log/postgresql/postgresql-15-main.log}
[ -r "$PGLOG" ] || { echo "cannot read PostgreSQL's log at $PGLOG (set BENCH_PGLOG)" >&2; exit 1; }
command -v strace >/dev/null || { echo "strace is missing" >&2; exit 1; }
[ -n "${BENCH_BIN:-}" ] || cargo build -q -p partner-server
BIN=${BENCH_BIN:-${CARGO_TARGET_DIR:-target}/debug/partner-server}

psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres
"$BIN" migrate >/dev/null
# Only new sessions log: set before the server connects.
psql -qc "ALTER DATABASE $DB SET log_statement = 'all'" postgres

SERVER=
trap 'kill $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true; psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres' EXIT
"$BIN" serve --no-migrate --role api &
SERVER=$!
for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.2; done

B="http://127.0.0.1:$PORT"
I=(-H "Authorization: Bearer $PARTNER_INTERNAL_TOKEN" -H "Content-Type: application/json")
post() { curl -sf -X "$1" "$B$2" "${@:3}"; }
post PUT /internal/v1/partners/acme "${I[@]}" -d '{"name":"Acme","email":"ops@acme.test","active":true,"dnaAccess":true,
  "headlessLinks":true,"defaultLang":"en","enabledLangs":["en"],"careServices":{"subscriptionActive":true,
  "manualOverride":false,"yearlyBundle":true,"services":["primary-care"]}}' >/dev/null
USER_ID=$(post POST /internal/v1/users "${I[@]}" -d '{"email":"u@acme.test","partnerId":"acme","admin":false}' \
  | sed -E 's/.*"id":"([^"]+)".*/\1/')
TOKEN=$(post POST "/internal/v1/users/$USER_ID/tokens" "${I[@]}" | sed -E 's/.*"token":"([^"]+)".*/\1/')
A=(-H "Authorization: Bearer $TOKEN" -H "Content-Type: application/json")
SUB=$(post POST /api/v1/sub-accounts "${A[@]}" -d '{"subId":"7","nickname":"Front desk"}' | sed -E 's/.*"id":"([^"]+)".*/\1/')
post POST /api/v1/webhook-endpoints "${A[@]}" -d '{"url":"https://hooks.acme.invalid/x","events":["lead.created"]}' >/dev/null
LEAD=$(post POST /internal/v1/leads "${I[@]}" -d '{"partnerId":"acme","firstName":"Ann","lastName":"Lee","email":"ann@example.com",
  "emailConsent":true,"smsConsent":false,"origin":"managed-website","location":"Austin, TX"}' | sed -E 's/^\{"data":\{"id":"([^"]+)".*/\1/')
post POST /internal/v1/orders "${I[@]}" -d '{"orderId":"o-1","partnerId":"acme","createdDate":"2026-11-20T10:00:00.000Z",
  "product":"P","amount":10,"commission":1,"status":"shipped","isTest":false,"source":"pharmacy"}' >/dev/null
PAYOUT=$(post POST /internal/v1/payouts "${I[@]}" -d '{"partnerId":"acme","payoutDate":"2026-11-15","payoutAmount":5,"status":"paid"}' \
  | sed -E 's/.*"recordId":"([^"]+)".*/\1/')
COUPON=$(post POST /internal/v1/care-services-coupons/bulk-orders "${I[@]}" -d '{"partnerId":"acme","productSlug":"primary","months":12,
  "quantity":2,"unitPriceCents":9900,"purchaserEmail":"b@acme.test","purchaserSource":"portal"}' | sed -E 's/.*"code":"([^"]+)".*/\1/')
DELIVERY=$(curl -sf "$B/api/v1/webhook-deliveries" "${A[@]}" | sed -E 's/^\{"data":\[\{"id":"([^"]+)".*/\1/')

READS=(
  /api/v1/leads
  /api/v1/sub-accounts
  /api/v1/orders
  /api/v1/payouts
  /api/v1/dna-links
  "/api/v1/medical-intake-links?sub=7"
  "/api/v1/care-service-links?sub=7"
  /api/v1/care-services-coupons
  "/api/v1/care-services-coupons?format=csv"
  "/api/v1/care-services-coupons?status=active,redeemed&product_slug=primary&offset=1"
  /api/v1/webhook-endpoints
  /api/v1/webhook-deliveries
  "/api/v1/webhook-deliveries/$DELIVERY"
  "/api/v1/leads/$LEAD"
  /api/v1/orders/o-1
  "/api/v1/payouts/$PAYOUT"
  "/api/v1/sub-accounts/$SUB"
  "/api/v1/care-services-coupons/$COUPON"
)
TRACE=$(mktemp)
printf '%-48s %6s %10s %7s %11s\n' "read" "status" "statements" "writes" "round trips"
for path in "${READS[@]}"; do
  # Warm-up: prepares, touches lastUsedAt. Each HTTP worker thread has a pool of its own (its
  # connections prepared separately) and accepted connections go to the workers in turn: one
  # warm-up request per worker and one more.
  for _ in $(seq 0 "$(nproc)"); do curl -s -o /dev/null "$B$path" "${A[@]}"; done
  sleep 0.2
  lines=$(wc -l <"$PGLOG")
  strace -f -qq -e trace=write,sendto,writev,read,recvfrom -s 4 -o "$TRACE" -p "$SERVER" & STRACE=$!
  sleep 0.5
  status=$(curl -s -o /dev/null -w '%{http_code}' "$B$path" "${A[@]}")
  sleep 0.3
  kill $STRACE 2>/dev/null || true; wait $STRACE 2>/dev/null || true
  logged=$(tail -n +"$((lines + 1))" "$PGLOG" | grep -E "@$DB LOG: +(execute|statement)" || true)
  # The database socket is the one the server writes frontend messages to (Parse, Bind, Query:
  # "P\0", "B\0", "Q\0"; the HTTP answer's writes start otherwise). A round trip is a write to it
  # after an answer came from it (or the first): writes sent before any answer are pipelined.
  writes=$(grep -cE '^[0-9]+ +(write|sendto|writev)\([0-9]+, +(\[\{iov_base=)?"[PBQ]\\0' "$TRACE" || true)
  trips=$(awk '
    match($0, /(write|sendto|writev)\(([0-9]+), +(\[\{iov_base=)?"[PBQ]\\0/, m) {
      if (fd == "") fd = m[2]
      if (m[2] == fd && (trips == 0 || answered)) { trips++; answered = 0 }
      next
    }
    fd != "" && match($0, /(read|recvfrom)\(([0-9]+),.*= ([0-9]+)$/, m) && m[2] == fd && m[3] > 0 { answered = 1 }
    END { print trips + 0 }' "$TRACE")
  printf '%-48s %6s %10s %7s %11s\n' "GET $(sed -E 's/[0-9a-f]{8}-[0-9a-f-]{27}|'"$COUPON"'/{id}/' <<<"$path")" "$status" "$(grep -c . <<<"$logged" || true)" "$writes" "$trips"
  if [ -n "${BENCH_VERBOSE:-}" ]; then sed -E 's/^.*LOG: +//' <<<"$logged" | cut -c1-220 | sed 's/^/    /'; fi
done
[ -z "${BENCH_KEEP_TRACE:-}" ] && rm -f "$TRACE" || echo "last trace: $TRACE"
psql -qc "ALTER DATABASE $DB RESET log_statement" postgres
