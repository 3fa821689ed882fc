#!/usr/bin/env bash
# attack14: the marker's invariant under the claim's SQL, without the server. a14_sqlrace.sh MODE DUR
# MODE lead2: the database migrated by /work/bin/partner-server-lead2 (trigger of 000024), the
# claim from the marker on, every visited marker advanced, lead2's advance; MODE main: main's
# binary, claim, stale filter and advance. pgbench: WORKERS clients of a14_sql/worker.sql (at most
# WRATE turns a second in all), 2 writers (a14_sql/tmpl.sql: one lead; three at one due time;
# backdated 0-3 s; 0-2 s ahead; WRITE_RATE a second) on ENDPOINTS endpoints; a monitor reads the
# invariant in one snapshot every 0.1 s. After DUR the writers stop and the workers drain for 15 s.
# Judged: pending left, violations seen, lateness of each claim (claimed at - due, a14_log).
set -uo pipefail
MODE=$1 DUR=${2:-60}
D="$(cd "$(dirname "$0")" && pwd)"
OUT=$D/out/a14sql_$MODE; rm -rf "$OUT"; mkdir -p "$OUT"
DB=pp_attack14_sql_$MODE
export PGHOST=127.0.0.1 PGUSER=postgres PGPORT=5432
BIN=/work/bin/partner-server-main; [ "$MODE" = lead2 ] && BIN=/work/bin/partner-server-lead2
psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres
trap '[ -n "${MONP:-}" ] && kill $MONP 2>/dev/null; [ "${KEEP:-0}" = 1 ] || psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres' EXIT
DATABASE_URL=postgres://postgres@127.0.0.1:5432/$DB "$BIN" migrate >"$OUT/migrate.log" 2>&1 || { tail "$OUT/migrate.log"; exit 1; }
N=${ENDPOINTS:-4}
psql -q $DB -c "
  INSERT INTO partners (partner_id, name, email, active, dna_access, headless_links, default_lang, enabled_langs,
    cs_subscription_active, cs_manual_override, cs_yearly_bundle, cs_services, created_at, updated_at)
  VALUES ('demo-clinic', 'A14', 'ops@a14.test', true, false, true, 'en', '{en}', false, false, false, '{}', now(), now());
  INSERT INTO webhook_endpoints (id, partner_id, url, events, secret, created_at, updated_at)
  SELECT gen_random_uuid(), 'demo-clinic', 'https://127.0.0.1:1/' || g, '{lead.created}', NULL, now(), now()
  FROM generate_series(1, $N) g;
  CREATE TABLE a14_log (id uuid, due timestamptz, at timestamptz);
  CREATE TABLE a14_visits (at timestamptz, endpoint_id uuid, due_at timestamptz, n int);"
ID=$(psql -Atc "SELECT COALESCE(to_regprocedure('uuid_v7()')::text, 'gen_random_uuid()')" $DB)
mk() { sed -e "s/@ID@/$ID/g" -e "s/@N@/$1/" -e "s/@DUE@/$2/g" "$D/a14_sql/tmpl.sql" | grep -v pg_notify >"$OUT/$3.sql"; }
mk 1 "ev.created_at" one
mk 3 "now()" three_equal
mk 1 "ev.created_at - random() * interval '3 s'" back
mk 1 "ev.created_at + random() * interval '2 s'" ahead
if [ "$MODE" = lead2 ]; then FM="AND d.next_attempt_at >= ep.due_at"; ST="true"; else FM=""; ST="v.n < v.room"; fi
python3 - "$D/a14_sql/worker.sql" "$D/a14_sql/advance_$MODE.sql" "$FM" "$ST" >"$OUT/worker.sql" <<'PY'
import sys
w, a, fm, st = sys.argv[1:]
s = open(w).read().replace("@FROM_MARKER@", fm).replace("@STALE@", st).replace("@ADVANCE@", open(a).read().strip())
print(s)
PY
MON="SELECT to_char(clock_timestamp(),'HH24:MI:SS.MS'), count(*) FILTER (WHERE q.endpoint_id IS NULL),
  count(*) FILTER (WHERE d.next_attempt_at < q.due_at), count(*),
  coalesce(string_agg(d.id||'/'||d.next_attempt_at||'/'||coalesce(q.due_at::text,'-')||'/'||(d.lease_token IS NOT NULL), ' ')
    FILTER (WHERE q.endpoint_id IS NULL OR d.next_attempt_at < q.due_at), '')
  FROM webhook_deliveries d LEFT JOIN webhook_endpoint_queue q ON q.endpoint_id = d.endpoint_id
  WHERE d.status = 'pending' AND d.next_attempt_at IS NOT NULL"
( while :; do psql -AtF' ' -c "$MON" $DB; sleep 0.1; done >"$OUT/monitor.log" 2>&1 ) & MONP=$!
nice -n 10 pgbench -n -M extended -c ${WORKERS:-4} -j 1 -R ${WRATE:-150} -T $((DUR + 15)) -f "$OUT/worker.sql" $DB >"$OUT/workers.log" 2>&1 &
WP=$!
nice -n 10 pgbench -n -c 2 -j 1 -R ${WRITE_RATE:-20} -T $DUR -f "$OUT/one.sql@3" -f "$OUT/three_equal.sql@1" \
  -f "$OUT/back.sql@1" -f "$OUT/ahead.sql@1" $DB >"$OUT/writers.log" 2>&1
