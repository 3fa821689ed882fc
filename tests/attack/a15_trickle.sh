#!/usr/bin/env bash
# attack15: latency of a trickle, with markers left early (lead 903aa18: the markers of endpoints
# a claim took rows from are advanced at most every 50 ms).  a15_trickle.sh TAG BIN PORTBASE
# EPS partners with one endpoint each (inserted by SQL: at most 10 endpoints a partner through the
# API) at a14_recv.py (HTTPS, 200, 0-RDELAY s), WORKERS `serve --role worker` processes on
# pp_attack15_tr_TAG. Deliveries are written by SQL (a14_sql/tmpl.sql for one random partner, so
# one delivery to one endpoint, then NOTIFY as the announcer does):
#   warm:  a trickle at TRATE a second for WARM s;
#   burst: BURST deliveries to every endpoint in one statement (0: none), with the trickle going
#          on for TDUR s from the burst on;
# CONC/EPC: PARTNER_WEBHOOK_CONCURRENCY (256; a claim asks for at most twice that less what the
# worker holds, and visits at most that many endpoints) and _ENDPOINT_CONCURRENCY (4).
#   quiet: after the trickle, QUIET single deliveries one at a time, QGAP s apart (an endpoint's
#          marker then has been left early by the trickle's last claims, or not).
# A monitor samples every 0.1 s: markers, markers due with nothing due behind them (early), the
# invariant. a15_trjudge.py: first receipt - max(due, write time) of each delivery, by phase.
set -uo pipefail
TAG=$1 BIN=$2 PB=$3
D="$(cd "$(dirname "$0")" && pwd)"
OUT=$D/out/a15tr_$TAG; rm -rf "$OUT"; mkdir -p "$OUT"
DB=pp_attack15_tr_$TAG
export PGHOST=127.0.0.1 PGUSER=postgres PGPORT=5432
"$D/gen-certs.sh"
psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null
  [ "${KEEP:-0}" = 1 ] || psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres; }
trap cleanup EXIT
N=${EPS:-1000}
DATABASE_URL=postgres://postgres@127.0.0.1:5432/$DB "$BIN" migrate >"$OUT/migrate.log" 2>&1 || { tail "$OUT/migrate.log"; exit 1; }
RP=$((PB+9))
psql -q $DB -c "
  INSERT INTO partners (partner_id, name, email, active, dna_access, headless_links, default_lang, enabled_langs,
    cs_subscription_active, cs_manual_override, cs_yearly_bundle, cs_services, created_at, updated_at)
  SELECT 'a15p' || g, 'A15 ' || g, 'ops' || g || '@a15.test', true, false, true, 'en', '{en}', false, false, false, '{}', now(), now()
  FROM generate_series(1, $N) g;
  INSERT INTO webhook_endpoints (id, partner_id, url, events, secret, created_at, updated_at)
  SELECT gen_random_uuid(), 'a15p' || g, 'https://127.0.0.1:$RP/hook/' || g, '{lead.created}', NULL, now(), now()
  FROM generate_series(1, $N) g;
  CREATE TABLE a15_burst (id uuid);
  ANALYZE;"
ID=$(psql -Atc "SELECT COALESCE(to_regprocedure('uuid_v7()')::text, 'gen_random_uuid()')" $DB)
{ echo "\\set p random(1, $N)"
  sed -e "s/@ID@/$ID/g" -e "s/@N@/1/" -e "s/@DUE@/ev.created_at/g" -e "s/'demo-clinic'/'a15p' || :p/" "$D/a14_sql/tmpl.sql"; } >"$OUT/one.sql"
python3 "$D/a14_recv.py" --port $RP --log "$OUT/recv.log" --fail 0 --delay "${RDELAY:-0.005}" & PIDS+=($!)
COMMON=(DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB" PARTNER_WEBHOOK_ALLOW_PRIVATE=true
  PARTNER_WEBHOOK_CA_FILE="$D/certs/ca.pem" RUST_LOG="${RUST_LOG:-warn}" PARTNER_SHUTDOWN_DRAIN=0
  PARTNER_WEBHOOK_TIMEOUT="${TIMEOUT:-5s}" PARTNER_WEBHOOK_CONCURRENCY="${CONC:-256}"
  PARTNER_WEBHOOK_ENDPOINT_CONCURRENCY="${EPC:-4}")
for w in $(seq 1 "${WORKERS:-1}"); do
  env "${COMMON[@]}" PARTNER_BIND=127.0.0.1:$((PB + 2*w)) PARTNER_METRICS_BIND=127.0.0.1:$((PB + 2*w + 1)) \
    "$BIN" serve --no-migrate --role worker >"$OUT/w$w.log" 2>&1 & PIDS+=($!)
done
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$((PB+2))/readyz" >/dev/null && break; sleep 0.2; done
MON="SELECT extract(epoch FROM clock_timestamp()), count(*),
  count(*) FILTER (WHERE q.due_at <= now() AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.endpoint_id = q.endpoint_id
    AND d.status = 'pending' AND d.next_attempt_at <= now())),
  (SELECT count(*) FROM webhook_deliveries d LEFT JOIN webhook_endpoint_queue q2 ON q2.endpoint_id = d.endpoint_id
    WHERE d.status = 'pending' AND d.next_attempt_at IS NOT NULL AND (q2.endpoint_id IS NULL OR d.next_attempt_at < q2.due_at)),
  (SELECT count(*) FROM webhook_deliveries d WHERE d.status = 'pending')
  FROM webhook_endpoint_queue q"
( while :; do psql -AtF' ' -c "$MON" $DB; sleep 0.1; done >"$OUT/monitor.log" 2>&1 ) & PIDS+=($!)
ph() { echo "$1 $(date +%s.%N)" >>"$OUT/phases"; }
TRATE=${TRATE:-20}
ph warm
[ "${WARM:-10}" != 0 ] && pgbench -n -c 1 -R "$TRATE" -T "${WARM:-10}" -f "$OUT/one.sql" $DB >"$OUT/warm.log" 2>&1
ph burst
if [ "${BURST:-5}" != 0 ]; then
  psql -q $DB -c "
  WITH l AS (
    INSERT INTO leads (id, partner_id, first_name, last_name, email, email_consent, phone, sms_consent,
      origin, location, is_test, created_at, updated_at)
    SELECT gen_random_uuid(), 'a15p' || g, 'Burst', 'Lee', 'b@example.com', true, '+1 555 0100', true,
      'managed-website', 'Austin, TX', false, clock_timestamp(), clock_timestamp()
    FROM generate_series(1, $N) g, generate_series(1, ${BURST:-5}) k
    RETURNING id, partner_id, created_at),
  ev AS (
    INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at)
    SELECT $ID, partner_id, 'lead.created', id::text, '{}', created_at FROM l RETURNING id, partner_id, created_at),
  dl AS (
    INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, attempts, next_attempt_at, created_at)
    SELECT $ID, w.id, w.partner_id, ev.id, 'lead.created', 'pending', 0, ev.created_at, ev.created_at
    FROM ev JOIN webhook_endpoints w ON w.partner_id = ev.partner_id RETURNING id)
  INSERT INTO a15_burst SELECT id FROM dl;
  SELECT pg_notify('webhook_deliveries', '');"
  ph burst_written
fi
pgbench -n -c 1 -R "$TRATE" -T "${TDUR:-30}" -f "$OUT/one.sql" $DB >"$OUT/trickle.log" 2>&1 &
TP=$!
if [ "${BURST:-5}" != 0 ]; then
  for _ in $(seq 1 1200); do
    [ "$(psql -Atc "SELECT count(*) FROM webhook_deliveries d JOIN a15_burst b USING (id) WHERE d.status = 'pending'" $DB)" = 0 ] && break
    sleep 0.1; done
  ph burst_drained
fi
wait $TP
ph quiet
for _ in $(seq 1 "${QUIET:-20}"); do
  sleep "${QGAP:-0.5}"; pgbench -n -t 1 -c 1 -f "$OUT/one.sql" $DB >/dev/null 2>&1; done
ph end
for _ in $(seq 1 120); do
  [ "$(psql -Atc "SELECT count(*) FROM webhook_deliveries WHERE status = 'pending'" $DB)" = 0 ] && break; sleep 0.5; done
sleep 1
psql -At -F' ' -c "SELECT d.id, d.status, d.endpoint_id, extract(epoch FROM d.created_at), d.attempts, (b.id IS NOT NULL)
  FROM webhook_deliveries d LEFT JOIN a15_burst b USING (id)" $DB >"$OUT/deliveries.txt"
grep -h "WARN\|ERROR" "$OUT"/w*.log | cut -c1-200 | sort | uniq -c | sort -rn | head -5
python3 "$D/a15_trjudge.py" "$OUT"
