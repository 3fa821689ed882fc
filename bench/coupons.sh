#!/usr/bin/env bash
# Coupon benchmark: issues 10,000-code bulk orders through the operator API and exports one
# through CSV pages (500 rows each, the CSV default), and times the first and last page of the
# JSON listing (100 rows) and of the CSV export (medians of 5), then the whole export's time and
# rows/s, against one pgbench client running the statements of one CSV page (read back from
# PostgreSQL's log) for as many pages. Target: issuance <= 1 s; the export on a big database
# within 20 % of the fresh database's rows/s (issue 22).
# BENCH_DATASET=pp_dataset runs it on an existing database of bench/dataset.sh or
# bench/coupons-dataset.sh, for its big partner (200,000 coupons in pp_dataset at scale 1,
# 1,000,000 in bench/coupons-dataset.sh's, plus the BENCH_RUNS orders issued here, default 3; the
# database is kept). Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."

DB=${BENCH_DATASET:-${BENCH_DB:-pp_bench_coupons}}
PORT=${BENCH_PORT:-18091}
RUNS=${BENCH_RUNS:-$([ -n "${BENCH_DATASET:-}" ] && echo 3 || echo 5)}
export DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB"
export PARTNER_BIND="127.0.0.1:$PORT" PARTNER_TOKEN_PEPPER=bench-pepper PARTNER_INTERNAL_TOKEN=bench-internal-token-0123456789abcdef
export PARTNER_RATE_LIMIT=1000000000/1s RUST_LOG=warn
# On the dataset, no retention pruning during the run (its history is 30 days deep).
[ -z "${BENCH_DATASET:-}" ] || export PARTNER_WEBHOOK_RETENTION=90d PARTNER_EVENT_RETENTION=90d

[ -n "${BENCH_BIN:-}" ] || cargo build --release -q -p partner-server
BIN=${BENCH_BIN:-${CARGO_TARGET_DIR:-target}/release/partner-server}
[ -n "${BENCH_DATASET:-}" ] || psql -h 127.0.0.1 -U postgres -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres
$BIN serve --role api &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.2; done

BASE="http://127.0.0.1:$PORT"
I="Authorization: Bearer $PARTNER_INTERNAL_TOKEN"
if [ -n "${BENCH_DATASET:-}" ]; then
  PARTNER=$(psql -h 127.0.0.1 -U postgres -Atq "$DB" -c "SELECT value FROM dataset_info WHERE key = 'big_partner'")
  TOKEN=$(psql -h 127.0.0.1 -U postgres -Atq "$DB" -c "SELECT value FROM dataset_info WHERE key = 'token'")
else
PARTNER=bench
curl -sf -X PUT "$BASE/internal/v1/partners/bench" -H "$I" -d '{"name":"Bench","email":"ops@bench.test","active":true,
  "dnaAccess":false,"headlessLinks":false,"defaultLang":"en","enabledLangs":["en"],
  "careServices":{"subscriptionActive":true,"manualOverride":false,"yearlyBundle":true,"services":[]}}' >/dev/null
USER_ID=$(curl -sf -X POST "$BASE/internal/v1/users" -H "$I" -d '{"email":"b@bench.test","partnerId":"bench","admin":false}' \
  | sed -E 's/.*"id":"([^"]+)".*/\1/')
TOKEN=$(curl -sf -X POST "$BASE/internal/v1/users/$USER_ID/tokens" -H "$I" | sed -E 's/.*"token":"([^"]+)".*/\1/')
fi

BODY='{"partnerId":"'$PARTNER'","productSlug":"primary","months":12,"quantity":10000,"unitPriceCents":9900,
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