wait $WP
kill $MONP; MONP=
grep -E "^number of transactions actually|^tps|^number of failed|latency average" "$OUT/writers.log" "$OUT/workers.log" | sed "s|$OUT/||"
psql -AtF' ' -c "$MON" $DB >"$OUT/final_monitor"
psql -At $DB -c "SELECT 'deliveries ' || count(*) || ' ' || string_agg(DISTINCT status, ',') || ' pending ' || count(*) FILTER (WHERE status='pending')
    || ' max attempts ' || max(attempts) FROM webhook_deliveries" \
  -c "SELECT 'claims ' || count(*) || ', late (at - greatest(due, written: uuid_v7 time)) p50 ' || round(extract(epoch FROM percentile_cont(0.5) WITHIN GROUP (ORDER BY at - due))::numeric*1000,1)
    || ' ms, p99 ' || round(extract(epoch FROM percentile_cont(0.99) WITHIN GROUP (ORDER BY at - due))::numeric*1000,1)
    || ' ms, max ' || round(extract(epoch FROM max(at - due))::numeric*1000,1) || ' ms, >0.5 s ' || count(*) FILTER (WHERE at - due > interval '0.5 s')
    || ', >1 s ' || count(*) FILTER (WHERE at - due > interval '1 s') FROM (SELECT at, greatest(due, to_timestamp(('x' || substr(replace(id::text, '-', ''), 1, 12))::bit(48)::bigint / 1000.0)) AS due FROM a14_log) l" \
  -c "SELECT 'markers ' || count(*) || ', early markers with nothing pending ' || count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.endpoint_id=q.endpoint_id AND d.status='pending')) FROM webhook_endpoint_queue q"
psql $DB -c "
  WITH l AS (SELECT l.id, d.endpoint_id, l.at, greatest(l.due, to_timestamp(('x' || substr(replace(l.id::text, '-', ''), 1, 12))::bit(48)::bigint / 1000.0)) AS due
    FROM a14_log l JOIN webhook_deliveries d ON d.id = l.id)
  SELECT l.id, l.endpoint_id, l.due, l.at, l.at - l.due AS late,
    (SELECT count(*) FROM a14_visits v WHERE v.endpoint_id = l.endpoint_id AND v.at BETWEEN l.due + interval '50 ms' AND l.at - interval '50 ms') AS visits_between,
    (SELECT max(v.due_at) FROM a14_visits v WHERE v.endpoint_id = l.endpoint_id AND v.at BETWEEN l.due + interval '50 ms' AND l.at - interval '50 ms') AS their_max_marker,
    (SELECT count(*) FROM a14_visits v WHERE v.at BETWEEN l.due + interval '50 ms' AND l.at - interval '50 ms') AS any_visits_between
  FROM l WHERE l.at - l.due > interval '${LATE:-0.5} s' ORDER BY l.at LIMIT ${SHOW:-5}"
psql -At $DB -c "
  WITH l AS (SELECT l.id, d.endpoint_id, l.at, greatest(l.due, to_timestamp(('x' || substr(replace(l.id::text, '-', ''), 1, 12))::bit(48)::bigint / 1000.0)) AS due
    FROM a14_log l JOIN webhook_deliveries d ON d.id = l.id)
  SELECT 'claims later than ${LATE:-0.5} s: ' || count(*) || '; of them, with a visit of their endpoint between due + 50 ms and claim - 50 ms: '
    || count(*) FILTER (WHERE EXISTS (SELECT 1 FROM a14_visits v WHERE v.endpoint_id = l.endpoint_id AND v.at BETWEEN l.due + interval '50 ms' AND l.at - interval '50 ms'))
    || ', with such a visit whose marker was above the delivery: '
    || count(*) FILTER (WHERE EXISTS (SELECT 1 FROM a14_visits v WHERE v.endpoint_id = l.endpoint_id AND v.at BETWEEN l.due + interval '50 ms' AND l.at - interval '50 ms' AND v.due_at > l.due))
    || ', with a visit that gave less than its room: '
    || count(*) FILTER (WHERE EXISTS (SELECT 1 FROM a14_visits v WHERE v.endpoint_id = l.endpoint_id AND v.at BETWEEN l.due + interval '50 ms' AND l.at - interval '50 ms' AND v.n < 2))
    || '; visits in all ' || (SELECT count(*) FROM a14_visits)
  FROM l WHERE l.at - l.due > interval '${LATE:-0.5} s'"
awk '$2!=0 || $3!=0' "$OUT/monitor.log" | head -5 | cut -c1-400
echo "monitor: $(grep -c '^[0-9]' "$OUT/monitor.log") snapshots, with a violation $(awk '$2!=0 || $3!=0' "$OUT/monitor.log" | wc -l), max pending $(awk '{print $4}' "$OUT/monitor.log" | sort -n | tail -1); final: $(cut -d' ' -f1-4 "$OUT/final_monitor")"
