#!/usr/bin/env bash
# The outbox's churn without the server (issue 22, "table sizes level off"): on a copy of a
# database of bench/dataset.sh, pgbench writes, claims, records and prunes webhook deliveries with
# the server's statements' effect on `webhook_deliveries` and its indexes, and reports every
# index's size as the rows turn over, then each index's `pgstatindex()`.
# Per lead (one pgbench transaction of the writer, CHURN_RATE a second, 4 clients): its event and
# a pending delivery to each enabled endpoint of its partner (uuid_v7 ids, created_at = now(), as
# outbox.rs's WRITE_SQL); then, each a transaction of its own and by primary key, the claim's
# update (attempts, next_attempt_at, lease_token, as claim.rs) and the outcome's (status
# delivered, delivered_at, last_attempt_at, lease_token NULL, as webhooks.rs's RECORD_SQL) with
# its attempt row. Neither update is HOT (both change an indexed column or a partial index's
# predicate), as the server's.
# The prune (one client, CHURN_RATE * 10 / 500 a second: as many deliveries as written) walks the
# finished deliveries 500 at a time in created_at order from a mark and deletes them, as
# retention.rs's DELIVERIES_SQL: the table keeps its row count, and every row of the dataset is
# replaced after rows / (10 * CHURN_RATE) seconds.
# Vacuum: autovacuum's rule applied once a minute (as bench/soak.sh's stand-in) when the server
# runs with autovacuum = off; else the server's autovacuum.
# CHURN_PARTNERS=big: every lead is ds-big's (as bench/soak.sh's ingest); =all: a partner drawn at
# random among all the dataset's partners for each lead (many tenants, each writing at its own
# point of the per-partner indexes).
# CHURN_SETUP: SQL run on the copy before the churn (e.g. an index rebuilt another way);
# CHURN_CLAIM_SET, CHURN_OUTCOME_DELAY_MS, CHURN_CLIENTS and CHURN_V7 below. Prints, every
# CHURN_EVERY seconds, the deliveries written since the start, the rows, the heap and each index
# in MB and the share of HOT updates.
# Measured (2026-11-27): docs/performance.md, "webhook_deliveries' indexes under retention".
# Usage: CHURN_FROM=pp_ds CHURN_DB=pp_x_churn CHURN_MINUTES=10 CHURN_RATE=100 bash bench/index-churn.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PGHOST=127.0.0.1 PGPORT=5432 PGUSER=postgres
FROM=${CHURN_FROM:?CHURN_FROM=<database made by bench/dataset.sh>}
DB=${CHURN_DB:?CHURN_DB=<copy to make, dropped first>}
MINUTES=${CHURN_MINUTES:-10}
RATE=${CHURN_RATE:-100}
MODE=${CHURN_PARTNERS:-big}
EVERY=${CHURN_EVERY:-60}
q() { psql -q -v ON_ERROR_STOP=1 -X "$DB" "$@"; }
WORK=$(mktemp -d /tmp/pp-churn.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

psql -qX -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB TEMPLATE $FROM" postgres
q -c "CREATE EXTENSION IF NOT EXISTS pgstattuple"
# CHURN_V7=1: the dataset's delivery and event ids (md5, random) rewritten time-ordered first
# (the uuid_v7 layout of migration 000016 with the row's created_at and the md5's random bits),
# as in a database that has run with uuid_v7 ids for longer than its retention.
if [ "${CHURN_V7:-0}" = 1 ]; then
  q <<'SQL'
CREATE FUNCTION pg_temp.v7(id uuid, at timestamptz) RETURNS uuid IMMUTABLE LANGUAGE sql AS $$
  SELECT encode(set_bit(set_bit(overlay(uuid_send(id) PLACING substring(int8send(floor(extract(epoch FROM at) * 1000)::bigint) FROM 3)
    FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid $$;
ALTER TABLE webhook_attempts DROP CONSTRAINT webhook_attempts_delivery_id_fkey;
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_event_id_fkey;
SET session_replication_role = replica;
UPDATE webhook_attempts a SET delivery_id = pg_temp.v7(d.id, d.created_at) FROM webhook_deliveries d WHERE a.delivery_id = d.id;
UPDATE webhook_deliveries d SET event_id = pg_temp.v7(e.id, e.created_at) FROM domain_events e WHERE d.event_id = e.id;
UPDATE webhook_deliveries SET id = pg_temp.v7(id, created_at);
UPDATE domain_events SET id = pg_temp.v7(id, created_at);
RESET session_replication_role;
ALTER TABLE webhook_attempts ADD CONSTRAINT webhook_attempts_delivery_id_fkey FOREIGN KEY (delivery_id) REFERENCES webhook_deliveries (id) ON DELETE CASCADE;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_event_id_fkey FOREIGN KEY (event_id) REFERENCES domain_events (id);
VACUUM FULL webhook_deliveries;
VACUUM FULL webhook_attempts;
VACUUM FULL domain_events;
SQL
fi
[ -z "${CHURN_SETUP:-}" ] || q -c "$CHURN_SETUP"
q -c "VACUUM (ANALYZE) webhook_deliveries" -c CHECKPOINT
NP=$(q -Atc "SELECT count(*) FROM partners")
ROWS=$(q -Atc "SELECT count(*) FROM webhook_deliveries")

stats() { # label: pgstatindex of every index of webhook_deliveries
  q -P pager=off -c "SELECT '$1' AS at, c.relname AS index, pg_relation_size(c.oid) / 1048576 AS mb, s.tree_level AS lvl, s.leaf_pages,
      s.empty_pages, s.deleted_pages, s.avg_leaf_density AS leaf_density, s.leaf_fragmentation AS frag
    FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid, pgstatindex(c.oid::regclass) s
    WHERE x.indrelid = 'webhook_deliveries'::regclass ORDER BY c.relname"
}
sizes() { # one line: heap and each index in MB (1 decimal)
  q -Atc "SELECT 'heap ' || round(pg_relation_size('webhook_deliveries') / 1048576.0, 1) || '; ' || string_agg(
      replace(c.relname, 'webhook_deliveries_', '') || ' ' || round(pg_relation_size(c.oid) / 1048576.0, 1), '; ' ORDER BY c.relname)
    FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid WHERE x.indrelid = 'webhook_deliveries'::regclass"
}

# CHURN_CLAIM_SET: the claim's SET list (default the server's columns; e.g. without
# next_attempt_at, a claim that changes no indexed column and can be HOT).
# CHURN_OUTCOME_DELAY_MS: a pause between the claim and the outcome (the server's HTTP request),
# CHURN_CLIENTS the writer's clients (default 4).
DELAY=; [ "${CHURN_OUTCOME_DELAY_MS:-0}" = 0 ] || DELAY="\\sleep ${CHURN_OUTCOME_DELAY_MS} ms"
CLAIM_SET=${CHURN_CLAIM_SET:-"attempts = attempts + 1, next_attempt_at = now() + interval '30 s', lease_token = gen_random_uuid()"}
# The writer: one lead, then its claim, then its outcome (three transactions, as the server).
if [ "$MODE" = big ]; then PICK="SELECT 'ds-big' AS partner \\gset"; else
  PICK="\\set pi random(1, $NP)
SELECT CASE WHEN :pi = 1 THEN 'ds-big' ELSE 'ds-' || :pi END AS partner \\gset"; fi
cat >"$WORK/write.sql" <<SQL
$PICK
WITH ev AS (INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at)
    VALUES (uuid_v7(), ':partner', 'lead.created', 'churn', '{}'::jsonb, now()) RETURNING id),
  d AS (INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, attempts, next_attempt_at, created_at)
    SELECT uuid_v7(), w.id, w.partner_id, ev.id, 'lead.created', 'pending', 0, now(), now()
    FROM webhook_endpoints w, ev WHERE w.partner_id = ':partner' AND w.disabled_at IS NULL RETURNING id)
SELECT array_agg(id) AS ids FROM d \\gset
UPDATE webhook_deliveries SET $CLAIM_SET
  WHERE id = ANY (':ids'::uuid[]) AND status = 'pending';
$DELAY
WITH done AS (UPDATE webhook_deliveries SET status = 'delivered', delivered_at = now(), next_attempt_at = NULL,
    last_attempt_at = now(), last_status_code = 200, last_error = NULL, lease_token = NULL
  WHERE id = ANY (':ids'::uuid[]) AND status = 'pending' RETURNING id)
INSERT INTO webhook_attempts (delivery_id, attempted_at, status_code, duration_ms) SELECT id, now(), 200, 20 FROM done;
SQL
# The prune: the next 500 finished deliveries after the mark, in created_at order.
cat >"$WORK/prune.sql" <<'SQL'
WITH walk AS MATERIALIZED (
  SELECT d.id, d.created_at FROM webhook_deliveries d
  WHERE d.status <> 'pending' AND d.created_at >= ':mat' AND (d.created_at, d.id) > (':mat'::timestamptz, ':mid'::uuid)
  ORDER BY d.created_at, d.id LIMIT 500),
gone AS (DELETE FROM webhook_deliveries d USING walk w WHERE d.id = w.id AND d.status <> 'pending' RETURNING 1)
SELECT COALESCE(max(created_at), ':mat'::timestamptz) AS mat,
  COALESCE((array_agg(id ORDER BY created_at DESC, id DESC))[1], ':mid'::uuid) AS mid FROM walk \gset
SQL

# Autovacuum's rule, once a minute, as bench/soak.sh's stand-in (when autovacuum is off).
HOT="'webhook_deliveries','webhook_attempts','domain_events','webhook_endpoint_queue'"
vacuum_standin() {
  while sleep 60; do
    for t in $(q -Atc "
      SELECT c.relname FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid
      WHERE c.relname IN ($HOT) AND s.n_dead_tup > COALESCE((SELECT option_value::float8 FROM pg_options_to_table(c.reloptions)
          WHERE option_name = 'autovacuum_vacuum_threshold'), current_setting('autovacuum_vacuum_threshold')::float8)
        + COALESCE((SELECT option_value::float8 FROM pg_options_to_table(c.reloptions) WHERE option_name = 'autovacuum_vacuum_scale_factor'),
          current_setting('autovacuum_vacuum_scale_factor')::float8) * c.reltuples"); do
      local t0; t0=$(date +%s)
      q -c "SET vacuum_cost_delay = '2ms'" -c "SET vacuum_cost_limit = 200" -c "VACUUM (ANALYZE, PARALLEL 0) $t" || true
      [ "$t" != webhook_deliveries ] || echo "$(date -u +%T) vacuum $t $(( $(date +%s) - t0 )) s" >>"$WORK/vacuum.log"
    done
  done
}

AV=$(q -Atc "SHOW autovacuum")
echo "== $DB (copy of $FROM): $ROWS deliveries, $NP partners; leads of $MODE at $RATE/s (x ~10 deliveries), pruned as fast; $MINUTES min; autovacuum $AV; load $(cut -d' ' -f1-3 /proc/loadavg)"
[ "${CHURN_V7:-0}" = 0 ] || echo "== ids of the dataset's deliveries and events rewritten time-ordered (CHURN_V7=1)"
[ -z "${CHURN_SETUP:-}" ] || echo "== setup: $CHURN_SETUP"
[ -z "${CHURN_CLAIM_SET:-}" ] || echo "== claim: SET $CLAIM_SET"
stats before
: >"$WORK/vacuum.log"
[ "$AV" = on ] || { vacuum_standin & PIDS+=($!); }
START=$(q -Atc "SELECT now()")
T=$((MINUTES * 60))
pgbench -n -f "$WORK/write.sql" -c "${CHURN_CLIENTS:-4}" -j 1 -R "$RATE" -T "$T" "$DB" >"$WORK/write.out" 2>&1 &
WRITER=$!; PIDS+=($!)
pgbench -n -f "$WORK/prune.sql" -c 1 -j 1 -R "$(awk -v r="$RATE" 'BEGIN {print r * 10 / 500}')" -T "$T" \
  -D mat=0001-01-01 -D mid=00000000-0000-0000-0000-000000000000 "$DB" >"$WORK/prune.out" 2>&1 &
PRUNER=$!; PIDS+=($!)
printf '%-5s | %9s | %9s | %s\n' sec written rows "sizes MB"
for s in $(seq "$EVERY" "$EVERY" "$T"); do
  sleep "$EVERY"
  read -r w n <<<"$(q -Atc "SELECT count(*) FILTER (WHERE created_at >= '$START'), count(*) FROM webhook_deliveries" | tr '|' ' ')"
  hot=$(q -Atc "SELECT n_tup_hot_upd * 100 / greatest(n_tup_upd, 1) FROM pg_stat_user_tables WHERE relname = 'webhook_deliveries'")
  printf '%-5s | %9s | %9s | %s | HOT %s %% | load %s\n' "$s" "$w" "$n" "$(sizes)" "$hot" "$(cut -d' ' -f1-3 /proc/loadavg)"
  [ ! -s "$WORK/vacuum.log" ] || { sed 's/^/      /' "$WORK/vacuum.log"; : >"$WORK/vacuum.log"; }
done
wait "$WRITER" "$PRUNER" 2>/dev/null || true
grep -h "tps\|latency average\|number of transactions actually\|rror\|abort" "$WORK/write.out" "$WORK/prune.out" | head -20 | sed 's/^/   pgbench: /'
stats "end (before a final vacuum)"
q -c "VACUUM webhook_deliveries"
stats "end, after VACUUM"
echo "== end: $(sizes); load $(cut -d' ' -f1-3 /proc/loadavg)"
