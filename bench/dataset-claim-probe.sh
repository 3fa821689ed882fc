#!/usr/bin/env bash
# The claim statement (crates/partner-postgres/src/claim.rs, CLAIM_SQL, prepared as the server
# prepares it) on a database of bench/dataset.sh with a backlog as bench/webhooks-dataset.sh's
# pre-filled case writes it (PROBE_EVENTS, default 2,000 events of `ds-big` = 20,000 deliveries):
# `EXPLAIN (ANALYZE, BUFFERS)` of PROBE_RUNS (default 5) claims of room 16 per endpoint and 160 in
# all, each rolled back; prints each run's execution time and buffers. The backlog stays pending:
# drain it afterwards (e.g. BENCH_WH_CASES=prefill bash bench/webhooks-dataset.sh, which drains
# it with its own). PROBE_SHOW=1 prints the last plan. Loopback only.
# Usage: bash bench/dataset-claim-probe.sh <db>
set -euo pipefail
cd "$(dirname "$0")/.."
export PGHOST=127.0.0.1 PGPORT=${BENCH_PGPORT:-5432} PGUSER=postgres
DB=${1:?database}
EV=${PROBE_EVENTS:-2000}
RUNS=${PROBE_RUNS:-5}
WORK=$(mktemp -d /tmp/claim-probe.XXXXXX)
export BENCH_DB=$DB
# shellcheck source=bench/webhooks-lib.sh
source bench/webhooks-lib.sh
trap 'rm -rf "$WORK"; wh_cleanup' EXIT
python3 - "$WORK/claim.sql" <<'PY'
import re, sys
s = open("crates/partner-postgres/src/claim.rs").read()
t = re.sub(r"\\\n\s*", "", re.search(r'const CLAIM_SQL: &str = "(.*?)";\n', s, re.S).group(1))
open(sys.argv[1], "w").write("PREPARE c(timestamptz, timestamptz, uuid[], int4[], int4, int8, int4) AS " + t + ";\n")
PY
BIG=$(psql -Atq "$DB" -c "SELECT value FROM dataset_info WHERE key = 'big_partner'")
if [ "$EV" -gt 0 ]; then wh_prefill_partner "$BIG" "$EV"; fi
{
  cat "$WORK/claim.sql"
  for _ in $(seq 1 "$RUNS"); do
    echo "BEGIN;"
    echo "EXPLAIN (ANALYZE, BUFFERS) EXECUTE c(now(), now() + interval '30 s', '{}', '{}', 16, 160, 8);"
    echo "ROLLBACK;"
  done
} | psql -q "$DB" >"$WORK/out.txt" 2>&1
echo "== $DB: $(psql -Atq "$DB" -c "SELECT count(*) FROM webhook_deliveries WHERE status = 'pending'") pending; claims of room 16, 160 in all, rolled back:"
awk '/^ Append|^ Result|^ *QUERY PLAN/ {top = 1} top && /Buffers:/ && !b {b = $0} /Execution Time/ {printf "  %s;%s\n", $0, b; b = ""; top = 0}' "$WORK/out.txt"
grep -o 'Update on webhook_deliveries d_1 .*' "$WORK/out.txt" | sed 's/^/  /' | tail -1
[ -z "${PROBE_SHOW:-}" ] || awk '/QUERY PLAN/ {p = ""} {p = p $0 "\n"} END {printf "%s", p}' "$WORK/out.txt"