# The shared benchmark server runs with autovacuum off; a server with it on would have analyzed
# (and vacuumed) the table after the first order. Without statistics the plans of a table that
# grew from nothing are guesses, and the figures would measure those.
psql -h 127.0.0.1 -U postgres -q "$DB" -c "VACUUM (ANALYZE) coupons" -c "ANALYZE coupon_blocks" 2>/dev/null || true
TOTAL=$(psql -h 127.0.0.1 -U postgres -Atq "$DB" -c "SELECT count(*) FROM coupons WHERE partner_id = '$PARTNER'")
echo "== load average $(cut -d' ' -f1-3 /proc/loadavg); $PARTNER holds $TOTAL coupons"
page_median() { # format offset limit
  for _ in 1 2 3 4 5; do
    curl -s -o /dev/null -w '%{time_total}\n' "$BASE/api/v1/care-services-coupons?format=$1&offset=$2&limit=$3" -H "Authorization: Bearer $TOKEN"
  done | sort -n | sed -n 3p
}
echo "  JSON page of 100: first $(page_median json 0 100) s, last (offset $((TOTAL - 100))) $(page_median json $((TOTAL - 100)) 100) s (medians of 5)"
echo "  CSV page of 500: first $(page_median csv 0 500) s, last (offset $((TOTAL - 500))) $(page_median csv $((TOTAL - 500)) 500) s (medians of 5)"
echo "== exporting $TOTAL codes as CSV pages of 500 (one curl, one keep-alive connection, page after page)"
pages=$(( (TOTAL + 499) / 500 ))
for p in $(seq 0 $((pages - 1))); do echo "url = \"$BASE/api/v1/care-services-coupons?format=csv&offset=$((500 * p))\""; done >/tmp/bench-coupons-urls.txt
start=$(date +%s.%N)
lines=$(curl -sf -K /tmp/bench-coupons-urls.txt -H "Authorization: Bearer $TOKEN" | wc -l)
end=$(date +%s.%N)
rows=$((lines - pages)) # each page has a header line
awk -v s="$start" -v e="$end" -v p="$pages" -v r="$rows" 'BEGIN {printf "  %d rows in %d pages: %.2f s total, %.1f ms per page, %.0f rows/s\n", r, p, e - s, 1000 * (e - s) / p, r / (e - s)}'
page_time() { curl -s -o /dev/null -w '%{time_total}' "$BASE/api/v1/care-services-coupons?format=csv&offset=$1" -H "Authorization: Bearer $TOKEN"; }
echo "  first page $(page_time 0) s, last page $(page_time $((rows - 500))) s; load average $(cut -d' ' -f1-3 /proc/loadavg)"
# The same export's SQL without the server: the statements one CSV page sent (PostgreSQL's log,
# parameters filled in, the offset made a pgbench variable), run by one pgbench client for as
# many pages as the export had, at offsets drawn from the same pages (each page's cost does not
# depend on the order the pages are read in).
PGLOG=${BENCH_PGLOG:-/var/log/postgresql/postgresql-15-main.log}
if [ -r "$PGLOG" ] && [ "$pages" -gt 2 ]; then
  MARK=$((500 * (pages / 2)))
  psql -h 127.0.0.1 -U postgres -qc "ALTER DATABASE $DB SET log_statement = 'all'" postgres
  kill $SERVER; wait $SERVER 2>/dev/null || true
  $BIN serve --no-migrate --role api &
  SERVER=$!
  for _ in $(seq 1 50); do curl -sf "$BASE/healthz" >/dev/null && break; sleep 0.2; done
  curl -sf -o /dev/null "$BASE/api/v1/care-services-coupons?format=csv&offset=$MARK" -H "Authorization: Bearer $TOKEN"
  sleep 0.3
  lines=$(wc -l <"$PGLOG")
  curl -sf -o /dev/null "$BASE/api/v1/care-services-coupons?format=csv&offset=$MARK" -H "Authorization: Bearer $TOKEN"
  sleep 0.3
  psql -h 127.0.0.1 -U postgres -qc "ALTER DATABASE $DB RESET log_statement" postgres
  { echo "\\set off 500 * random(0, $((pages - 1)))"
    tail -n +"$((lines + 1))" "$PGLOG" | python3 bench/logged_sql.py "$DB" | sed "s/'$MARK'/:off/g"; } >/tmp/bench-coupons-export.sql
  echo "  pgbench of one page's $(grep -c ';$' /tmp/bench-coupons-export.sql) statements, $pages pages, one client:"
  tps=$(pgbench -n -M prepared -c 1 -j 1 -t "$pages" -f /tmp/bench-coupons-export.sql "$DB" 2>/dev/null | awk '/^tps/ {print $3}')
  awk -v t="$tps" -v p="$pages" -v s="$start" -v e="$end" 'BEGIN {printf "  %.0f pages/s, %.0f rows/s; the server'"'"'s export %.2f x that\n", t, 500 * t, (p / (e - s)) / t}'
  echo "  load average $(cut -d' ' -f1-3 /proc/loadavg)"
fi
kill $SERVER
[ -n "${BENCH_DATASET:-}" ] || psql -h 127.0.0.1 -U postgres -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres
