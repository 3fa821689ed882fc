#!/usr/bin/env bash
# Operator lead ingest (issue 14): POST /internal/v1/leads from 32 wrk connections against
# pgbench (32 clients, -M prepared) running the same transaction the server runs for one lead,
# as PostgreSQL's own log shows it (log_statement=all for one request, printed below).
# BENCH_COMPARE=/path/to/an/older/partner-server measures that binary too, in the same run.
# Loopback only; stops by itself.
set -euo pipefail
cd "$(dirname "$0")/.."
export PGHOST=127.0.0.1 PGPORT=5432 PGUSER=postgres
DB=${BENCH_DB:-pp_bench_ingest}
PORT=${BENCH_PORT:-18093}
DURATION=${BENCH_DURATION:-15s}
CONNS=32
export DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB"
export PARTNER_BIND="127.0.0.1:$PORT" PARTNER_TOKEN_PEPPER=bench-pepper
export PARTNER_INTERNAL_TOKEN=bench-internal-token-0123456789abcdef RUST_LOG=warn
export PARTNER_RATE_LIMIT=1000000000/1s PARTNER_DB_POOL_SIZE=${BENCH_POOL:-32}
PGLOG=${BENCH_PGLOG:-/var/log/postgresql/postgresql-15-main.log}
command -v wrk >/dev/null || { apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }; }
[ -n "${BENCH_BIN:-}" ] || cargo build --release -q -p partner-server
BIN=${BENCH_BIN:-${CARGO_TARGET_DIR:-target}/release/partner-server}

psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres
$BIN migrate
psql -q "$DB" -c "
  INSERT INTO partners (partner_id, name, email, active, dna_access, headless_links, default_lang, enabled_langs,
    cs_subscription_active, cs_manual_override, cs_yearly_bundle, cs_services, created_at, updated_at)
  VALUES ('ingest', 'Ingest', 'ops@ingest.test', true, false, true, 'en', '{en}', false, false, false, '{}', now(), now())"

SERVER=
start_server() { "$1" serve --no-migrate --role api & SERVER=$!
  for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.2; done; }
stop_server() { kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; SERVER=; }
trap 'stop_server; psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres' EXIT
BODY='{"partnerId":"ingest","firstName":"Ann","lastName":"Lee","email":"ann@example.com","emailConsent":true,"phone":"+1 555 0100","smsConsent":true,"origin":"managed-website","location":"Austin, TX"}'
post() { curl -sf -o /dev/null -X POST "http://127.0.0.1:$PORT/internal/v1/leads" -H "Authorization: Bearer $PARTNER_INTERNAL_TOKEN" -d "$BODY"; }

# What the server sends for one lead, from PostgreSQL's log.
if [ -r "$PGLOG" ]; then
  psql -qc "ALTER DATABASE $DB SET log_statement = 'all'" postgres
  start_server "$BIN"; post; lines=$(wc -l <"$PGLOG"); post; sleep 0.3
  echo "== the statements of one ingest, from PostgreSQL's log"
  tail -n +"$((lines + 1))" "$PGLOG" | grep -E "$DB (LOG|DETAIL)" | sed -E 's/^.*(LOG|DETAIL): +//' | cut -c1-220
  stop_server
  psql -qc "ALTER DATABASE $DB RESET log_statement" postgres
fi

cat > /tmp/bench-ingest.lua <<LUA
wrk.method = "POST"
wrk.body = '$BODY'
wrk.headers["Authorization"] = "Bearer $PARTNER_INTERNAL_TOKEN"
wrk.headers["Content-Type"] = "application/json"
LUA
# The same transaction, parameters filled in (the lead id and the instant come from the server).
cat > /tmp/bench-ingest.sql <<'SQL'
BEGIN;
INSERT INTO leads (id, partner_id, sub_id, first_name, last_name, email, email_consent, phone, sms_consent, origin, location, question_id, is_test, test_source, created_at, updated_at) SELECT gen_random_uuid(), 'ingest', NULL, 'Ann', 'Lee', 'ann@example.com', true, '+1 555 0100', true, 'managed-website', 'Austin, TX', NULL, false, NULL, now(), now() WHERE EXISTS (SELECT 1 FROM partners WHERE partner_id = 'ingest');
WITH ev AS ( INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at) VALUES (gen_random_uuid(), 'ingest', 'lead.created', gen_random_uuid()::text, '{}'::jsonb, now()) RETURNING id) INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, attempts, next_attempt_at, created_at) SELECT gen_random_uuid(), w.id, w.partner_id, ev.id, 'lead.created', 'pending', 0, now() + make_interval(secs => CASE WHEN true THEN COALESCE(w.lead_created_delay_seconds, 0) ELSE 0 END), now() FROM webhook_endpoints w, ev WHERE w.partner_id = 'ingest' AND 'lead.created' = ANY (w.events) AND w.disabled_at IS NULL;
COMMIT;
SQL

echo "== machine: $(nproc) cores, $(uname -r); load average $(cut -d' ' -f1-3 /proc/loadavg); $CONNS connections, $DURATION each"
declare -A RATE
measure() { # key binary
  start_server "$2"
  wrk -t2 -c$CONNS -d3s -s /tmp/bench-ingest.lua "http://127.0.0.1:$PORT/internal/v1/leads" >/dev/null
  local out; out=$(wrk -t2 -c$CONNS -d"$DURATION" --latency -s /tmp/bench-ingest.lua "http://127.0.0.1:$PORT/internal/v1/leads")
  RATE[$1]=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  local non2xx; non2xx=$(echo "$out" | awk '/Non-2xx/ {print $5}')
  printf '%-24s %10s leads/s   p50 %8s   p99 %8s   non-2xx %s\n' "server ($1)" "${RATE[$1]}" \
    "$(echo "$out" | awk '$1 == "50%" {print $2}')" "$(echo "$out" | awk '$1 == "99%" {print $2}')" "${non2xx:-0}"
  stop_server
}
measure after "$BIN"
[ -z "${BENCH_COMPARE:-}" ] || measure before "$BENCH_COMPARE"
TPS=$(pgbench -n -M prepared -c $CONNS -j 2 -T "${DURATION%s}" -f /tmp/bench-ingest.sql "$DB" 2>/dev/null | awk '/^tps/ {print $3}')
printf '%-24s %10s tps\n' "pgbench, same transaction" "$TPS"
for k in after ${BENCH_COMPARE:+before}; do
  echo "ratio server ($k) / pgbench: $(awk -v a="${RATE[$k]}" -v b="$TPS" 'BEGIN {printf "%.2f", a / b}') (target >= 0.6)"
done
