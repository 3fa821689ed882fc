#!/usr/bin/env bash
# A realistic-volume database for the benchmarks of issue 22 (item 2), deterministic: every id,
# time and value is a function of a row number (ids are md5 of a label as a UUID), relative to
# DATASET_T0 (default: today's midnight UTC). At DATASET_SCALE=1 (the default):
#   2,000 partners (`ds-big` and ds-2 … ds-2000), 10 webhook endpoints each (20,000);
#   5,000,000 leads, 1,000,000 of them `ds-big`'s, over a year of growth (a lead of rank r of n,
#     newest first, is (r/n)^1.457 of a year old: 18 % of every partner's leads in the last 30 days);
#   500,000 orders (200,000 `ds-big`'s) the same way; 100,000 payouts (50 a partner, fortnightly);
#   1,000,000 coupons (200,000 `ds-big`'s; 10 % redeemed, 2 % void);
#   30 days of webhook history: a `lead.created`, `order.created` or `payout.created` event for
#     each of those records created in the last 30 days (about 1,000,000 events, written in 30
#     transactions, one per day, so the feed has many txids), each delivered to every endpoint of
#     its partner (about 10,000,000 deliveries): 96 % delivered at once, 3 % at the second attempt,
#     and every delivery of 200 endpoints (the tenth of every tenth partner), disabled as failing a
#     day before T0, failed after 7 attempts (about 12,000,000 attempts in all). Nothing pending.
# Every endpoint points at https://127.0.0.1:$DATASET_RECEIVER_PORT (bench/webhooks-lib.sh's
# nginx) under /hook/<partner>/<n>; `ds-big`'s are /hook/ds-big/1 … /hook/ds-big/10.
# Method: the schema comes from the server's own `migrate`; the big tables' foreign keys,
# primary/unique constraints and indexes are dropped, rows generated set-based in PostgreSQL in
# two sessions at once (session_replication_role = replica: no foreign-key or marking triggers
# while loading; the data is consistent by construction), then constraints and indexes rebuilt
# (two sessions), foreign keys added back (validated), and everything VACUUM (ANALYZE)d and
# checkpointed. Then a server started for a moment makes a portal user of `ds-big` and a token;
# the token (for PARTNER_TOKEN_PEPPER=bench-pepper) and the counts are kept in the table
# `dataset_info` of the database: `psql pp_dataset -Atc "SELECT value FROM dataset_info WHERE key = 'token'"`.
# Prints each phase's time with the load average, and the sizes on disk per table.
# Usage: bash bench/dataset.sh   (DATASET_DB=pp_dataset, DATASET_SCALE=1, DATASET_T0,
#        DATASET_RECEIVER_PORT=18443, BENCH_BIN=path/to/partner-server to skip the build)
set -euo pipefail
cd "$(dirname "$0")/.."
export PGHOST=127.0.0.1 PGPORT=5432 PGUSER=postgres
DB=${DATASET_DB:-pp_dataset}
S=${DATASET_SCALE:-1}
T0=${DATASET_T0:-$(date -u +%Y-%m-%d)T00:00:00Z}
RPORT=${DATASET_RECEIVER_PORT:-18443}
PORT=${BENCH_PORT:-18099}
export DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB"
export PARTNER_BIND="127.0.0.1:$PORT" PARTNER_TOKEN_PEPPER=bench-pepper
export PARTNER_INTERNAL_TOKEN=bench-internal-token-0123456789abcdef RUST_LOG=warn
[ -n "${BENCH_BIN:-}" ] || cargo build --release -q -p partner-server
BIN=${BENCH_BIN:-${CARGO_TARGET_DIR:-target}/release/partner-server}

# Counts at this scale (partners at least 2; the big partner always has its share).
read -r P NB NPER OB OPER CB CPER <<<"$(awk -v s="$S" 'BEGIN {
  p = int(2000 * s + 0.5); if (p < 2) p = 2
  nb = int(1000000 * s + 0.5); nper = int((5000000 * s - nb) / (p - 1))
  ob = int(200000 * s + 0.5); oper = int((500000 * s - ob) / (p - 1))
  cb = int(200000 * s + 0.5); cper = int((1000000 * s - cb) / (p - 1))
  print p, nb, nper, ob, oper, cb, cper }')"
NL=$((NB + NPER * (P - 1))); NO=$((OB + OPER * (P - 1))); NC=$((CB + CPER * (P - 1))); NP=$((50 * P))
EXP=1.457 # age = year * (rank / n)^EXP: 18 % of the records in the last 30 days
echo "== $DB at scale $S: $P partners, $((10 * P)) endpoints, $NL leads ($NB ds-big), $NO orders ($OB ds-big), $NP payouts, $NC coupons; T0 $T0"

T_ALL=$(date +%s.%N)
LAST=$T_ALL
phase() { # label: time since the previous phase, and the load average now
  local now; now=$(date +%s.%N)
  printf '%-58s %7.1f s   load %s\n' "$1" "$(awk -v a="$LAST" -v b="$now" 'BEGIN {print b - a}')" "$(cut -d' ' -f1-3 /proc/loadavg)"
  printf '%s\t%s\t%s\n' "$1" "$(awk -v a="$LAST" -v b="$now" 'BEGIN {printf "%.1f", b - a}')" "$(cut -d' ' -f1-3 /proc/loadavg)" >>"$WORK/phases"
  LAST=$now
}
WORK=$(mktemp -d /tmp/pp-dataset.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
: >"$WORK/phases"
# psql on the dataset with the load session's settings.
q() { psql -q -v ON_ERROR_STOP=1 "$DB" "$@"; }
SESSION="SET session_replication_role = replica; SET synchronous_commit = off; SET maintenance_work_mem = '512MB';
SET max_parallel_maintenance_workers = 0; SET work_mem = '64MB';
\\timing on
\\set ECHO queries"
# Runs each argument (an SQL text) in its own session, all at once; fails if any fails.
parallel() {
  local pids=() i=0 f
  for sql in "$@"; do
    i=$((i + 1)); f="$WORK/par$i.sql"
    printf '%s\n%s\n' "$SESSION" "$sql" >"$f"
    q -f "$f" >"$WORK/par$i.log" 2>&1 &
    pids+=($!)
  done
  local rc=0 j=0
  for p in "${pids[@]}"; do
    j=$((j + 1))
    wait "$p" || { rc=1; echo "session $j failed:" >&2; tail -20 "$WORK/par$j.log" >&2; }
  done
  return $rc
}
# The time of each index, key, foreign key or vacuum statement of the last parallel() call.
statement_times() {
  cat "$WORK"/par*.log | awk '/^(CREATE|ALTER TABLE|VACUUM)/ {s = substr($0, 1, 110)} /^Time:/ && s != "" {printf "    %9.1f s  %s\n", $2 / 1000, s; s = ""}'
  rm -f "$WORK"/par*.log
}

psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres
$BIN migrate >/dev/null
phase "schema (server migrate)"

# Foreign keys on or to the big tables, their primary/unique constraints and other indexes:
# kept as DDL, dropped, and re-created after the load.
BIG="'leads','orders','payouts','coupons','domain_events','webhook_deliveries','webhook_attempts'"
q -At >"$WORK/fk.sql" -c "SELECT format('ALTER TABLE %s ADD CONSTRAINT %I %s;', conrelid::regclass, conname, pg_get_constraintdef(oid))
  FROM pg_constraint WHERE contype = 'f' AND (conrelid::regclass::text IN ($BIG) OR confrelid::regclass::text IN ($BIG))"
q -At >"$WORK/keys.sql" -c "SELECT conrelid::regclass::text || '|' || format('ALTER TABLE %s ADD CONSTRAINT %I %s;', conrelid::regclass, conname, pg_get_constraintdef(oid))
  FROM pg_constraint WHERE contype IN ('p', 'u') AND conrelid::regclass::text IN ($BIG)"
q -At >"$WORK/idx.sql" -c "SELECT tablename || '|' || indexdef || ';' FROM pg_indexes i WHERE tablename IN ($BIG) AND schemaname = 'public'
  AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = (quote_ident(i.indexname))::regclass)"
