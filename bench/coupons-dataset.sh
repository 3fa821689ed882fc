#!/usr/bin/env bash
# A coupons-only database for the coupon listing at scale (issue 22): the coupon part of
# bench/dataset.sh (same rows: codes C00000000001…, a bulk order per 1,000 codes of a partner,
# 10 % redeemed, 2 % void, a year of growth), with one big partner `ds-big` of COUPONS_BIG codes
# (default 1,000,000) and PARTNERS - 1 small ones (default 1,999) of COUPONS_SMALL each (default
# 400). Schema from the server's own `migrate`; indexes dropped for the load and rebuilt; the
# load runs with session_replication_role = replica (no trigger), so `coupon_blocks` is then
# filled the way migration 000019 fills it, and `coupon_counts`/`coupon_totals` as 000021 does.
# A portal user of `ds-big` and its token (pepper bench-pepper) are kept in `dataset_info`, as
# bench/dataset.sh keeps them, so bench/reads.sh and bench/coupons.sh run on it with
# BENCH_DATASET=<database>.
# Usage: bash bench/coupons-dataset.sh   (COUPONS_DB=pp_coupons, COUPONS_BIG, COUPONS_SMALL,
#        PARTNERS, DATASET_T0, BENCH_BIN=path/to/partner-server to skip the build)
set -euo pipefail
cd "$(dirname "$0")/.."
export PGHOST=127.0.0.1 PGPORT=5432 PGUSER=postgres
DB=${COUPONS_DB:-pp_coupons}
CB=${COUPONS_BIG:-1000000}
CPER=${COUPONS_SMALL:-400}
P=${PARTNERS:-2000}
T0=${DATASET_T0:-$(date -u +%Y-%m-%d)T00:00:00Z}
PORT=${BENCH_PORT:-18098}
export DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB"
export PARTNER_BIND="127.0.0.1:$PORT" PARTNER_TOKEN_PEPPER=bench-pepper
export PARTNER_INTERNAL_TOKEN=bench-internal-token-0123456789abcdef RUST_LOG=warn
[ -n "${BENCH_BIN:-}" ] || cargo build --release -q -p partner-server
BIN=${BENCH_BIN:-${CARGO_TARGET_DIR:-target}/release/partner-server}
NC=$((CB + CPER * (P - 1)))
echo "== $DB: $P partners, $NC coupons ($CB ds-big's); T0 $T0"
start=$(date +%s.%N)
psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres
$BIN migrate >/dev/null
psql -q -v ON_ERROR_STOP=1 "$DB" <<SQL
SET session_replication_role = replica; SET synchronous_commit = off;
SET maintenance_work_mem = '512MB'; SET work_mem = '64MB';
CREATE TABLE dataset_info (key text PRIMARY KEY, value text NOT NULL);
INSERT INTO dataset_info VALUES ('t0', '$T0'), ('partners', '$P'), ('big_partner', 'ds-big'),
  ('coupons', '$NC'), ('big_coupons', '$CB'), ('pepper', 'bench-pepper');
CREATE FUNCTION ds_partner(i bigint) RETURNS text IMMUTABLE LANGUAGE sql AS \$\$ SELECT CASE WHEN i = 1 THEN 'ds-big' ELSE 'ds-' || i END \$\$;
CREATE FUNCTION ds_age(r bigint, n bigint) RETURNS interval IMMUTABLE LANGUAGE sql AS
  \$\$ SELECT make_interval(secs => 365 * 86400 * power(r::float8 / n, 1.457)) \$\$;
INSERT INTO partners (partner_id, name, email, active, dna_access, headless_links, default_lang, enabled_langs,
  cs_subscription_active, cs_manual_override, cs_yearly_bundle, cs_services, created_at, updated_at)
SELECT ds_partner(i), 'Dataset partner ' || i, 'ops' || i || '@dataset.test', true, i % 3 = 0, true, 'en', '{en}',
  true, false, i % 2 = 0, '{}', timestamptz '$T0' - interval '400 days', timestamptz '$T0' - interval '400 days'
FROM generate_series(1, $P) i;
-- The coupons' indexes and keys, dropped for the load and rebuilt after it.
CREATE TEMP TABLE ddl AS SELECT indexdef || ';' AS sql FROM pg_indexes i WHERE tablename = 'coupons'
  AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = (quote_ident(i.indexname))::regclass);
INSERT INTO ddl SELECT format('ALTER TABLE coupons ADD CONSTRAINT %I %s;', conname, pg_get_constraintdef(oid))
  FROM pg_constraint WHERE conrelid = 'coupons'::regclass AND contype IN ('p', 'u');
SELECT format('ALTER TABLE coupons DROP CONSTRAINT %I', conname) FROM pg_constraint
  WHERE conrelid = 'coupons'::regclass AND contype IN ('p', 'u') \gexec
