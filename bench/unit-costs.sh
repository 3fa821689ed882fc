#!/usr/bin/env bash
# Per-unit costs (issue 22, item 6; docs/capacity.md) on a database of bench/dataset.sh: for an
# ingested lead (the big partner's: one lead, its event and 10 deliveries), a delivery (claimed,
# sent to nginx, recorded), and a page (leads first page, leads page 1,000, delivery log first
# page), each measured twice:
#   statements: PostgreSQL's log with `log_statement = all` on the database, over BENCH_LOGGED
#     units (default 100), counting `execute`/`statement` lines;
#   WAL bytes, CPU: over BENCH_UNITS units (default 2,000) without the log: WAL as the sum of the
#     records pg_waldump shows for this database's relations (other sessions share the cluster:
#     the raw pg_current_wal_lsn() difference is printed beside it), CPU as the user+system time
#     of the server process and of its PostgreSQL backends (/proc/<pid>/stat), in ms per unit.
# Requests come from one Python keep-alive client, one at a time (no load generator on the CPU
# counted). pg_stat_statements is not loaded on the shared server (shared_preload_libraries is
# empty), hence the log. Loopback only; the rows it writes stay in the database.
# Usage: BENCH_DATASET=pp_dataset bash bench/unit-costs.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export BENCH_DB=${BENCH_DATASET:?BENCH_DATASET=<database made by bench/dataset.sh>}
export BENCH_NGINX_PORT=$(psql -h 127.0.0.1 -U postgres -Atq "$BENCH_DB" -c "SELECT value FROM dataset_info WHERE key = 'receiver_port'")
source bench/webhooks-lib.sh
[ -n "${BENCH_BIN:-}" ] || wh_install
BIN=${BENCH_BIN:-$BIN}
DB=$WH_DB
UNITS=${BENCH_UNITS:-2000}
LOGGED=${BENCH_LOGGED:-100}
PGLOG=${BENCH_PGLOG:-/var/log/postgresql/postgresql-15-main.log}
PGWAL=${BENCH_PGWAL:-/var/lib/postgresql/15/main/pg_wal}
WALDUMP=${BENCH_WALDUMP:-/usr/lib/postgresql/15/bin/pg_waldump}
export PARTNER_WEBHOOK_RETENTION=90d PARTNER_EVENT_RETENTION=90d PARTNER_RATE_LIMIT=1000000000/1s PARTNER_DB_POOL_SIZE=4
trap 'wh_stop_server; psql -qc "ALTER DATABASE $DB RESET log_statement" postgres 2>/dev/null; wh_cleanup' EXIT
BIG=$(psql -Atq "$DB" -c "SELECT value FROM dataset_info WHERE key = 'big_partner'")
TOKEN=$(psql -Atq "$DB" -c "SELECT value FROM dataset_info WHERE key = 'token'")
DBOID=$(psql -Atq "$DB" -c "SELECT oid FROM pg_database WHERE datname = current_database()")
wh_start_receiver