q -At -c "SELECT format('ALTER TABLE %s DROP CONSTRAINT %I;', conrelid::regclass, conname)
  FROM pg_constraint WHERE contype = 'f' AND (conrelid::regclass::text IN ($BIG) OR confrelid::regclass::text IN ($BIG))" >"$WORK/drop.sql"
q -At -c "SELECT format('ALTER TABLE %s DROP CONSTRAINT %I;', conrelid::regclass, conname)
  FROM pg_constraint WHERE contype IN ('p', 'u') AND conrelid::regclass::text IN ($BIG)" >>"$WORK/drop.sql"
cut -d'|' -f2- "$WORK/idx.sql" | sed -E 's/^CREATE (UNIQUE )?INDEX ([^ ]+) .*/DROP INDEX \2;/' >>"$WORK/drop.sql"
# Foreign keys first, then keys, then indexes (the file is already in that order).
q -f "$WORK/drop.sql" >/dev/null
phase "dropped $(wc -l <"$WORK/fk.sql") foreign keys, $(wc -l <"$WORK/keys.sql") keys, $(wc -l <"$WORK/idx.sql") indexes"

# Partners, endpoints, and the shared values.
q <<SQL
CREATE TABLE dataset_info (key text PRIMARY KEY, value text NOT NULL);
INSERT INTO dataset_info VALUES ('scale', '$S'), ('t0', '$T0'), ('partners', '$P'), ('big_partner', 'ds-big'),
  ('leads', '$NL'), ('big_leads', '$NB'), ('orders', '$NO'), ('big_orders', '$OB'), ('payouts', '$NP'),
  ('coupons', '$NC'), ('big_coupons', '$CB'), ('endpoints', '$((10 * P))'), ('receiver_port', '$RPORT'),
  ('pepper', 'bench-pepper');
-- Partner i's id.
CREATE FUNCTION ds_partner(i bigint) RETURNS text IMMUTABLE LANGUAGE sql AS \$\$ SELECT CASE WHEN i = 1 THEN 'ds-big' ELSE 'ds-' || i END \$\$;
-- A record's age: rank r of n, newest first.
CREATE FUNCTION ds_age(r bigint, n bigint) RETURNS interval IMMUTABLE LANGUAGE sql AS
  \$\$ SELECT make_interval(secs => 365 * 86400 * power(r::float8 / n, $EXP)) \$\$;
-- The first rank whose age is at least d days (the inverse of ds_age).
CREATE FUNCTION ds_rank(d float8, n bigint) RETURNS bigint IMMUTABLE LANGUAGE sql AS
  \$\$ SELECT ceil(n * power(d / 365, 1 / $EXP))::bigint \$\$;
INSERT INTO partners (partner_id, name, email, active, dna_access, headless_links, default_lang, enabled_langs,
  cs_subscription_active, cs_manual_override, cs_yearly_bundle, cs_services, created_at, updated_at)
SELECT ds_partner(i), 'Dataset partner ' || i, 'ops' || i || '@dataset.test', true, i % 3 = 0, true, 'en', '{en}',
  true, false, i % 2 = 0, '{}', timestamptz '$T0' - interval '400 days', timestamptz '$T0' - interval '400 days'
FROM generate_series(1, $P) i;
INSERT INTO webhook_endpoints (id, partner_id, url, events, secret, created_at, updated_at, disabled_at, disabled_reason, failing_since)
SELECT md5('ep-' || i || '-' || j)::uuid, ds_partner(i), 'https://127.0.0.1:$RPORT/hook/' || ds_partner(i) || '/' || j,
  '{lead.created,lead.enriched,order.created,payout.created}', 'whsec_dataset0123456789abcdefghijklmnopqrstuvwxyzAB',
  timestamptz '$T0' - interval '60 days', timestamptz '$T0' - interval '60 days',
  CASE WHEN i % 10 = 0 AND j = 10 THEN timestamptz '$T0' - interval '1 day' END,
  CASE WHEN i % 10 = 0 AND j = 10 THEN 'failing' END,
  CASE WHEN i % 10 = 0 AND j = 10 THEN timestamptz '$T0' - interval '31 days' END
