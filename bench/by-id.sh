#!/usr/bin/env bash
# One record by id (extensions.md §8.2; issue 25: at 64 connections >= 0.8 x pgbench of the
# request's own SQL, p99 <= 25 ms). Seeds 1,000 partners; the big one holds 200,000 leads and
# 100,000 orders (the others 200 leads each). Measures with wrk at 64 connections
# GET /api/v1/leads/{id} and GET /api/v1/orders/{orderId} of the big partner against pgbench at
# 64 clients running what the server sends for each: the token lookup and the record's statement
# (its partner taken from the token in SQL), pipelined by the server on one connection, two
# statements of one pgbench transaction here. Rounds interleave wrk and pgbench (BENCH_ROUNDS,
# default 3; medians). Loopback only; stops by itself.
set -euo pipefail
cd "$(dirname "$0")/.."

PGHOST=127.0.0.1; PGPORT=5432; PGUSER=postgres
export PGHOST PGPORT PGUSER
DB=${BENCH_DB:-pp_bench_by_id}
PORT=${BENCH_PORT:-18097}
DURATION=${BENCH_DURATION:-8s}
ROUNDS=${BENCH_ROUNDS:-3}
CONNS=64
BIG=bench-big
export DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB"
export PARTNER_BIND="127.0.0.1:$PORT" PARTNER_TOKEN_PEPPER=bench-pepper PARTNER_INTERNAL_TOKEN=bench-internal-token-0123456789abcdef
export PARTNER_RATE_LIMIT=1000000000/1s RUST_LOG=warn PARTNER_DB_POOL_SIZE=${BENCH_POOL:-16}
unset PARTNER_REDIS_URL PARTNER_METRICS_BIND PARTNER_INTERNAL_BIND

command -v wrk >/dev/null || { apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }; }
command -v pgbench >/dev/null || { echo "pgbench is missing (it ships with the PostgreSQL server package)" >&2; exit 1; }
[ -n "${BENCH_BIN:-}" ] || cargo build --release -q -p partner-server
BIN=${BENCH_BIN:-${CARGO_TARGET_DIR:-target}/release/partner-server}

echo "== seeding $DB"
psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres
$BIN migrate
psql -q "$DB" <<SQL
INSERT INTO partners (partner_id, name, email, active, dna_access, headless_links, default_lang, enabled_langs,
  cs_subscription_active, cs_manual_override, cs_yearly_bundle, cs_services, created_at, updated_at)
SELECT CASE WHEN g = 1 THEN '$BIG' ELSE 'bench-' || g END, 'Bench ' || g, 'ops' || g || '@bench.test', true, false, true,
  'en', '{en}', false, false, false, '{}', now(), now()
FROM generate_series(1, 1000) g;
INSERT INTO leads (id, partner_id, first_name, last_name, email, email_consent, phone, sms_consent, origin, location,
  is_test, created_at, updated_at)
SELECT gen_random_uuid(), CASE WHEN g <= 200000 THEN '$BIG' ELSE 'bench-' || (2 + g % 999) END, 'Ann', 'Lee',
  'ann' || g || '@example.com', true, '+1 555 0100', true, 'managed-website', 'Austin, TX', false,
  timestamptz '2026-11-01' - make_interval(mins => g), now()
FROM generate_series(1, 400000) g;
INSERT INTO orders (order_id, partner_id, sub_id, created_date, product, amount_cents, commission_cents, status,
  is_test, source, customer_name, customer_email, recorded_at)
SELECT 'ORD-' || lpad(g::text, 7, '0'), CASE WHEN g <= 100000 THEN '$BIG' ELSE 'bench-' || (2 + g % 999) END, NULL,
  timestamptz '2026-11-01' - make_interval(mins => g), 'Semaglutide 1 month', 29900, 4550, 'shipped', false,
  'pharmacy', 'Ann Lee', 'ann@example.com', now()
FROM generate_series(1, 200000) g;
VACUUM (ANALYZE);
CHECKPOINT;
SQL

SERVER=
"$BIN" serve --no-migrate --role api &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true; psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres' EXIT
for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.2; done

I="Authorization: Bearer $PARTNER_INTERNAL_TOKEN"
USER_ID=$(curl -sf -X POST "http://127.0.0.1:$PORT/internal/v1/users" -H "$I" \
  -d "{\"email\":\"bench@bench.test\",\"partnerId\":\"$BIG\",\"admin\":false}" | sed -E 's/.*"id":"([^"]+)".*/\1/')
