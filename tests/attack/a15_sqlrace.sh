#!/usr/bin/env bash
# attack15: the server's own claim statement (CLAIM_SQL, extracted from claim.rs by
# a15_sql/extract.py) under concurrent writers, outcomes, resends, disables/recovers, retention
# deletes and VACUUM, without the server.  a15_sqlrace.sh MODE DUR
# MODE tid: lead's claim.rs (the worktree's: the UPDATE finds the picked rows by ctid), database
# migrated by /work/bin/partner-server-tid; MODE main: main's claim.rs (`git show main:`), by
# primary key (ec0ab56, what /work/bin/partner-server-main was built from; main has since merged
# the change: MAINREF), database migrated by /work/bin/partner-server-main.
# pgbench clients: WORKERS of a15_sql/turn.sql (-M prepared, at most WRATE turns a second in all;
# ROOM, BATCH, LEASE s, TRAIL_PCT), 2 writers (a14_sql/tmpl.sql, WRITE_RATE a second), one
# resender (a15_sql/resend.sql, RESEND_RATE a second, due 0-BACK ms ago), one disabler
# (a15_sql/disable.sql, DIS_RATE a second), one retention client (a15_sql/retention.sql, RET_RATE a
# second); VACUUM every VAC s; a monitor of the marker invariant in one snapshot every 0.1 s.
# INSTR=1 logs every picked row too (a15_picked). After DUR the load stops, the workers drain for
# DRAIN s; a15_sql/judge.sql judges. KEEP=1 keeps the database pp_attack15_sql_MODE.
set -uo pipefail
MODE=$1 DUR=${2:-60}
D="$(cd "$(dirname "$0")" && pwd)"
OUT=$D/out/a15sql_$MODE${SUFFIX:-}; rm -rf "$OUT"; mkdir -p "$OUT"
DB=pp_attack15_sql_$MODE${SUFFIX:-}
export PGHOST=127.0.0.1 PGUSER=postgres PGPORT=5432
case $MODE in
  tid) BIN=/work/bin/partner-server-tid; SRC=$D/../../crates/partner-postgres/src/claim.rs ;;
  main) BIN=/work/bin/partner-server-main; SRC=$OUT/claim_main.rs
    git -C "$D" show ${MAINREF:-ec0ab56}:crates/partner-postgres/src/claim.rs >"$SRC" ;;
  *) echo "MODE tid|main"; exit 2 ;;
esac
psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres
BG=()
cleanup() { for p in "${BG[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null
  [ "${KEEP:-0}" = 1 ] || psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres; }
trap cleanup EXIT
DATABASE_URL=postgres://postgres@127.0.0.1:5432/$DB "$BIN" migrate >"$OUT/migrate.log" 2>&1 || { tail "$OUT/migrate.log"; exit 1; }
N=${ENDPOINTS:-4}
psql -q $DB -c "
  INSERT INTO partners (partner_id, name, email, active, dna_access, headless_links, default_lang, enabled_langs,
    cs_subscription_active, cs_manual_override, cs_yearly_bundle, cs_services, created_at, updated_at)
  VALUES ('demo-clinic', 'A15', 'ops@a15.test', true, false, true, 'en', '{en}', false, false, false, '{}', now(), now());
  INSERT INTO webhook_endpoints (id, partner_id, url, events, secret, created_at, updated_at)
  SELECT gen_random_uuid(), 'demo-clinic', 'https://127.0.0.1:1/' || g, '{lead.created}', NULL, now(), now()
  FROM generate_series(1, $N) g;
  CREATE TABLE a15_claims (id uuid, endpoint_id uuid, lease uuid, attempts int, now timestamptz, lu timestamptz, at timestamptz, pid int, xid bigint);
  CREATE TABLE a15_picked (id uuid, tid text, at timestamptz, pid int, xid bigint);
  CREATE TABLE a15_out (id uuid, lease uuid, at timestamptz, kind text);
  CREATE TABLE a15_resent (id uuid, at timestamptz);
  CREATE TABLE a15_churn (kind text, id uuid, endpoint_id uuid, at timestamptz);
  CREATE TABLE a15_deleted (id uuid, created_at timestamptz, at timestamptz);"
ID=$(psql -Atc "SELECT COALESCE(to_regprocedure('uuid_v7()')::text, 'gen_random_uuid()')" $DB)
mk() { sed -e "s/@ID@/$ID/g" -e "s/@N@/$1/" -e "s/@DUE@/$2/g" "$D/a14_sql/tmpl.sql" | grep -v pg_notify >"$OUT/$3.sql"; }
mk 1 "ev.created_at" one
mk 3 "now()" three_equal
mk 1 "ev.created_at - random() * interval '3 s'" back
mk 1 "ev.created_at + random() * interval '2 s'" ahead
ADV=$(python3 "$D/a15_sql/extract.py" "$SRC" ADVANCE_SQL | sed 's/\$1::uuid\[\]/:locked::uuid[]/')
FLAGS=(--pgbench); [ "${INSTR:-0}" = 1 ] && FLAGS+=(--instr)
python3 "$D/a15_sql/extract.py" "$SRC" CLAIM_SQL "${FLAGS[@]}" >"$OUT/claim.sql"
python3 - "$D/a15_sql/turn.sql" "$OUT/claim.sql" "$ADV" >"$OUT/turn.sql" <<PY
import sys
t, c, a = sys.argv[1:]
s = open(t).read().replace("@CLAIM@", open(c).read().strip()).replace("@ADVANCE@", a)
for k, v in {"@LEASE@": "${LEASE:-2}", "@ROOM@": "${ROOM:-2}", "@BATCH@": "${BATCH:-8}", "@TRAIL_PCT@": "${TRAIL_PCT:-20}"}.items():
    s = s.replace(k, v)