FROM generate_series(1, $P) i, generate_series(1, 10) j;
SQL
phase "partners and endpoints"

# Every big statement is cut into transactions of about 200,000 rows (a few seconds each): a
# transaction that runs for minutes would hold back, for its whole duration, the events feed of
# every database on the cluster (its horizon is the cluster's oldest running transaction; see
# docs/operator-guide.md, "The events feed") and vacuum everywhere.
CHUNK=200000
chunks() { # sql-with-LO-and-HI total: the statement once per range of CHUNK
  local lo=1
  while [ "$lo" -le "$2" ]; do
    local hi=$((lo + CHUNK - 1)); [ "$hi" -le "$2" ] || hi=$2
    echo "${1//@LO@/$lo}" | sed "s/@HI@/$hi/g"
    lo=$((hi + 1))
  done
}
LEADS_ONE="
INSERT INTO leads (id, partner_id, sub_id, first_name, last_name, email, email_consent, phone, sms_consent,
  origin, location, question_id, is_test, test_source, created_at, updated_at)
SELECT md5('lead-' || k)::uuid, ds_partner(pi), NULLIF(k % 4, 0)::int2, 'First' || k, 'Last' || k, 'lead' || k || '@example.com',
  k % 7 <> 0, '+1 555 ' || lpad((k % 10000)::text, 4, '0'), k % 5 <> 0,
  CASE WHEN k % 10 >= 6 THEN 'headless_intake' ELSE 'managed-website' END, 'Austin, TX', NULL,
  k % 10 = 9, CASE WHEN k % 10 = 9 THEN 'simulation' END,
  timestamptz '$T0' - ds_age(r, n) - make_interval(secs => (k % 997) / 1000.0),
  timestamptz '$T0' - ds_age(r, n) - make_interval(secs => (k % 997) / 1000.0)
FROM (SELECT k, CASE WHEN k <= $NB THEN 1 ELSE 2 + (k - $NB - 1) % ($P - 1) END AS pi,
        CASE WHEN k <= $NB THEN k - 1 ELSE (k - $NB - 1) / ($P - 1) END AS r,
        CASE WHEN k <= $NB THEN $NB ELSE $NPER END AS n
      FROM generate_series(@LO@::bigint, @HI@) k) g;"
LEADS=$(chunks "$LEADS_ONE" "$NL")
COUPONS_ONE="
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
  FROM generate_series(@LO@::bigint, @HI@) c) g) h;"
OTHERS="$(chunks "$COUPONS_ONE" "$NC")
INSERT INTO orders (order_id, partner_id, sub_id, created_date, product, amount_cents, commission_cents, status,
  is_test, source, customer_name, customer_email, recorded_at)
SELECT 'DS-' || lpad(m::text, 8, '0'), ds_partner(pi), NULLIF(m % 4, 0)::int2, timestamptz '$T0' - ds_age(r, n),
  CASE m % 3 WHEN 0 THEN 'Semaglutide 1 month' WHEN 1 THEN 'DNA kit' ELSE 'Primary care visit' END,
  29900 + (m % 7) * 1000, 4550 + (m % 7) * 150, CASE WHEN m % 20 = 0 THEN 'refunded' ELSE 'shipped' END, false,
  'pharmacy', 'Customer ' || m, 'customer' || m || '@example.com', timestamptz '$T0' - ds_age(r, n)
FROM (SELECT m, CASE WHEN m <= $OB THEN 1 ELSE 2 + (m - $OB - 1) % ($P - 1) END AS pi,
        CASE WHEN m <= $OB THEN m - 1 ELSE (m - $OB - 1) / ($P - 1) END AS r,
        CASE WHEN m <= $OB THEN $OB ELSE $OPER END AS n
      FROM generate_series(1::bigint, $NO) m) g;
