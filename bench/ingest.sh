#!/usr/bin/env bash
# Operator lead ingest (issue 14): POST /internal/v1/leads from 32 wrk connections against
# pgbench (32 clients, -M prepared) running the same transaction the server runs for one lead,
# as PostgreSQL's own log shows it (log_statement=all for one request, printed below).
# BENCH_COMPARE=/path/to/an/older/partner-server measures that binary too, in the same run.
# BENCH_DATASET=<database of bench/dataset.sh> ingests for its big partner (`ds-big`, 10
# endpoints: each lead writes its event and 10 deliveries) into that database instead of a fresh
# one, nothing dropped (the leads stay), and pgbench runs the transaction twice, with a random
# (v4) lead id and with a time-ordered one (`uuid_v7()`), to show what the id's order costs on
# that table. BENCH_ROUNDS (default 1) alternates server and pgbench runs; medians are printed.
# BENCH_PROFILE=1 adds, per run: blocks read into shared buffers per lead (the database's, and the
# four relations reading most), the WAL's full-page images and bytes per lead (cluster-wide:
# other sessions' writes count too), and the wait events of the database's backends sampled
# every 50 ms.
# Loopback only; stops by itself.
set -euo pipefail
cd "$(dirname "$0")/.."
export PGHOST=127.0.0.1 PGPORT=5432 PGUSER=postgres
DB=${BENCH_DATASET:-${BENCH_DB:-pp_bench_ingest}}
ROUNDS=${BENCH_ROUNDS:-1}
WORK=$(mktemp -d /tmp/pp-ingest.XXXXXX)
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

if [ -n "${BENCH_DATASET:-}" ]; then
  export PARTNER_WEBHOOK_RETENTION=90d PARTNER_EVENT_RETENTION=90d
  PARTNER=$(psql -Atq "$DB" -c "SELECT value FROM dataset_info WHERE key = 'big_partner'")
else
PARTNER=ingest
psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres
$BIN migrate
psql -q "$DB" -c "
  INSERT INTO partners (partner_id, name, email, active, dna_access, headless_links, default_lang, enabled_langs,
    cs_subscription_active, cs_manual_override, cs_yearly_bundle, cs_services, created_at, updated_at)
  VALUES ('ingest', 'Ingest', 'ops@ingest.test', true, false, true, 'en', '{en}', false, false, false, '{}', now(), now())"
fi

T_START=$(psql -Atq "$DB" -c "SELECT now()")
SERVER=
start_server() { "$1" serve --no-migrate --role api & SERVER=$!
  for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.2; done; }
stop_server() { kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; SERVER=; }
# On a dataset the leads and events stay, but the deliveries they queued (no worker runs here) are
# deleted at the end, so that a later delivery benchmark on the database has no backlog.
cleanup() {
  stop_server; rm -rf "$WORK"
  if [ -n "${BENCH_DATASET:-}" ]; then
    psql -q "$DB" -c "DELETE FROM webhook_deliveries WHERE partner_id = '$PARTNER' AND status = 'pending' AND created_at >= '$T_START'" \
      -c "VACUUM (ANALYZE) webhook_deliveries"
  else
    psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres
  fi
}
trap cleanup EXIT
BODY='{"partnerId":"'$PARTNER'","firstName":"Ann","lastName":"Lee","email":"ann@example.com","emailConsent":true,"phone":"+1 555 0100","smsConsent":true,"origin":"managed-website","location":"Austin, TX"}'
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

cat > "$WORK/bench-ingest.lua" <<LUA
wrk.method = "POST"
wrk.body = '$BODY'
wrk.headers["Authorization"] = "Bearer $PARTNER_INTERNAL_TOKEN"
wrk.headers["Content-Type"] = "application/json"
LUA
# The same transaction, parameters filled in (the lead id and the instant come from the server;
# the outbox's ids from `uuid_v7()` where the schema has it, as the server writes them).
OUTBOX_ID=$(psql -Atq "$DB" -c "SELECT CASE WHEN to_regproc('uuid_v7') IS NULL THEN 'gen_random_uuid()' ELSE 'uuid_v7()' END")
ingest_sql() { # the lead id's SQL
  cat <<SQL
BEGIN;
INSERT INTO leads (id, partner_id, sub_id, first_name, last_name, email, email_consent, phone, sms_consent, origin, location, question_id, is_test, test_source, created_at, updated_at) SELECT $1, '$PARTNER', NULL, 'Ann', 'Lee', 'ann@example.com', true, '+1 555 0100', true, 'managed-website', 'Austin, TX', NULL, false, NULL, now(), now() WHERE EXISTS (SELECT 1 FROM partners WHERE partner_id = '$PARTNER');
WITH ev AS ( INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at) VALUES ($OUTBOX_ID, '$PARTNER', 'lead.created', gen_random_uuid()::text, '{}'::jsonb, now()) RETURNING id) INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, attempts, next_attempt_at, created_at) SELECT $OUTBOX_ID, w.id, w.partner_id, ev.id, 'lead.created', 'pending', 0, now() + make_interval(secs => CASE WHEN true THEN COALESCE(w.lead_created_delay_seconds, 0) ELSE 0 END), now() FROM webhook_endpoints w, ev WHERE w.partner_id = '$PARTNER' AND 'lead.created' = ANY (w.events) AND w.disabled_at IS NULL;
COMMIT;
SQL
}
ingest_sql 'gen_random_uuid()' > $WORK/bench-ingest.sql
[ "$OUTBOX_ID" = 'gen_random_uuid()' ] || ingest_sql 'uuid_v7()' > $WORK/bench-ingest-v7.sql

