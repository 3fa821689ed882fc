#!/usr/bin/env bash
# attack15: the claim's race with a resend, made deterministic.  a15_skip.sh tid|main
# One endpoint, one delivery due 1 s ago. The claim (CLAIM_SQL of the MODE's claim.rs, run by
# pgbench -M prepared; extract.py --nap 1 --instr) takes its snapshot, then sleeps 1 s before it
# locks any row; 0.3 s in, a resend (RESEND_SQL's update: pending, due 1 s ago, fresh budget,
# no lease) of that delivery commits. The claim then locks the row's new version (the locking read
# follows the update chain and rechecks its conditions). Prints what it picked (and the tid), what
# it claimed, and the row after. Then the statement's generic plan (force_generic_plan, no
# statistics) with EXPLAIN.
set -uo pipefail
MODE=$1
D="$(cd "$(dirname "$0")" && pwd)"
OUT=$D/out/a15skip_$MODE; rm -rf "$OUT"; mkdir -p "$OUT"
DB=pp_attack15_skip_$MODE
export PGHOST=127.0.0.1 PGUSER=postgres PGPORT=5432
case $MODE in
  tid) BIN=/work/bin/partner-server-tid; SRC=$D/../../crates/partner-postgres/src/claim.rs ;;
  main) BIN=/work/bin/partner-server-main; SRC=$OUT/claim_main.rs
    git -C "$D" show ${MAINREF:-ec0ab56}:crates/partner-postgres/src/claim.rs >"$SRC" ;;
esac
psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres
[ "${KEEP:-0}" = 1 ] || trap 'psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres' EXIT
DATABASE_URL=postgres://postgres@127.0.0.1:5432/$DB "$BIN" migrate >"$OUT/migrate.log" 2>&1 || { tail "$OUT/migrate.log"; exit 1; }
psql -q $DB -c "
  INSERT INTO partners (partner_id, name, email, active, dna_access, headless_links, default_lang, enabled_langs,
    cs_subscription_active, cs_manual_override, cs_yearly_bundle, cs_services, created_at, updated_at)
  VALUES ('demo-clinic', 'A15', 'ops@a15.test', true, false, true, 'en', '{en}', false, false, false, '{}', now(), now());
  INSERT INTO webhook_endpoints (id, partner_id, url, events, secret, created_at, updated_at)
  VALUES (gen_random_uuid(), 'demo-clinic', 'https://127.0.0.1:1/1', '{lead.created}', NULL, now(), now());
  CREATE TABLE a15_claims (id uuid, endpoint_id uuid, lease uuid, attempts int, now timestamptz, lu timestamptz, at timestamptz, pid int, xid bigint);
  CREATE TABLE a15_picked (id uuid, tid text, at timestamptz, pid int, xid bigint);"
ID=$(psql -Atc "SELECT COALESCE(to_regprocedure('uuid_v7()')::text, 'gen_random_uuid()')" $DB)
sed -e "s/@ID@/$ID/g" -e "s/@N@/1/" -e "s/@DUE@/ev.created_at - interval '1 s'/g" "$D/a14_sql/tmpl.sql" | grep -v pg_notify | psql -q $DB
psql -At $DB -c "SELECT 'before: ' || d.id || ' ctid ' || d.ctid || ' due ' || d.next_attempt_at || ' attempts ' || d.attempts
  || ' marker ' || q.due_at FROM webhook_deliveries d JOIN webhook_endpoint_queue q USING (endpoint_id)"
{ echo "SELECT now() AS now, now() + interval '30 s' AS lu, 2 AS room, 8 AS batch"; echo '\gset'
  python3 "$D/a15_sql/extract.py" "$SRC" CLAIM_SQL --pgbench --instr --nap "${NAP:-1}"; echo '\gset'; } >"$OUT/claim.sql"
pgbench -n -M prepared -t 1 -c 1 -f "$OUT/claim.sql" $DB >"$OUT/claim.log" 2>&1 &
CP=$!
sleep 0.3
psql -At $DB -c "UPDATE webhook_deliveries d SET status = 'pending', next_attempt_at = now() - interval '1 s',
    attempt_base = d.attempts, lease_token = NULL, delivered_at = NULL RETURNING 'resent at ' || clock_timestamp() || ', new ctid ' || d.ctid"
wait $CP
grep -E "failed|error|ERROR" "$OUT/claim.log"
psql -At $DB -c "SELECT 'picked: ' || id || ' tid ' || coalesce(tid, '-') || ' at ' || at FROM a15_picked" \
  -c "SELECT 'claimed: ' || count(*) FROM a15_claims" \
  -c "SELECT 'after: ctid ' || d.ctid || ' due ' || d.next_attempt_at || ' attempts ' || d.attempts || ' lease ' || coalesce(d.lease_token::text, 'none')
    || ' marker ' || coalesce((SELECT q.due_at::text FROM webhook_endpoint_queue q WHERE q.endpoint_id = d.endpoint_id), 'none') FROM webhook_deliveries d"
# The generic plan of the statement as the server prepares it (no statistics: analyze never ran).
python3 "$D/a15_sql/extract.py" "$SRC" CLAIM_SQL >"$OUT/claim_raw.sql"
{ echo "SET plan_cache_mode = force_generic_plan;"
  echo "PREPARE c(timestamptz, timestamptz, uuid[], int4[], int4, int8, int4) AS $(cat "$OUT/claim_raw.sql");"
  echo "EXPLAIN (COSTS OFF) EXECUTE c(now(), now() + interval '30 s', '{}', '{}', 2, 8, 1000);"; } | psql -X $DB >"$OUT/plan.txt" 2>&1
sed -n '/claimed/,/->.*got\|CTE got/p' "$OUT/plan.txt" | head -20