INSERT INTO payouts (id, partner_id, email, created_on, payout_date, amount_cents, status, receipt_url, note)
SELECT md5('payout-' || j)::uuid, ds_partner(1 + (j - 1) % $P), 'ops' || (1 + (j - 1) % $P) || '@dataset.test',
  (timestamptz '$T0' - make_interval(days => 14 * ((j - 1) / $P)::int) - interval '2 days')::date,
  (timestamptz '$T0' - make_interval(days => 14 * ((j - 1) / $P)::int))::date,
  10000 + (j % 97) * 100, CASE WHEN j <= $P THEN 'pending' ELSE 'paid' END, NULL, NULL
FROM generate_series(1::bigint, $NP) j;"
parallel "$LEADS" "$OTHERS"
phase "leads | coupons, orders, payouts (two sessions)"
# The coupons' blocks (migration 000019) as its triggers would have kept them: the load, as a
# replica, fired none.
if [ "$(q -At -c "SELECT to_regclass('coupon_blocks') IS NOT NULL")" = t ]; then
  q -c "TRUNCATE coupon_blocks" -c "INSERT INTO coupon_blocks (partner_id, created_at, n, older)
    SELECT partner_id, created_at, n, coalesce(sum(n) OVER (PARTITION BY partner_id ORDER BY created_at
      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)
    FROM (SELECT partner_id, created_at, count(*) AS n FROM coupons GROUP BY partner_id, created_at) g" \
    -c "VACUUM (ANALYZE) coupon_blocks"
  phase "coupon blocks"
fi
# And their counts (migration 000021).
if [ "$(q -At -c "SELECT to_regclass('coupon_counts') IS NOT NULL")" = t ]; then
  q -c "TRUNCATE coupon_counts, coupon_totals" -c "INSERT INTO coupon_counts (partner_id, created_at, product_slug, status, expires_at, n)
    SELECT partner_id, created_at, product_slug, status, coupon_count_expiry(status, expires_at), count(*) FROM coupons GROUP BY 1, 2, 3, 4, 5" \
    -c "INSERT INTO coupon_totals (partner_id, status, product_slug, expires_at, n)
    SELECT partner_id, status, product_slug, expires_at, sum(n)::bigint FROM coupon_counts GROUP BY 1, 2, 3, 4" \
    -c "VACUUM (ANALYZE) coupon_counts" -c "VACUUM (ANALYZE) coupon_totals"
  phase "coupon counts"
fi

# The events of the last 30 days, one transaction per day (oldest first, so the feed's order is
# the order of time), each: leads, orders and payouts whose age falls in that day.
for d in $(seq 29 -1 0); do
  cat <<SQL
INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at)
SELECT id, partner_id, kind, subject, extra::jsonb, created_at FROM (
  SELECT md5('ev-lead-' || k)::uuid AS id, ds_partner(pi) AS partner_id, 'lead.created' AS kind,
    md5('lead-' || k)::uuid::text AS subject, '{}' AS extra,
    timestamptz '$T0' - ds_age(r, n) - make_interval(secs => (k % 997) / 1000.0) AS created_at
  FROM (SELECT r + 1 AS k, 1 AS pi, r, $NB::bigint AS n FROM generate_series(ds_rank($d, $NB), ds_rank($d + 1, $NB) - 1) r
        UNION ALL
        SELECT $NB + 1 + r * ($P - 1) + (pi - 2), pi, r, $NPER FROM generate_series(ds_rank($d, $NPER), ds_rank($d + 1, $NPER) - 1) r,
          generate_series(2, $P) pi) l
  UNION ALL
  SELECT md5('ev-order-' || m)::uuid, ds_partner(pi), 'order.created', 'DS-' || lpad(m::text, 8, '0'),
    '{"source": "pharmacy"}', timestamptz '$T0' - ds_age(r, n)
  FROM (SELECT r + 1 AS m, 1 AS pi, r, $OB::bigint AS n FROM generate_series(ds_rank($d, $OB), ds_rank($d + 1, $OB) - 1) r
        UNION ALL
        SELECT $OB + 1 + r * ($P - 1) + (pi - 2), pi, r, $OPER FROM generate_series(ds_rank($d, $OPER), ds_rank($d + 1, $OPER) - 1) r,
          generate_series(2, $P) pi) o
  UNION ALL
  SELECT md5('ev-payout-' || j)::uuid, ds_partner(1 + (j - 1) % $P), 'payout.created', md5('payout-' || j)::uuid::text, '{}',
    timestamptz '$T0' - make_interval(days => 14 * ((j - 1) / $P)::int)
  FROM generate_series(1::bigint, 3 * $P) j WHERE 14 * ((j - 1) / $P) = $d
) e ORDER BY created_at;
SQL
done >"$WORK/events.sql"
{ echo "$SESSION"; cat "$WORK/events.sql"; } | q >/dev/null
phase "events: $(q -At -c 'SELECT count(*) FROM domain_events') in 30 transactions"