TOKEN=$(curl -sf -X POST "http://127.0.0.1:$PORT/internal/v1/users/$USER_ID/tokens" -H "$I" | sed -E 's/.*"token":"([^"]+)".*/\1/')
A="Authorization: Bearer $TOKEN"
# A record halfway into the big partner's history.
LEAD=$(psql -Atq "$DB" -c "SELECT id FROM leads WHERE partner_id = '$BIG' ORDER BY created_at OFFSET 100000 LIMIT 1")
ORDER=ORD-0050000
curl -sf "http://127.0.0.1:$PORT/api/v1/leads/$LEAD" -H "$A" | grep -q "\"id\":\"$LEAD\"" || { echo "lead $LEAD not read" >&2; exit 1; }
curl -sf "http://127.0.0.1:$PORT/api/v1/orders/$ORDER" -H "$A" | grep -q "$ORDER" || { echo "order $ORDER not read" >&2; exit 1; }

# The SQL the server sends (crates/partner-postgres/src/tokens.rs lookup and TokenPartner;
# leads.rs and orders.rs `*_for_token`), parameters filled in.
HASH=$(python3 -c 'import hmac, hashlib, sys; print(hmac.new(sys.argv[1].encode(), sys.argv[2].encode(), hashlib.sha256).hexdigest())' "$PARTNER_TOKEN_PEPPER" "$TOKEN")
NOW_TS=$(psql -Atq "$DB" -c "SELECT now()")
AUTH_SQL="SELECT t.id, t.token_hash, t.user_id, u.deleted_at IS NOT NULL, u.partner_id, p.active, p.dna_access, u.admin, t.expires_at, t.revoked_at, t.last_used_at
FROM api_tokens t JOIN portal_users u ON u.id = t.user_id JOIN partners p ON p.partner_id = u.partner_id WHERE t.token_hash = '\\x$HASH' LIMIT 1;"
PARTNER_OF="(SELECT u.partner_id FROM api_tokens t JOIN portal_users u ON u.id = t.user_id JOIN partners p ON p.partner_id = u.partner_id WHERE t.token_hash = '\\x$HASH' AND t.revoked_at IS NULL AND u.deleted_at IS NULL AND p.active AND (t.expires_at IS NULL OR t.expires_at > '$NOW_TS'))"
{ echo "$AUTH_SQL"; echo "SELECT * FROM leads WHERE id = '$LEAD' AND partner_id = $PARTNER_OF;"; } > /tmp/bench-by-id-lead.sql
{ echo "$AUTH_SQL"; echo "SELECT * FROM orders WHERE order_id = '$ORDER' AND partner_id = $PARTNER_OF;"; } > /tmp/bench-by-id-order.sql

. bench/ratio-lib.sh  # the cd above put us at the top of the tree

echo "== machine: $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg); PostgreSQL $(psql -Atqc 'show server_version' postgres); $CONNS connections, pool $PARTNER_DB_POOL_SIZE, $DURATION each, $ROUNDS rounds"
wrk -t2 -c$CONNS -d3s -H "$A" "http://127.0.0.1:$PORT/api/v1/leads/$LEAD" >/dev/null
wrk -t2 -c$CONNS -d3s -H "$A" "http://127.0.0.1:$PORT/api/v1/orders/$ORDER" >/dev/null
for r in $(seq 1 "$ROUNDS"); do
  echo "round $r"
  run_wrk lead "http://127.0.0.1:$PORT/api/v1/leads/$LEAD"
  run_pgbench lead /tmp/bench-by-id-lead.sql
  run_wrk order "http://127.0.0.1:$PORT/api/v1/orders/$ORDER"
  run_pgbench order /tmp/bench-by-id-order.sql
done
echo "== medians"
for k in lead order; do
  rps=$(echo "${RPS[$k]}" | median); tps=$(echo "${TPS[$k]}" | median); p99=$(echo "${P99[$k]}" | median)
  printf '%-5s server %10s req/s   pgbench %10s tps   ratio %s   p99 %s\n' "$k" "$rps" "$tps" \
    "$(awk -v a="$rps" -v b="$tps" 'BEGIN {printf "%.2f", a / b}')" "$p99"
done