print(s)
PY
sed -e "s/@BACK@/${BACK:-300}/" "$D/a15_sql/resend.sql" >"$OUT/resend.sql"
python3 - "$D/a15_sql/disable.sql" "$ADV" >"$OUT/disable.sql" <<PY
import sys
print(open(sys.argv[1]).read().replace("@ADVANCE@", sys.argv[2]).replace("@GAP@", "${GAP:-300}"))
PY
sed -e "s/@AGE@/${AGE:-2000}/" "$D/a15_sql/retention.sql" >"$OUT/retention.sql"
MON="SELECT to_char(clock_timestamp(),'HH24:MI:SS.MS'), count(*) FILTER (WHERE q.endpoint_id IS NULL),
  count(*) FILTER (WHERE d.next_attempt_at < q.due_at), count(*),
  coalesce(string_agg(d.id||'/'||d.next_attempt_at||'/'||coalesce(q.due_at::text,'-')||'/'||(d.lease_token IS NOT NULL), ' ')
    FILTER (WHERE q.endpoint_id IS NULL OR d.next_attempt_at < q.due_at), '')
  FROM webhook_deliveries d LEFT JOIN webhook_endpoint_queue q ON q.endpoint_id = d.endpoint_id
  WHERE d.status = 'pending' AND d.next_attempt_at IS NOT NULL"
( while :; do psql -AtF' ' -c "$MON" $DB; sleep 0.1; done >"$OUT/monitor.log" 2>&1 ) & BG+=($!)
( while :; do sleep "${VAC:-2}"; psql -qc "VACUUM webhook_deliveries" $DB; done >"$OUT/vacuum.log" 2>&1 ) & BG+=($!)
DRAIN=${DRAIN:-15}
nice -n 10 pgbench -n -M prepared -c ${WORKERS:-6} -j 1 -R ${WRATE:-150} -T $((DUR + DRAIN)) -f "$OUT/turn.sql" $DB >"$OUT/workers.log" 2>&1 &
WP=$!
CH=()
[ "${RESEND_RATE:-10}" != 0 ] && { nice -n 10 pgbench -n -M prepared -c 1 -R ${RESEND_RATE:-10} -T $DUR -f "$OUT/resend.sql" $DB >"$OUT/resend.log" 2>&1 & CH+=($!); }
[ "${DIS_RATE:-0.5}" != 0 ] && { nice -n 10 pgbench -n -M prepared -c 1 -R ${DIS_RATE:-0.5} -T $DUR -f "$OUT/disable.sql" $DB >"$OUT/disable.log" 2>&1 & CH+=($!); }
[ "${RET_RATE:-2}" != 0 ] && { nice -n 10 pgbench -n -M prepared -c 1 -R ${RET_RATE:-2} -T $DUR -f "$OUT/retention.sql" $DB >"$OUT/retention.log" 2>&1 & CH+=($!); }
nice -n 10 pgbench -n -c 2 -j 1 -R ${WRITE_RATE:-20} -T $DUR -f "$OUT/one.sql@3" -f "$OUT/three_equal.sql@1" \
  -f "$OUT/back.sql@1" -f "$OUT/ahead.sql@1" $DB >"$OUT/writers.log" 2>&1
for p in "${CH[@]}"; do wait $p; done
wait $WP
for p in "${BG[@]}"; do kill "$p" 2>/dev/null; done; BG=()
for f in workers writers resend disable retention; do [ -f "$OUT/$f.log" ] || continue
  echo "$f: $(grep -E '^number of transactions actually|^number of failed' "$OUT/$f.log" | tr '\n' ' ')$(grep -c -i 'error\|abort' "$OUT/$f.log") error lines"; done
grep -i "error" "$OUT/workers.log" | sort | uniq -c | sort -rn | head -3
psql -AtF' ' -c "$MON" $DB >"$OUT/final_monitor"
psql -At $DB -f "$D/a15_sql/judge.sql"
awk '$2!=0 || $3!=0' "$OUT/monitor.log" | head -3 | cut -c1-400
echo "monitor: $(grep -c '^[0-9]' "$OUT/monitor.log") snapshots, with a violation $(awk '$2!=0 || $3!=0' "$OUT/monitor.log" | wc -l), max pending $(awk '{print $4}' "$OUT/monitor.log" | sort -n | tail -1); final: $(cut -d' ' -f1-4 "$OUT/final_monitor")"