# Deliveries and attempts, each from the events and the endpoints of their partner (an endpoint
# disabled a day before T0 has no delivery of an event after that).
SRC="FROM domain_events e JOIN webhook_endpoints w ON w.partner_id = e.partner_id
  AND (w.disabled_at IS NULL OR e.created_at < w.disabled_at) @WINDOW@"
# Per delivery: f = failing endpoint (7 attempts, failed), else h < 3: delivered at the second attempt.
COLS="md5(e.id::text || w.id::text)::uuid AS did, w.disabled_at IS NOT NULL AS f,
  abs(hashtext(e.id::text || w.id::text)) % 100 AS h, e.created_at AS at"
DELIVERIES_ONE="
INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, attempts, next_attempt_at,
  last_status_code, last_error, created_at, delivered_at, lease_token, attempt_base, last_attempt_at)
SELECT did, wid, partner_id, eid, kind, CASE WHEN f THEN 'failed' ELSE 'delivered' END,
  CASE WHEN f THEN 7 WHEN h < 3 THEN 2 ELSE 1 END, NULL,
  CASE WHEN f THEN 500 ELSE 200 END, CASE WHEN f THEN 'HTTP 500' END, at,
  CASE WHEN f THEN NULL WHEN h < 3 THEN at + interval '30.2 s' ELSE at + interval '45 ms' END, NULL, 0,
  CASE WHEN f THEN at + interval '30720 s' WHEN h < 3 THEN at + interval '30.1 s' ELSE at + interval '15 ms' END
FROM (SELECT e.id AS eid, e.partner_id, e.kind, w.id AS wid, $COLS $SRC) x;"
ATTEMPTS_ONE="
INSERT INTO webhook_attempts (delivery_id, attempted_at, status_code, duration_ms, error)
SELECT did, at + make_interval(secs => CASE WHEN a = 1 THEN 0.015 WHEN f THEN 30 * power(4, a - 2) ELSE 30.1 END),
  CASE WHEN f THEN 500 WHEN a = 1 AND h < 3 THEN 503 ELSE 200 END, 20 + h % 40,
  CASE WHEN f THEN 'HTTP 500' WHEN a = 1 AND h < 3 THEN 'HTTP 503' END
FROM (SELECT $COLS $SRC) d, generate_series(1, CASE WHEN f THEN 7 WHEN h < 3 THEN 2 ELSE 1 END) a;"
# One transaction per 12 hours of events (the last window open-ended: a lead's created_at has up
# to a second of jitter past 30 days).
windows() { # sql
  local w cond
  for w in $(seq 0 59); do
    cond="AND e.created_at <= timestamptz '$T0' - interval '$((12 * w)) hours'"
    [ "$w" = 59 ] || cond="$cond AND e.created_at > timestamptz '$T0' - interval '$((12 * w + 12)) hours'"
    echo "${1//@WINDOW@/$cond}"
  done
}
parallel "$(windows "$DELIVERIES_ONE")" "$(windows "$ATTEMPTS_ONE")"
phase "deliveries | attempts (two sessions)"
q -c "DROP FUNCTION ds_partner(bigint), ds_age(bigint, bigint), ds_rank(float8, bigint)"