SELECT format('DROP INDEX %I', indexname) FROM pg_indexes WHERE tablename = 'coupons' \gexec
INSERT INTO coupons (id, code, partner_id, sub_id, product_slug, months, status, expires_at, redeemed_at, redeemed_email,
  redeemed_provider_primary_external_id, voided_at, bulk_order_id, purchaser_email, purchaser_source, unit_price_cents, notes, created_at)
SELECT md5('coupon-' || c)::uuid, 'C' || lpad(c::text, 11, '0'), ds_partner(pi), NULL, 'primary', 12,
  CASE WHEN c % 10 = 3 THEN 'redeemed' WHEN c % 50 = 7 THEN 'void' ELSE 'active' END,
  at + interval '1 year',
  CASE WHEN c % 10 = 3 THEN at + interval '3 days' END, CASE WHEN c % 10 = 3 THEN 'patient' || c || '@example.com' END,
  CASE WHEN c % 10 = 3 THEN 'ext-' || c END, CASE WHEN c % 50 = 7 THEN at + interval '5 days' END,
  md5('bulk-' || pi || '-' || (r / 1000))::uuid, 'buyer' || pi || '@dataset.test', 'dataset', 9900, NULL, at
FROM (SELECT c, pi, timestamptz '$T0' - ds_age(r - r % 1000, n) AS at, r FROM (
  SELECT c, CASE WHEN c <= $CB THEN 1 ELSE 2 + (c - $CB - 1) % ($P - 1) END AS pi,
    CASE WHEN c <= $CB THEN c - 1 ELSE (c - $CB - 1) / ($P - 1) END AS r,
    CASE WHEN c <= $CB THEN $CB ELSE $CPER END AS n
  FROM generate_series(1::bigint, $NC) c) g) h;
SELECT sql FROM ddl \gexec
DROP FUNCTION ds_partner(bigint), ds_age(bigint, bigint);
-- What the triggers of migration 000019 would have kept (the load fired none).
TRUNCATE coupon_blocks;
INSERT INTO coupon_blocks (partner_id, created_at, n, older)
SELECT partner_id, created_at, n, coalesce(sum(n) OVER (PARTITION BY partner_id ORDER BY created_at
    ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)
FROM (SELECT partner_id, created_at, count(*) AS n FROM coupons GROUP BY partner_id, created_at) g;
-- And what those of migration 000021 would have (when the binary has it).
SELECT 'TRUNCATE coupon_counts, coupon_totals' WHERE to_regclass('coupon_counts') IS NOT NULL \gexec
SELECT 'INSERT INTO coupon_counts (partner_id, created_at, product_slug, status, expires_at, n)
  SELECT partner_id, created_at, product_slug, status, coupon_count_expiry(status, expires_at), count(*)
  FROM coupons GROUP BY 1, 2, 3, 4, 5' WHERE to_regclass('coupon_counts') IS NOT NULL \gexec
SELECT 'INSERT INTO coupon_totals (partner_id, status, product_slug, expires_at, n)
  SELECT partner_id, status, product_slug, expires_at, sum(n)::bigint FROM coupon_counts GROUP BY 1, 2, 3, 4'
  WHERE to_regclass('coupon_totals') IS NOT NULL \gexec
SQL
psql -q "$DB" -c 'VACUUM (ANALYZE) coupons' -c 'VACUUM (ANALYZE) coupon_blocks' -c 'VACUUM (ANALYZE) partners' -c CHECKPOINT
[ "$(psql -Atq "$DB" -c "SELECT to_regclass('coupon_counts') IS NOT NULL")" != t ] ||
  psql -q "$DB" -c 'VACUUM (ANALYZE) coupon_counts' -c 'VACUUM (ANALYZE) coupon_totals' 
$BIN serve --no-migrate --role api >/dev/null 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
I="Authorization: Bearer $PARTNER_INTERNAL_TOKEN"
USER_ID=$(curl -sf -X POST "http://127.0.0.1:$PORT/internal/v1/users" -H "$I" \
  -d '{"email":"bench@dataset.test","partnerId":"ds-big","admin":false}' | sed -E 's/.*"id":"([^"]+)".*/\1/')
TOKEN=$(curl -sf -X POST "http://127.0.0.1:$PORT/internal/v1/users/$USER_ID/tokens" -H "$I" | sed -E 's/.*"token":"([^"]+)".*/\1/')
kill $SERVER; wait $SERVER 2>/dev/null || true
psql -q "$DB" -c "INSERT INTO dataset_info VALUES ('token', '$TOKEN'), ('user_id', '$USER_ID')"
end=$(date +%s.%N)
echo "== seeded in $(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.1f", b - a}') s, load average $(cut -d' ' -f1-3 /proc/loadavg)"
psql -q "$DB" -P pager=off -c "SELECT c.relname, to_char(c.reltuples, 'FM999,999,999') AS rows,
  pg_size_pretty(pg_relation_size(c.oid)) AS size FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE n.nspname = 'public' AND c.relname LIKE 'coupon%' ORDER BY pg_relation_size(c.oid) DESC"