# Requests, one at a time over one keep-alive connection: client METHOD PATH COUNT [BODY].
client() {
  python3 - "$WH_PORT" "$@" <<'PY'
import http.client, sys
port, method, path, n = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
body = sys.argv[5] if len(sys.argv) > 5 else None
tok = sys.argv[6] if len(sys.argv) > 6 else None
c = http.client.HTTPConnection("127.0.0.1", port)
bad = 0
for _ in range(n):
    c.request(method, path, body=body, headers={"Authorization": "Bearer " + tok, "Content-Type": "application/json"})
    r = c.getresponse(); r.read()
    bad += r.status >= 300
if bad: print(f"{bad} answers were not 2xx", file=sys.stderr); sys.exit(1)
PY
}
LEAD='{"partnerId":"'$BIG'","firstName":"Unit","lastName":"Cost","email":"unit@example.com","emailConsent":true,"phone":"+1 555 0100","smsConsent":true,"origin":"managed-website","location":"Austin, TX"}'
ingest() { client POST /internal/v1/leads "$1" "$LEAD" "$PARTNER_INTERNAL_TOKEN"; }
page() { client GET "$PAGE_PATH" "$1" "" "$TOKEN"; }
drain() { # waits for the pending deliveries (the worker runs)
  for _ in $(seq 1 600); do
    [ "$(psql -Atq "$DB" -c "SELECT count(*) FROM webhook_deliveries WHERE status = 'pending' AND partner_id = '$BIG'")" = 0 ] && return
    sleep 0.2
  done
  echo "deliveries still pending" >&2; exit 1
}
ticks() { # user+system clock ticks of the server and of this database's backends
  local s b
  s=$(awk '{print $14 + $15}' "/proc/$WH_SERVER/stat")
  b=0
  for p in $(psql -Atq "$DB" -c "SELECT pid FROM pg_stat_activity WHERE datname = '$DB' AND pid <> pg_backend_pid()"); do
    [ -r "/proc/$p/stat" ] && b=$((b + $(awk '{print $14 + $15}' "/proc/$p/stat")))
  done
  echo "$s $b"
}
HZ=$(getconf CLK_TCK)
# measure LABEL UNITS COMMAND...: prints statements (from a logged run of LOGGED units before)
# and WAL and CPU per unit. For deliveries, COMMAND writes UNITS/10 leads first (not counted) and
# the drain is measured: see below.
declare -A STMTS
count_statements() { # label units command...
  local label=$1 n=$2; shift 2
  psql -qc "ALTER DATABASE $DB SET log_statement = 'all'" postgres
  wh_stop_server; wh_start_server "$ROLE"
  "$@" 1 # warm-up: prepared statements
  sleep 0.3
  local lines; lines=$(wc -l <"$PGLOG")
  "$@" "$n"
  sleep 0.5
  STMTS[$label]=$(tail -n +"$((lines + 1))" "$PGLOG" | grep -E "@$DB LOG: +(execute|statement)" | grep -vc "pg_stat_activity\|FROM dataset_info\|count(\*) FROM webhook_deliveries WHERE status = 'pending'" || true)
  psql -qc "ALTER DATABASE $DB RESET log_statement" postgres
  wh_stop_server; wh_start_server "$ROLE"
}
measure() { # label units command...
  local label=$1 n=$2; shift 2
  "$@" 10 # warm-up
  local lsn0 t0 lsn1 t1 wal_all wal_db
  lsn0=$(psql -Atq "$DB" -c "SELECT pg_current_wal_lsn()")
  read -r s0 b0 <<<"$(ticks)"
  "$@" "$n"
  read -r s1 b1 <<<"$(ticks)"
  lsn1=$(psql -Atq "$DB" -c "SELECT pg_current_wal_lsn()")
  wal_all=$(psql -Atq "$DB" -c "SELECT pg_wal_lsn_diff('$lsn1', '$lsn0')")
  # (pg_waldump ends with an error when the end is the last record written: what it read counts.)
  wal_db=$("$WALDUMP" -p "$PGWAL" -s "$lsn0" -e "$lsn1" 2>/dev/null | awk -v db="/$DBOID/" '
    index($0, db) { if (match($0, /len \(rec\/tot\): +[0-9]+\/ *[0-9]+/)) { s = substr($0, RSTART, RLENGTH); sub(/.*\/ */, "", s); t += s } }
    END { print t + 0 }' || true)
  printf '%-22s %6s units  statements %5s  WAL %7.0f B (cluster %7.0f B)  CPU server %6.3f ms, PostgreSQL %6.3f ms  per unit; load %s\n' \
    "$label" "$n" "$(awk -v s="${STMTS[$label]:-}" -v n="$LOGGED" 'BEGIN {if (s == "") print "-"; else printf "%.1f", s / n}')" \
    "$(awk -v a="$wal_db" -v n="$n" 'BEGIN {print a / n}')" "$(awk -v a="$wal_all" -v n="$n" 'BEGIN {print a / n}')" \
    "$(awk -v a="$s0" -v b="$s1" -v n="$n" -v hz="$HZ" 'BEGIN {print 1000 * (b - a) / hz / n}')" \
    "$(awk -v a="$b0" -v b="$b1" -v n="$n" -v hz="$HZ" 'BEGIN {print 1000 * (b - a) / hz / n}')" "$(cut -d' ' -f1-3 /proc/loadavg)"
}

echo "== $DB (oid $DBOID), $BIG; machine $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
# Ingest, with no worker (role api): the deliveries written stay pending. (BENCH_ONLY_PAGES=1
# measures the pages alone.)
if [ -z "${BENCH_ONLY_PAGES:-}" ]; then
ROLE=api
wh_start_server api
count_statements "ingested lead" "$LOGGED" ingest
measure "ingested lead" "$UNITS" ingest
# Deliveries: the pending ones of the ingest above (10 per lead), drained by a worker.
wh_stop_server
ROLE=worker
pending=$(psql -Atq "$DB" -c "SELECT count(*) FROM webhook_deliveries WHERE status = 'pending' AND partner_id = '$BIG'")
# A logged drain of the first LOGGED*10 (written now, with the worker stopped), then the rest unlogged.
psql -qc "UPDATE webhook_deliveries SET next_attempt_at = now() + interval '1 hour' WHERE status = 'pending' AND partner_id = '$BIG'" "$DB"
psql -qc "UPDATE webhook_deliveries SET next_attempt_at = now() WHERE id IN (SELECT id FROM webhook_deliveries WHERE status = 'pending' AND partner_id = '$BIG' ORDER BY created_at LIMIT $((LOGGED * 10)))" "$DB"
psql -qc "ALTER DATABASE $DB SET log_statement = 'all'" postgres
lines=$(wc -l <"$PGLOG")
wh_start_server worker
for _ in $(seq 1 300); do
  [ "$(psql -Atq "$DB" -c "SELECT count(*) FROM webhook_deliveries WHERE status = 'pending' AND partner_id = '$BIG' AND next_attempt_at <= now()")" = 0 ] && break; sleep 0.2
done
sleep 0.5
STMTS[delivery]=$(tail -n +"$((lines + 1))" "$PGLOG" | grep -E "@$DB LOG: +(execute|statement)" | grep -vc "pg_stat_activity\|FROM dataset_info\|count(\*) FROM webhook_deliveries WHERE status = 'pending'" || true)
wh_stop_server
psql -qc "ALTER DATABASE $DB RESET log_statement" postgres
STMTS[delivery]=$(awk -v s="${STMTS[delivery]}" -v l="$LOGGED" 'BEGIN {print s / 10}') # per LOGGED*10 deliveries: scale to LOGGED
left=$(psql -Atq "$DB" -c "SELECT count(*) FROM webhook_deliveries WHERE status = 'pending' AND partner_id = '$BIG'")
psql -qc "UPDATE webhook_deliveries SET next_attempt_at = now() WHERE status = 'pending' AND partner_id = '$BIG'" "$DB"
# Measured from the worker's start (its own CPU and its backends' from zero) to the last delivery.
lsn0=$(psql -Atq "$DB" -c "SELECT pg_current_wal_lsn()")
wh_start_server worker
drain
read -r s1 b1 <<<"$(ticks)"
lsn1=$(psql -Atq "$DB" -c "SELECT pg_current_wal_lsn()")
wal_all=$(psql -Atq "$DB" -c "SELECT pg_wal_lsn_diff('$lsn1', '$lsn0')")
wal_db=$("$WALDUMP" -p "$PGWAL" -s "$lsn0" -e "$lsn1" 2>/dev/null | awk -v db="/$DBOID/" '
  index($0, db) { if (match($0, /len \(rec\/tot\): +[0-9]+\/ *[0-9]+/)) { s = substr($0, RSTART, RLENGTH); sub(/.*\/ */, "", s); t += s } }
  END { print t + 0 }' || true)
printf '%-22s %6s units  statements %5s  WAL %7.0f B (cluster %7.0f B)  CPU server %6.3f ms, PostgreSQL %6.3f ms  per unit; load %s\n' \
  delivery "$left" "$(awk -v s="${STMTS[delivery]}" -v n="$LOGGED" 'BEGIN {printf "%.1f", s / n}')" \
  "$(awk -v a="$wal_db" -v n="$left" 'BEGIN {print a / n}')" "$(awk -v a="$wal_all" -v n="$left" 'BEGIN {print a / n}')" \
  "$(awk -v b="$s1" -v n="$left" -v hz="$HZ" 'BEGIN {print 1000 * b / hz / n}')" \
  "$(awk -v b="$b1" -v n="$left" -v hz="$HZ" 'BEGIN {print 1000 * b / hz / n}')" "$(cut -d' ' -f1-3 /proc/loadavg)"
wh_stop_server
fi
ROLE=api
wh_start_server api
L1000=""; for _ in $(seq 1 999); do L1000=$(curl -sf "http://127.0.0.1:$WH_PORT/api/v1/leads${L1000:+?cursor=$L1000}" -H "Authorization: Bearer $TOKEN" | sed -nE 's/.*"nextCursor":"([^"]+)".*/\1/p'); done
for case in "leads first page|/api/v1/leads" "leads page 1000|/api/v1/leads?cursor=$L1000" "delivery log page|/api/v1/webhook-deliveries"; do
  PAGE_PATH=${case#*|}
  count_statements "${case%%|*}" "$LOGGED" page
  measure "${case%%|*}" "$UNITS" page
done
wh_stop_server