echo "== $DB (partner $PARTNER, $(psql -Atq "$DB" -c "SELECT reltuples::bigint FROM pg_class WHERE relname = 'leads'") leads); machine: $(nproc) cores, $(uname -r); load average $(cut -d' ' -f1-3 /proc/loadavg); $CONNS connections, $DURATION each, $ROUNDS rounds"
declare -A RATE
median() { sort -g | awk '{a[NR] = $1} END {if (NR % 2) print a[(NR + 1) / 2]; else printf "%.1f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
snap() { # the counters BENCH_PROFILE compares, to $WORK/snap.$1
  psql -AtqF' ' "$DB" -c "SELECT '#db', blks_read FROM pg_stat_database WHERE datname = current_database()
    UNION ALL SELECT '#wal', wal_fpi FROM pg_stat_wal UNION ALL SELECT '#walbytes', wal_bytes FROM pg_stat_wal
    UNION ALL SELECT '#leads', count(*) FROM leads WHERE partner_id = '$PARTNER' AND created_at >= '$T_START'
    UNION ALL SELECT relname, COALESCE(heap_blks_read, 0) FROM pg_statio_user_tables
    UNION ALL SELECT indexrelname, idx_blks_read FROM pg_statio_user_indexes" >"$WORK/snap.$1"
}
profile_start() {
  [ -n "${BENCH_PROFILE:-}" ] || return 0
  snap a
  ( while :; do psql -Atq "$DB" -c "SELECT COALESCE(wait_event_type || ':' || wait_event, 'CPU') FROM pg_stat_activity
      WHERE datname = current_database() AND state = 'active' AND pid <> pg_backend_pid()"; sleep 0.05; done >"$WORK/waits" 2>/dev/null ) &
  SAMPLER=$!
}
profile_end() {
  : >"$WORK/prof"
  [ -n "${BENCH_PROFILE:-}" ] || return 0
  {
  kill "$SAMPLER" 2>/dev/null; wait "$SAMPLER" 2>/dev/null || true
  snap b
  awk 'NR == FNR {a[$1] = $2; next} {d[$1] = $2 - a[$1]} END {
    n = d["#leads"]; if (n < 1) n = 1
    printf "    per lead (%d leads): blocks read %.2f, WAL full-page images %.2f, WAL %.0f bytes (cluster-wide); most read:", n, d["#db"] / n, d["#wal"] / n, d["#walbytes"] / n
    delete d["#db"]; delete d["#wal"]; delete d["#walbytes"]; delete d["#leads"]
    for (i = 0; i < 4; i++) { best = ""; for (k in d) if (best == "" || d[k] > d[best]) best = k
      if (best == "" || d[best] <= 0) break; printf " %s %.2f", best, d[best] / n; delete d[best] }
    print "" }' "$WORK/snap.a" "$WORK/snap.b"
  printf '    wait events (share of samples of active backends):'
  sort "$WORK/waits" | uniq -c | sort -rn | head -6 | awk -v t="$(wc -l <"$WORK/waits")" '{printf " %s %.0f%%", $2, 100 * $1 / t}'
  echo
  } >"$WORK/prof"
}
measure() { # key binary
  start_server "$2"
  wrk -t2 -c$CONNS -d3s -s $WORK/bench-ingest.lua "http://127.0.0.1:$PORT/internal/v1/leads" >/dev/null
  profile_start
  local out; out=$(wrk -t2 -c$CONNS -d"$DURATION" --latency -s $WORK/bench-ingest.lua "http://127.0.0.1:$PORT/internal/v1/leads")
  profile_end
  local rate; rate=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  RATE[$1]="${RATE[$1]:-} $rate"
  local non2xx; non2xx=$(echo "$out" | awk '/Non-2xx/ {print $5}')
  printf '%-32s %10s leads/s   p50 %8s   p99 %8s   non-2xx %s   load %s\n' "server ($1)" "$rate" \
    "$(echo "$out" | awk '$1 == "50%" {print $2}')" "$(echo "$out" | awk '$1 == "99%" {print $2}')" "${non2xx:-0}" "$(cut -d' ' -f1 /proc/loadavg)"
  cat "$WORK/prof"
  stop_server
}
bench_sql() { # key file
  profile_start
  local tps; tps=$(pgbench -n -M prepared -c $CONNS -j 2 -T "${DURATION%s}" -f "$2" "$DB" 2>/dev/null | awk '/^tps/ {print $3}')
  profile_end
  RATE[$1]="${RATE[$1]:-} $tps"
  printf '%-32s %10s tps   load %s\n' "pgbench ($1)" "$tps" "$(cut -d' ' -f1 /proc/loadavg)"
  cat "$WORK/prof"
}
for r in $(seq 1 "$ROUNDS"); do
  measure after "$BIN"
  [ -z "${BENCH_COMPARE:-}" ] || measure before "$BENCH_COMPARE"
  bench_sql pgbench $WORK/bench-ingest.sql
  [ ! -f $WORK/bench-ingest-v7.sql ] || [ -z "${BENCH_DATASET:-}" ] || bench_sql pgbench-v7 $WORK/bench-ingest-v7.sql
done
TPS=$(echo "${RATE[pgbench]}" | tr ' ' '\n' | grep . | median)
echo "== medians of $ROUNDS rounds"
for k in after ${BENCH_COMPARE:+before} pgbench-v7; do
  [ -n "${RATE[$k]:-}" ] || continue
  m=$(echo "${RATE[$k]}" | tr ' ' '\n' | grep . | median)
  echo "$k: $m; ratio to pgbench (random lead ids) $(awk -v a="$m" -v b="$TPS" 'BEGIN {printf "%.2f", a / b}') (target >= 0.6)"
done
echo "pgbench (random lead ids): $TPS tps"
