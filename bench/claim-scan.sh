#!/usr/bin/env bash
# What a claim's scan of a backlog's due deliveries steps over (issue 22; docs/decisions.md,
# "The claim reads an endpoint's deliveries from its marker on"). On a database of its own with
# every migration: BENCH_DELIVERIES deliveries are written for one endpoint, then half of them are
# drained as the worker drains a backlog: claims of 16 (the endpoint's room), each followed by
# the advance of the endpoint's marker and the delivered outcome of its rows, by id, as the
# recorder writes it; no vacuum runs, as between two autovacuums. Then one claim's scan is timed
# (`EXPLAIN (ANALYZE, BUFFERS)`, each run rolled back, the median of BENCH_RUNS) two ways over the
# same rows:
#   from the marker:      the scan of `CLAIM_SQL` as crates/partner-postgres/src/claim.rs has it
#                         (the marker follows the claims: every visited marker is advanced);
#   from the first entry: the same without `next_attempt_at >= ep.due_at`, which is what the claim
#                         did before, when a backlog's marker stayed put while claims filled
#                         their room.
# Needs psql, pgbench and python3. Usage: bash bench/claim-scan.sh
#   (BENCH_DELIVERIES, default 20,000; BENCH_RUNS; BENCH_DB; BENCH_KEEP_DB=1 keeps the database)
set -euo pipefail
cd "$(dirname "$0")/.."
export PGHOST=${PGHOST:-127.0.0.1} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
DB=${BENCH_DB:-pp_bench_claim_scan}
N=${BENCH_DELIVERIES:-20000}
RUNS=${BENCH_RUNS:-9}
EP=11111111-1111-1111-1111-111111111111
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres 2>/dev/null
psql -qc "CREATE DATABASE $DB" postgres
for m in migrations/*/up.sql; do psql -q -v ON_ERROR_STOP=1 "$DB" -f "$m" >/dev/null; done

# The claim statement and the advance, from the source, with the worker's parameters written in:
# no busy endpoints, room 16, batch 512, budget 9, a lease of 65 s.
python3 - "$work" "$EP" <<'PY'
import re, sys
work, ep = sys.argv[1], sys.argv[2]
src = open("crates/partner-postgres/src/claim.rs").read()
def const(name):
    body = re.search(r'const %s: &str = "\\\n(.*?)";\n' % name, src, re.S).group(1)
    return re.sub(r"\s*\\\n\s*", " ", body).replace("\\\n", "")
params = {"$1": "now()", "$2": "(now() + interval '65 s')", "$3": "'{}'", "$4": "'{}'",
          "$5": "16", "$6": "512::int8", "$7": "9"}
claim = const("CLAIM_SQL")
for k in sorted(params, key=len, reverse=True):
    claim = claim.replace(k, params[k])
bound = "d.next_attempt_at >= ep.due_at AND "
assert bound in claim, "the claim no longer reads from the marker"
advance = const("ADVANCE_SQL").replace("$1::uuid[]", "'{%s}'::uuid[]" % ep)
lock = const("LOCK_MARKERS_SQL").replace("$1::uuid[]", "'{%s}'::uuid[]" % ep)
write = ("WITH ev AS (INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at) "
         "VALUES (gen_random_uuid(), 'p-1', 'lead.created', gen_random_uuid()::text, '{}', now()) RETURNING id) "
         "INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, attempts, "
         "next_attempt_at, created_at) SELECT gen_random_uuid(), '%s', 'p-1', id, 'lead.created', 'pending', 0, "
         "clock_timestamp(), clock_timestamp() FROM ev;\n") % ep
# The drain's claim: the statement's CTEs as they are, answering only the ids it claimed.
drive = claim[:claim.index(" got AS (")].rstrip().rstrip(",") + " SELECT array_agg(id)::text AS ids FROM claimed"
open(work + "/drain.sql", "w").write(
    drive + " \\gset\nBEGIN;\n" + lock + ";\n" + advance + ";\nCOMMIT;\n"
    "UPDATE webhook_deliveries SET status = 'delivered', delivered_at = now(), lease_token = NULL, "
    "next_attempt_at = NULL WHERE id = ANY(':ids'::uuid[]);\n")
for name, sql in (("marker", claim), ("first", claim.replace(bound, ""))):
    open("%s/%s.sql" % (work, name), "w").write(
        "BEGIN;\n" + write + "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + sql + ";\nROLLBACK;\n")
PY

psql -q -v ON_ERROR_STOP=1 "$DB" <<SQL
INSERT INTO partners (partner_id, name, email, active, dna_access, headless_links, default_lang, enabled_langs,
  cs_subscription_active, cs_manual_override, cs_yearly_bundle, cs_services, created_at, updated_at)
VALUES ('p-1', 'Bench', 'ops@bench.test', true, false, true, 'en', '{en}', false, false, false, '{}', now(), now());
INSERT INTO webhook_endpoints (id, partner_id, url, events, secret, created_at, updated_at)
VALUES ('$EP', 'p-1', 'https://127.0.0.1:9/hook', '{lead.created}',
  'whsec_bench0123456789abcdefghijklmnopqrstuvwxyzABCD', now(), now());
SQL
echo "writing $N deliveries for one endpoint, then draining half of them in claims of 16"
psql -q -v ON_ERROR_STOP=1 "$DB" <<SQL
WITH ev AS (
  INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at)
  SELECT gen_random_uuid(), 'p-1', 'lead.created', gen_random_uuid()::text, '{}', now()
  FROM generate_series(1, $N) RETURNING id)
INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, attempts,
  next_attempt_at, created_at)
SELECT gen_random_uuid(), '$EP', 'p-1', id, 'lead.created', 'pending', 0, clock_timestamp(), clock_timestamp()
FROM ev;
VACUUM ANALYZE webhook_deliveries;
SQL
pgbench -n -c 1 -t $((N / 32)) -f "$work/drain.sql" "$DB" >"$work/pgbench.log" 2>&1 \
  || { cat "$work/pgbench.log" >&2; exit 1; }
psql -qAt "$DB" -c "SELECT 'delivered ' || count(*) FILTER (WHERE status = 'delivered') || ', pending ' ||
  count(*) FILTER (WHERE status = 'pending') || '; index of pending rows: ' ||
  pg_relation_size('webhook_deliveries_endpoint_due_idx') / 8192 || ' pages' FROM webhook_deliveries"

# The scan node of each run: its time and the index pages it read; the median of RUNS.
for how in first marker; do
  for _ in $(seq "$RUNS"); do psql -qAt "$DB" -f "$work/$how.sql"; done \
    | awk -v how="$how" '
        /Index Scan using webhook_deliveries_endpoint_due_idx/ {
          scan = 1; match($0, /actual time=[0-9.]+\.\.([0-9.]+)/, m); t[++n] = m[1]; next }
        scan && /Buffers: shared hit=/ { match($0, /hit=([0-9]+)/, m); b[n] = m[1]; scan = 0 }
        END { if (n == 0) { print how ": no scan found"; exit 1 }
              asort(t); asort(b)
              printf "scan from the %-12s median %6.3f ms, %4d index pages (min %.3f ms, max %.3f ms; %d runs)\n",
                how ":", t[int((n + 1) / 2)], b[int((n + 1) / 2)], t[1], t[n], n }'
done
[ -n "${BENCH_KEEP_DB:-}" ] || psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres 2>/dev/null
