#!/usr/bin/env bash
# Events feed benchmark (extensions.md §8.1): seeds 200,000 events (`payout.created`, each with
# its payout) across 1,000 partners, one holding 100,000, then measures with wrk at 64
# connections (a) a poll at the end of the feed (an empty page: the steady state of a poller,
# one round trip) and (b) a full page of 50 events halfway into the big partner's feed (the page,
# then its records: two round trips), each against pgbench at 64 clients running the same SQL the
# server sends for it (the token lookup and the page statement, plus the records' query for (b)).
# Prints the server/pgbench ratios and p99. Rounds interleave wrk and pgbench (BENCH_ROUNDS,
# default 3; medians). Target (issue 25): ratio >= 0.8, p99 <= 25 ms; beside the server's p99 the
# script prints pgbench's own p99 of the same SQL in the same round, the reference on a noisy
# machine. BENCH_COMPARE=/path/to/an/older/partner-server measures that binary too, in the same
# rounds (its own port, the same database and token). Loopback only; stops by itself.
set -euo pipefail
cd "$(dirname "$0")/.."

PGHOST=127.0.0.1; PGPORT=5432; PGUSER=postgres
export PGHOST PGPORT PGUSER
DB=${BENCH_DB:-pp_bench_feed}
PORT=${BENCH_PORT:-18093}
DURATION=${BENCH_DURATION:-8s}
ROUNDS=${BENCH_ROUNDS:-3}
CONNS=64
BIG=bench-big
export DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB"
export PARTNER_BIND="127.0.0.1:$PORT" PARTNER_TOKEN_PEPPER=bench-pepper PARTNER_INTERNAL_TOKEN=bench-internal-token-0123456789abcdef
export PARTNER_RATE_LIMIT=1000000000/1s RUST_LOG=warn PARTNER_DB_POOL_SIZE=${BENCH_POOL:-32}

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
-- 100,000 payouts (and their events) for the big partner, 100,000 over the other 999; the
-- events are written below in 100 transactions of 2,000 (txid by the column's default).
CREATE TEMP TABLE p AS
SELECT gen_random_uuid() AS id, CASE WHEN g <= 100000 THEN '$BIG' ELSE 'bench-' || (2 + (g % 999)) END AS partner_id,
  g, timestamptz '2026-11-01 00:00:00+00' + make_interval(secs => g * 2) AS at
FROM generate_series(1, 200000) g;
INSERT INTO payouts (id, partner_id, email, created_on, payout_date, amount_cents, status, receipt_url, note)
SELECT id, partner_id, 'ops@bench.test', at::date, at::date, 1000 + g % 5000, 'paid', NULL, NULL FROM p;
SQL
psql -q "$DB" -c "CREATE UNLOGGED TABLE bench_order AS
  SELECT id, partner_id, created_on, row_number() OVER (ORDER BY created_on, id) AS rn FROM payouts" \
  -c "CREATE INDEX ON bench_order (rn)"
for batch in $(seq 0 99); do
  psql -q "$DB" -c "INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at)
    SELECT gen_random_uuid(), partner_id, 'payout.created', id::text, '{}', created_on
    FROM bench_order WHERE rn > $((batch * 2000)) AND rn <= $((batch * 2000 + 2000)) ORDER BY rn"
done
psql -q "$DB" -c 'DROP TABLE bench_order' -c 'VACUUM (ANALYZE)' -c 'CHECKPOINT'

SERVER=; OLD=
"$BIN" serve --no-migrate --role api &
SERVER=$!
trap 'kill $SERVER $OLD 2>/dev/null || true; wait $SERVER $OLD 2>/dev/null || true' EXIT
for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.2; done
OLD_PORT=$((PORT + 1))
if [ -n "${BENCH_COMPARE:-}" ]; then
  PARTNER_BIND="127.0.0.1:$OLD_PORT" "$BENCH_COMPARE" serve --no-migrate --role api &
  OLD=$!
  for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$OLD_PORT/healthz" >/dev/null && break; sleep 0.2; done
fi

I="Authorization: Bearer $PARTNER_INTERNAL_TOKEN"
USER_ID=$(curl -sf -X POST "http://127.0.0.1:$PORT/internal/v1/users" -H "$I" \
  -d "{\"email\":\"bench@bench.test\",\"partnerId\":\"$BIG\",\"admin\":false}" | sed -E 's/.*"id":"([^"]+)".*/\1/')
TOKEN=$(curl -sf -X POST "http://127.0.0.1:$PORT/internal/v1/users/$USER_ID/tokens" -H "$I" | sed -E 's/.*"token":"([^"]+)".*/\1/')
A="Authorization: Bearer $TOKEN"
cursor_of() { sed -E 's/.*"nextCursor":"([^"]+)".*/\1/'; }
END_CURSOR=$(curl -sf "http://127.0.0.1:$PORT/api/v1/events?since=2999-01-01T00:00:00.000Z" -H "$A" | cursor_of)
# Halfway: the position of the big partner's 50,000th event, as a cursor the server issued.
MID=$(psql -Atq "$DB" -c "SELECT txid, seq FROM domain_events WHERE partner_id = '$BIG' ORDER BY txid, seq OFFSET 49999 LIMIT 1")
MID_TXID=${MID%|*}; MID_SEQ=${MID#*|}
MID_CURSOR=$(curl -sf "http://127.0.0.1:$PORT/api/v1/events?limit=200" -H "$A" | cursor_of)
for _ in $(seq 1 249); do
  MID_CURSOR=$(curl -sf "http://127.0.0.1:$PORT/api/v1/events?limit=200&cursor=$MID_CURSOR" -H "$A" | cursor_of)
done
n=$(curl -sf "http://127.0.0.1:$PORT/api/v1/events?cursor=$MID_CURSOR" -H "$A" | grep -o '"event":"payout.created"' | wc -l)
[ "$n" = 50 ] || { echo "the middle page has $n events, not 50" >&2; exit 1; }
n=$(curl -sf "http://127.0.0.1:$PORT/api/v1/events?cursor=$END_CURSOR" -H "$A" | grep -o '"data":\[\]' | wc -l)
[ "$n" = 1 ] || { echo "the poll at the end of the feed is not an empty page" >&2; exit 1; }

# The SQL the server sends, with the parameters filled in: the token lookup, the page statement
# (crates/partner-postgres/src/feed.rs, PAGE_SQL), and for a page of events its payouts.
HASH=$(python3 -c 'import hmac, hashlib, sys; print(hmac.new(sys.argv[1].encode(), sys.argv[2].encode(), hashlib.sha256).hexdigest())' "$PARTNER_TOKEN_PEPPER" "$TOKEN")
NOW_TS=$(psql -Atq "$DB" -c "SELECT now()")
AUTH_SQL="SELECT t.id, t.token_hash, t.user_id, u.deleted_at IS NOT NULL, u.partner_id, p.active, p.dna_access, u.admin, t.expires_at, t.revoked_at, t.last_used_at
FROM api_tokens t JOIN portal_users u ON u.id = t.user_id JOIN partners p ON p.partner_id = u.partner_id WHERE t.token_hash = '\\x$HASH' LIMIT 1;"
page_sql() { # txid seq
  cat <<SQL
WITH h AS MATERIALIZED (SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS horizon, (SELECT u.partner_id FROM api_tokens t JOIN portal_users u ON u.id = t.user_id JOIN partners p ON p.partner_id = u.partner_id WHERE t.token_hash = '\\x$HASH' AND t.revoked_at IS NULL AND u.deleted_at IS NULL AND p.active AND (t.expires_at IS NULL OR t.expires_at > '$NOW_TS')) AS partner_id) SELECT h.horizon, f.txid AS pruned_txid, f.seq AS pruned_seq, e.id, e.kind, e.subject, e.extra::text AS extra, e.created_at, e.txid, e.seq FROM h LEFT JOIN event_feed_pruned f ON f.partner_id = h.partner_id LEFT JOIN LATERAL (SELECT d.id, d.kind, d.subject, d.extra, d.created_at, d.txid, d.seq FROM domain_events d WHERE d.partner_id = h.partner_id AND d.kind <> 'ping' AND d.txid < h.horizon AND (d.txid, d.seq) > ($1, $2) AND d.kind = ANY ('{lead.created,lead.enriched,order.created,payout.created}') AND d.created_at >= COALESCE(NULL, '-infinity'::timestamptz) ORDER BY d.txid, d.seq LIMIT 51) e ON true ORDER BY e.txid, e.seq;
SQL
}
END_POS=$(psql -Atq "$DB" -c "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint - 1")
{ echo "$AUTH_SQL"; page_sql "$END_POS" 9223372036854775807; } > /tmp/bench-feed-end.sql
IDS=$(psql -Atq "$DB" -c "SELECT string_agg(subject, ',') FROM (SELECT subject FROM domain_events WHERE partner_id = '$BIG'
  AND (txid, seq) > ($MID_TXID, $MID_SEQ) ORDER BY txid, seq LIMIT 50) s")
{ echo "$AUTH_SQL"; page_sql "$MID_TXID" "$MID_SEQ";
  echo "SELECT id, partner_id, email, created_on, payout_date, amount_cents, status, receipt_url, note FROM payouts WHERE id = ANY ('{$IDS}'::uuid[]);"; } > /tmp/bench-feed-mid.sql

. bench/ratio-lib.sh  # the cd above put us at the top of the tree

echo "== machine: $(nproc) cores; PostgreSQL $(psql -Atqc 'show server_version' postgres); $CONNS connections, $DURATION each, $ROUNDS rounds"
wrk -t2 -c$CONNS -d3s -H "$A" "http://127.0.0.1:$PORT/api/v1/events?cursor=$END_CURSOR" >/dev/null
wrk -t2 -c$CONNS -d3s -H "$A" "http://127.0.0.1:$PORT/api/v1/events?cursor=$MID_CURSOR" >/dev/null
[ -z "$OLD" ] || wrk -t2 -c$CONNS -d3s -H "$A" "http://127.0.0.1:$OLD_PORT/api/v1/events?cursor=$MID_CURSOR" >/dev/null
echo "== load average before the rounds: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$ROUNDS"); do
  echo "round $r (load average $(cut -d' ' -f1-3 /proc/loadavg))"
  run_wrk end "http://127.0.0.1:$PORT/api/v1/events?cursor=$END_CURSOR"
  [ -z "$OLD" ] || run_wrk end-old "http://127.0.0.1:$OLD_PORT/api/v1/events?cursor=$END_CURSOR"
  run_pgbench end /tmp/bench-feed-end.sql
  run_wrk mid "http://127.0.0.1:$PORT/api/v1/events?cursor=$MID_CURSOR"
  [ -z "$OLD" ] || run_wrk mid-old "http://127.0.0.1:$OLD_PORT/api/v1/events?cursor=$MID_CURSOR"
  run_pgbench mid /tmp/bench-feed-mid.sql
done
echo "== medians (load average $(cut -d' ' -f1-3 /proc/loadavg))"
for k in end ${OLD:+end-old} mid ${OLD:+mid-old}; do
  rps=$(echo "${RPS[$k]}" | median); p99=$(echo "${P99[$k]}" | median)
  tps=$(echo "${TPS[${k%-old}]}" | median); pgp99=$(echo "${PGP99[${k%-old}]}" | median)
  printf '%-7s server %10s req/s   pgbench %10s tps   ratio %s   p99 %s (pgbench p99 %sms)\n' "$k" "$rps" "$tps" \
    "$(awk -v a="$rps" -v b="$tps" 'BEGIN {printf "%.2f", a / b}')" "$p99" "$pgp99"
done
kill $SERVER $OLD 2>/dev/null; wait $SERVER $OLD 2>/dev/null || true; SERVER=; OLD=
psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres
