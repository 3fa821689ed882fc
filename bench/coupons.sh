#!/usr/bin/env bash
# Coupon benchmark: issues 10,000-code bulk orders through the operator API and exports one
# through CSV pages (500 rows each, the CSV default). Target: issuance <= 1 s. Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."

DB=${BENCH_DB:-pp_bench_coupons}
PORT=${BENCH_PORT:-18091}
RUNS=${BENCH_RUNS:-5}
export DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB"
export PARTNER_BIND="127.0.0.1:$PORT" PARTNER_TOKEN_PEPPER=bench-pepper PARTNER_INTERNAL_TOKEN=bench-internal-token-0123456789abcdef
export PARTNER_RATE_LIMIT=1000000000/1s RUST_LOG=warn

cargo build --release -q -p partner-server
BIN=${CARGO_TARGET_DIR:-target}/release/partner-server
psql -h 127.0.0.1 -U postgres -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres
$BIN serve &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.2; done

BASE="http://127.0.0.1:$PORT"
I="Authorization: Bearer $PARTNER_INTERNAL_TOKEN"
curl -sf -X PUT "$BASE/internal/v1/partners/bench" -H "$I" -d '{"name":"Bench","email":"ops@bench.test","active":true,
  "dnaAccess":false,"headlessLinks":false,"defaultLang":"en","enabledLangs":["en"],
  "careServices":{"subscriptionActive":true,"manualOverride":false,"yearlyBundle":true,"services":[]}}' >/dev/null
USER_ID=$(curl -sf -X POST "$BASE/internal/v1/users" -H "$I" -d '{"email":"b@bench.test","partnerId":"bench","admin":false}' \
  | sed -E 's/.*"id":"([^"]+)".*/\1/')
TOKEN=$(curl -sf -X POST "$BASE/internal/v1/users/$USER_ID/tokens" -H "$I" | sed -E 's/.*"token":"([^"]+)".*/\1/')

BODY='{"partnerId":"bench","productSlug":"primary","months":12,"quantity":10000,"unitPriceCents":9900,
  "purchaserEmail":"buyer@bench.test","purchaserSource":"bench"}'
echo "== machine: $(nproc) cores, $(free -g | awk '/Mem/ {print $2}') GiB; PostgreSQL $(psql -h 127.0.0.1 -U postgres -Atqc 'show server_version' postgres)"
echo "== issuing $RUNS bulk orders of 10,000 codes (request to full 201 response, ~4.6 MB JSON)"
times=()
for i in $(seq 1 "$RUNS"); do
  t=$(curl -s -o /tmp/bench-bulk.json -w '%{http_code} %{time_total}' -X POST "$BASE/internal/v1/care-services-coupons/bulk-orders" -H "$I" -d "$BODY")
  [ "${t%% *}" = 201 ] || { echo "issuance failed: $t"; exit 1; }
  times+=("${t#* }")
  echo "  order $i: ${t#* } s"
done
printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {printf "  median %.3f s, max %.3f s\n", a[int((NR+1)/2)], a[NR]}'

echo "== exporting $((RUNS * 10000)) codes as CSV pages of 500"
start=$(date +%s.%N)
pages=0; rows=0; offset=0
while :; do
  n=$(curl -sf "$BASE/api/v1/care-services-coupons?format=csv&offset=$offset" -H "Authorization: Bearer $TOKEN" | tail -n +2 | wc -l)
  [ "$n" -gt 0 ] || break
  pages=$((pages + 1)); rows=$((rows + n)); offset=$((offset + 500))
done
end=$(date +%s.%N)
awk -v s="$start" -v e="$end" -v p="$pages" -v r="$rows" 'BEGIN {printf "  %d rows in %d pages: %.2f s total, %.1f ms per page\n", r, p, e - s, 1000 * (e - s) / p}'
page_time() { curl -s -o /dev/null -w '%{time_total}' "$BASE/api/v1/care-services-coupons?format=csv&offset=$1" -H "Authorization: Bearer $TOKEN"; }
echo "  first page $(page_time 0) s, last page $(page_time $((rows - 500))) s (offset paging walks past the skipped rows)"
kill $SERVER
psql -h 127.0.0.1 -U postgres -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres
