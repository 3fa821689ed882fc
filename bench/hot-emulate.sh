#!/usr/bin/env bash
# What HOT updates of `webhook_deliveries` would save PostgreSQL per delivery (issue 22; docs/decisions.md,
# "HOT updates of a delivery"), measured without the server: a pre-filled backlog is drained by a
# PL/pgSQL procedure running the write path of a drain, statement by statement as the server
# writes it (each its own transaction, plans cached as the server's prepared statements are):
#   claim    the endpoints whose marker is due (random order), each one's oldest due rows from
#            the marker on, `FOR UPDATE SKIP LOCKED`, updated by `ctid` (claim.rs `CLAIM_SQL`
#            without the read of the payload that follows it);
#   outcome  `delivered` by id under the lease, with the attempt row (webhooks.rs `RECORD_SQL`);
#   advance  every 4th claim, the markers moved to their earliest pending delivery
#            (claim.rs `LOCK_MARKERS_SQL` + `ADVANCE_SQL`; the server: at most every 50 ms).
# Variants, each on a fresh copy of the same pre-filled database, alternated round by round:
#   main     the claim moves `next_attempt_at` to the lease's expiry (indexed: never HOT);
#   main85   the same with the heap's fill factor at 85;
#   leased   the claim writes the expiry into an unindexed `leased_until` and leaves
#            `next_attempt_at` (the probe skips rows leased until later): no indexed column
#            changes, so the claim's update may be HOT when the row's page has room;
#   leased85 the same with fill factor 85 (leased70, leased50: 70, 50);
#   noidx    main with `event_idx`, `partner_idx` and `finished_idx` dropped: an upper bound of
#            what not maintaining indexes at the claim's update (and the outcome's) saves.
# Per delivery: WAL bytes (this database's records in pg_waldump, without and with full-page
# images; a CHECKPOINT precedes every drain, so each page's first change logs its image),
# PostgreSQL CPU (/proc/<pid>/stat of the procedure's backend, user + system), wall time,
# updates and HOT updates (pg_stat_user_tables), index entries written (index size growth).
# Usage: bash bench/hot-emulate.sh   (HOT_N deliveries, default 20,000; HOT_ENDPOINTS, default 10;
#   HOT_ROUNDS, default 2; HOT_VARIANTS; HOT_DB prefix, default hot23_emu)
set -euo pipefail
cd "$(dirname "$0")/.."
export PGHOST=${PGHOST:-127.0.0.1} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
P=${HOT_DB:-hot23_emu}
N=${HOT_N:-20000}
NE=${HOT_ENDPOINTS:-10}
ROUNDS=${HOT_ROUNDS:-2}
VARIANTS=${HOT_VARIANTS:-main leased leased85 main85 noidx}
# HOT_LIVE=K: nothing pre-filled; the procedure writes N events (one delivery each, endpoints in
# turn), K of them before each claim, as deliveries arrive live (the claim then finds its rows on
# the table's last pages, where the inserts left room or not).
LIVE_K=${HOT_LIVE:-0}
PREFILL=$N; LIVE=0
[ "$LIVE_K" = 0 ] || { PREFILL=0; LIVE=$N; }
PGWAL=${BENCH_PGWAL:-/var/lib/postgresql/15/main/pg_wal}
WALDUMP=${BENCH_WALDUMP:-/usr/lib/postgresql/15/bin/pg_waldump}
HZ=$(getconf CLK_TCK)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
q() { psql -qX -v ON_ERROR_STOP=1 "$@"; }