# Keys and indexes in two sessions, the two biggest tables' apart; then the foreign keys.
{ grep -h '^webhook_deliveries|' "$WORK/keys.sql" "$WORK/idx.sql" | cut -d'|' -f2-; } >"$WORK/build1.sql"
{ grep -hv '^webhook_deliveries|' "$WORK/keys.sql" "$WORK/idx.sql" | cut -d'|' -f2-; } >"$WORK/build2.sql"
parallel "$(cat "$WORK/build1.sql")" "$(cat "$WORK/build2.sql")"
phase "primary keys, unique constraints and indexes (two sessions)"
statement_times
# Foreign keys, validated (each one scan and join): the checks on webhook_deliveries in one
# session, the others in the other.
parallel "$(grep '^ALTER TABLE webhook_deliveries ' "$WORK/fk.sql" || true)" "$(grep -v '^ALTER TABLE webhook_deliveries ' "$WORK/fk.sql" || true)"
phase "foreign keys (validated, two sessions)"
statement_times
# The marker table of the claim (migration 000011) stays as the load left it: nothing is pending.
# Autovacuum settings of the hot tables (migrations/*_hot_table_autovacuum), in case the binary
# in use predates that migration.
for m in migrations/*_hot_table_autovacuum/up.sql; do if [ -f "$m" ]; then q -f "$m"; fi; done
parallel "VACUUM (ANALYZE) webhook_deliveries;" \
  "VACUUM (ANALYZE) webhook_attempts; VACUUM (ANALYZE) leads; VACUUM (ANALYZE) coupons; VACUUM (ANALYZE) domain_events; VACUUM (ANALYZE) orders; VACUUM (ANALYZE) payouts; VACUUM (ANALYZE) partners; VACUUM (ANALYZE) webhook_endpoints;"
q -c CHECKPOINT
phase "VACUUM (ANALYZE) (two sessions) and CHECKPOINT"
statement_times

# A portal user of ds-big and its token, through the server's internal API.
$BIN serve --no-migrate --role api >"$WORK/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
I="Authorization: Bearer $PARTNER_INTERNAL_TOKEN"
USER_ID=$(curl -sf -X POST "http://127.0.0.1:$PORT/internal/v1/users" -H "$I" \
  -d '{"email":"bench@dataset.test","partnerId":"ds-big","admin":false}' | sed -E 's/.*"id":"([^"]+)".*/\1/')
TOKEN=$(curl -sf -X POST "http://127.0.0.1:$PORT/internal/v1/users/$USER_ID/tokens" -H "$I" | sed -E 's/.*"token":"([^"]+)".*/\1/')
kill $SERVER; wait $SERVER 2>/dev/null || true
q -c "INSERT INTO dataset_info VALUES ('token', '$TOKEN'), ('user_id', '$USER_ID')"
phase "user and token of ds-big"
TOTAL=$(awk -v a="$T_ALL" -v b="$(date +%s.%N)" 'BEGIN {printf "%.0f", b - a}')
n=0
while IFS=$'\t' read -r label secs load; do
  n=$((n + 1))
  q -c "INSERT INTO dataset_info VALUES ('phase $(printf %02d $n): ' || \$\$$label\$\$, '$secs s, load average $load')"
done <"$WORK/phases"
q -c "INSERT INTO dataset_info VALUES ('seed_seconds', '$TOTAL')"
echo "== seeded in $TOTAL s; token of ds-big: $TOKEN (pepper bench-pepper)"

echo "== sizes on disk"
q -P pager=off -c "
SELECT c.relname AS table, to_char(c.reltuples, 'FM999,999,999') AS rows,
  pg_size_pretty(pg_table_size(c.oid)) AS heap, pg_size_pretty(pg_indexes_size(c.oid)) AS indexes,
  pg_size_pretty(pg_total_relation_size(c.oid)) AS total
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind = 'r' AND pg_total_relation_size(c.oid) > 1000000
ORDER BY pg_total_relation_size(c.oid) DESC" \
  -c "SELECT pg_size_pretty(pg_database_size('$DB')) AS database"
q -P pager=off -c "
SELECT i.relname AS index, pg_size_pretty(pg_relation_size(i.oid)) AS size FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
WHERE t.relname IN ($BIG) ORDER BY pg_relation_size(i.oid) DESC"