# The template: every migration, NE endpoints, N deliveries spread over them (with their events),
# the drain's procedure, and the unindexed `leased_until` (in every variant, so rows are the same).
q -c "DROP DATABASE IF EXISTS ${P}_t WITH (FORCE)" -c "CREATE DATABASE ${P}_t" postgres
for m in migrations/*/up.sql; do
  case $m in *000026*) continue ;; esac # this branch's own migration is what the variants emulate
  q "${P}_t" -f "$m" >/dev/null
done
q "${P}_t" <<SQL
ALTER TABLE webhook_deliveries ADD COLUMN IF NOT EXISTS leased_until timestamptz;
INSERT INTO partners (partner_id, name, email, active, dna_access, headless_links, default_lang, enabled_langs,
  cs_subscription_active, cs_manual_override, cs_yearly_bundle, cs_services, created_at, updated_at)
SELECT 'wh-' || g, 'Bench ' || g, 'ops' || g || '@bench.test', true, false, true, 'en', '{en}',
  false, false, false, '{}', now(), now() FROM generate_series(1, $NE) g;
INSERT INTO webhook_endpoints (id, partner_id, url, events, secret, created_at, updated_at)
SELECT gen_random_uuid(), 'wh-' || g, 'https://127.0.0.1:9/hook/' || g, '{lead.created}',
  'whsec_bench0123456789abcdefghijklmnopqrstuvwxyzABCD', now(), now() FROM generate_series(1, $NE) g;
WITH ev AS (
  INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at)
  SELECT uuid_v7(), 'wh-' || (1 + g % $NE), 'lead.created', gen_random_uuid()::text, '{}', clock_timestamp()
  FROM generate_series(0, $PREFILL - 1) g RETURNING id, partner_id, created_at)
INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, attempts, next_attempt_at, created_at)
SELECT uuid_v7(), w.id, w.partner_id, ev.id, 'lead.created', 'pending', 0, ev.created_at, ev.created_at
FROM ev JOIN webhook_endpoints w ON w.partner_id = ev.partner_id;

-- The drain: claims of at most room rows an endpoint and lim in all, each followed by its
-- outcome; every 4th claim, the advance of the markers. leased: the claim's lease in leased_until.
CREATE PROCEDURE hot_drain(room int, lim int, leased bool, live int, live_k int) LANGUAGE plpgsql AS \$\$
DECLARE i int := 0; t timestamptz; ids uuid[]; leases uuid[]; eps uuid[]; written int := 0; k int;
BEGIN
  LOOP
    i := i + 1;
    -- live: live_k events first (each its own transaction, as ingest writes them), until live are written
    FOR k IN 1..LEAST(live_k, live - written) LOOP
      WITH ev AS (
        INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at)
        VALUES (uuid_v7(), 'wh-' || (1 + (written % $NE)), 'lead.created', gen_random_uuid()::text, '{}', clock_timestamp())
        RETURNING id, partner_id, created_at)
      INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, attempts, next_attempt_at, created_at)
      SELECT uuid_v7(), w.id, w.partner_id, ev.id, 'lead.created', 'pending', 0, ev.created_at, ev.created_at
      FROM ev JOIN webhook_endpoints w ON w.partner_id = ev.partner_id;
      written := written + 1;
      COMMIT;
    END LOOP;
    t := clock_timestamp();
    IF leased THEN
      WITH ep AS MATERIALIZED (
        SELECT q.endpoint_id AS id, q.due_at FROM webhook_endpoint_queue q
        WHERE q.due_at <= t AND (SELECT e.disabled_at IS NULL FROM webhook_endpoints e WHERE e.id = q.endpoint_id)
        ORDER BY random() LIMIT lim),
      picked AS (
        SELECT p.id, p.tid FROM ep CROSS JOIN LATERAL (
          SELECT d.id, d.ctid AS tid FROM webhook_deliveries d
          WHERE d.endpoint_id = ep.id AND d.status = 'pending' AND d.next_attempt_at >= ep.due_at
            AND d.next_attempt_at <= t AND (d.leased_until IS NULL OR d.leased_until <= t)
            AND d.attempts - d.attempt_base < 10
          ORDER BY d.next_attempt_at LIMIT room FOR UPDATE SKIP LOCKED) p LIMIT lim),
      claimed AS (
        UPDATE webhook_deliveries d SET attempts = d.attempts + 1, leased_until = t + interval '65 s',
          lease_token = gen_random_uuid()
        FROM picked WHERE d.ctid = picked.tid RETURNING d.id, d.lease_token, d.endpoint_id)
      SELECT array_agg(id), array_agg(lease_token), array_agg(DISTINCT endpoint_id) INTO ids, leases, eps FROM claimed;
    ELSE
      WITH ep AS MATERIALIZED (
        SELECT q.endpoint_id AS id, q.due_at FROM webhook_endpoint_queue q
        WHERE q.due_at <= t AND (SELECT e.disabled_at IS NULL FROM webhook_endpoints e WHERE e.id = q.endpoint_id)
        ORDER BY random() LIMIT lim),
      picked AS (
        SELECT p.id, p.tid FROM ep CROSS JOIN LATERAL (
          SELECT d.id, d.ctid AS tid FROM webhook_deliveries d
          WHERE d.endpoint_id = ep.id AND d.status = 'pending' AND d.next_attempt_at >= ep.due_at
            AND d.next_attempt_at <= t AND d.attempts - d.attempt_base < 10
          ORDER BY d.next_attempt_at LIMIT room FOR UPDATE SKIP LOCKED) p LIMIT lim),
      claimed AS (
        UPDATE webhook_deliveries d SET attempts = d.attempts + 1, next_attempt_at = t + interval '65 s',
          lease_token = gen_random_uuid()
        FROM picked WHERE d.ctid = picked.tid RETURNING d.id, d.lease_token, d.endpoint_id)
      SELECT array_agg(id), array_agg(lease_token), array_agg(DISTINCT endpoint_id) INTO ids, leases, eps FROM claimed;
    END IF;
    COMMIT;
    EXIT WHEN ids IS NULL AND written >= live;
    CONTINUE WHEN ids IS NULL;
    WITH u AS (SELECT * FROM unnest(ids, leases) AS u(id, lease)),
    done AS (
      UPDATE webhook_deliveries d SET status = 'delivered', delivered_at = clock_timestamp(), next_attempt_at = NULL,
        last_attempt_at = clock_timestamp(), last_status_code = 200, last_error = NULL, lease_token = NULL,
        leased_until = NULL
      FROM u WHERE d.id = ANY(ids) AND d.id = u.id AND d.lease_token = u.lease AND d.status = 'pending'
      RETURNING d.id, d.last_attempt_at)
    INSERT INTO webhook_attempts (delivery_id, attempted_at, status_code, duration_ms, error)
    SELECT id, last_attempt_at, 200, 5, NULL FROM done;
    COMMIT;
    IF i % 4 = 0 THEN
      PERFORM 1 FROM webhook_endpoint_queue WHERE endpoint_id = ANY(eps) FOR UPDATE SKIP LOCKED;
      WITH n AS (
        SELECT q.endpoint_id, COALESCE(
          (SELECT min(d.next_attempt_at) FROM webhook_deliveries d
            WHERE d.endpoint_id = q.endpoint_id AND d.status = 'pending' AND d.next_attempt_at >= q.due_at),
          (SELECT min(d.next_attempt_at) FROM webhook_deliveries d
            WHERE d.endpoint_id = q.endpoint_id AND d.status = 'pending')) AS due
        FROM webhook_endpoint_queue q WHERE q.endpoint_id = ANY(eps)),
      gone AS (DELETE FROM webhook_endpoint_queue q USING n WHERE q.endpoint_id = n.endpoint_id AND n.due IS NULL)
      UPDATE webhook_endpoint_queue q SET due_at = n.due FROM n WHERE q.endpoint_id = n.endpoint_id AND n.due <> q.due_at;
      COMMIT;
    END IF;
  END LOOP;
END \$\$;
SQL
echo "== template ${P}_t: $PREFILL deliveries pre-filled, $LIVE written live ($LIVE_K before each claim), to $NE endpoint(s); $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
DBOID=""

run() { # variant
  local v=$1 db=${P}_v ff=100 leased=false setup=""
  case $v in
    main) ;;
    main85) ff=85 ;;
    leased) leased=true ;;
    leased85) ff=85; leased=true ;;
    leased70) ff=70; leased=true ;;
    leased50) ff=50; leased=true ;;
    noidx) setup="DROP INDEX webhook_deliveries_event_idx, webhook_deliveries_partner_idx, webhook_deliveries_finished_idx;" ;;
    *) echo "unknown variant $v" >&2; exit 2 ;;
  esac
  q -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db TEMPLATE ${P}_t" postgres
  q "$db" -c "$setup ALTER TABLE webhook_deliveries SET (fillfactor = $ff)" -c "VACUUM FULL webhook_deliveries" \
    -c "VACUUM ANALYZE webhook_deliveries" -c "VACUUM ANALYZE webhook_attempts" -c "VACUUM ANALYZE webhook_endpoint_queue"
  DBOID=$(q -Atc "SELECT oid FROM pg_database WHERE datname = '$db'" postgres)
  local idx0 heap0 upd0 hot0
  read -r idx0 heap0 <<<"$(q -At -F' ' "$db" -c "SELECT pg_indexes_size('webhook_deliveries'), pg_relation_size('webhook_deliveries')")"
  read -r upd0 hot0 <<<"$(q -At -F' ' "$db" -c "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'webhook_deliveries'")"
  q -c CHECKPOINT postgres
  cat >"$work/drain.sql" <<SQL
SELECT pg_backend_pid() AS bpid, pg_current_wal_lsn() AS lsn0 \gset
\setenv BPID :bpid
\! awk '{print \$14 + \$15}' /proc/\$BPID/stat > $work/t0
SELECT extract(epoch FROM clock_timestamp()) AS w0 \gset
CALL hot_drain(32, 128, $leased, $LIVE, $LIVE_K);
SELECT extract(epoch FROM clock_timestamp()) - :w0 AS wall, pg_current_wal_lsn() AS lsn1 \gset
\! awk '{print \$14 + \$15}' /proc/\$BPID/stat > $work/t1
\o $work/out
SELECT :'lsn0', :'lsn1', :wall, pg_wal_lsn_diff(:'lsn1', :'lsn0');
SQL
  q -At -F' ' "$db" -f "$work/drain.sql"
  local lsn0 lsn1 wall walall t0 t1 left upd1 hot1 idx1 heap1
  read -r lsn0 lsn1 wall walall <"$work/out"
  t0=$(cat "$work/t0"); t1=$(cat "$work/t1")
  sleep 0.6 # the backend's statistics, flushed at its exit
  read -r left <<<"$(q -At "$db" -c "SELECT count(*) FROM webhook_deliveries WHERE status = 'pending'")"
  read -r upd1 hot1 <<<"$(q -At -F' ' "$db" -c "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'webhook_deliveries'")"
  read -r idx1 heap1 <<<"$(q -At -F' ' "$db" -c "SELECT pg_indexes_size('webhook_deliveries'), pg_relation_size('webhook_deliveries')")"
  # This database's WAL records: the sum of rec (without full-page images) and tot (with them).
  read -r rec tot <<<"$("$WALDUMP" -p "$PGWAL" -s "$lsn0" -e "$lsn1" 2>/dev/null | awk -v db="/$DBOID/" '
    index($0, db) || / COMMIT / { if (match($0, /len \(rec\/tot\): +[0-9]+\/ *[0-9]+/)) { s = substr($0, RSTART, RLENGTH); sub(/.*: +/, "", s); split(s, a, "/"); r += a[1]; t += a[2] } }
    END { print r + 0, t + 0 }' || true)"
  awk -v v="$v" -v n="$N" -v left="$left" -v wall="$wall" -v t0="$t0" -v t1="$t1" -v hz="$HZ" -v rec="$rec" -v tot="$tot" \
    -v all="$walall" -v u="$((upd1 - upd0))" -v h="$((hot1 - hot0))" -v di="$((idx1 - idx0))" -v dh="$((heap1 - heap0))" \
    -v la="$(cut -d" " -f1 /proc/loadavg)" 'BEGIN {
      d = n - left
      printf "%-9s %6d delivered  PG CPU %6.1f us  wall %6.1f us  WAL %5.0f B (with FPI %5.0f, cluster %5.0f)  HOT %5.1f %% of %d updates  index +%6.1f B  heap +%6.1f B  per delivery; load %s\n",
        v, d, 1e6 * (t1 - t0) / hz / d, 1e6 * wall / d, rec / d, tot / d, all / d, 100 * h / (u > 0 ? u : 1), u, di / d, dh / d, la }'
}

for r in $(seq 1 "$ROUNDS"); do
  echo "-- round $r ($(date -u +%T))"
  for v in $VARIANTS; do run "$v"; done
done
[ -n "${HOT_KEEP_DB:-}" ] || q -c "DROP DATABASE IF EXISTS ${P}_v WITH (FORCE)" -c "DROP DATABASE IF EXISTS ${P}_t WITH (FORCE)" postgres
