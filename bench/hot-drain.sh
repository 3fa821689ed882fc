#!/usr/bin/env bash
# PostgreSQL's work per webhook delivery with the server (issue 22; docs/decisions.md, "HOT
# updates of a delivery"), side by side, alternated round by round: each side is a server binary
# on a database of its own (migrated by it), optionally changed after its migrations (SETUP):
#   HOT_SIDES="main=/work/bin/partner-server-main noidx=/work/bin/partner-server-main:noidx"
# SETUP keywords: noidx (drop `webhook_deliveries`' event_idx, partner_idx and finished_idx: an
# upper bound of what sparing index maintenance at the claim's and the outcome's updates saves),
# ffNN (the heap's fill factor, for the rows written afterwards).
# Cases (HOT_CASES, default prefill1 prefill10 paced1): the pre-filled drains of bench/webhooks-ab.sh
# (20,000 deliveries to 1 / 10 endpoints) and its paced1 (200 events/s for 15 s to 1 endpoint).
# Per case and side: deliveries/s (the receiver's log), then per delivery: PostgreSQL CPU (user +
# system of the server's backends, /proc/<pid>/stat: they start with the server, so their totals
# are the case's; the writer's backends of paced1 are not in it), the server's CPU, WAL (this
# database's records in pg_waldump, without / with full-page images; a CHECKPOINT precedes each
# case), updates of `webhook_deliveries` and the share that were HOT, and the growth of its
# indexes and heap. Every line ends with the load average.
# Usage: HOT_SIDES="A=bin B=bin:setup" HOT_ROUNDS=3 bash bench/hot-drain.sh
# Ports: BENCH_PORT / BENCH_NGINX_PORT / BENCH_HANG_PORT as bench/webhooks-lib.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
SIDES=${HOT_SIDES:?HOT_SIDES=\"label=binary[:setup,...] ...\"}
ROUNDS=${HOT_ROUNDS:-2}
CASES=${HOT_CASES:-prefill1 prefill10 paced1}
N=${BENCH_EVENTS:-20000}
PREFIX=${HOT_DB:-hot23_drain}
PGWAL=${BENCH_PGWAL:-/var/lib/postgresql/15/main/pg_wal}
WALDUMP=${BENCH_WALDUMP:-/usr/lib/postgresql/15/bin/pg_waldump}
HZ=$(getconf CLK_TCK)

run() { # label binary setup database
  (
    export BENCH_DB=$4
    # shellcheck source=bench/webhooks-lib.sh
    source bench/webhooks-lib.sh
    BIN=$2
    trap wh_cleanup EXIT
    wh_start_receiver
    wh_prepare_db >/dev/null 2>&1
    for s in ${3//,/ }; do
      case $s in
        noidx) psql -q "$WH_DB" -c "DROP INDEX webhook_deliveries_event_idx, webhook_deliveries_partner_idx, webhook_deliveries_finished_idx" ;;
        ff*) psql -q "$WH_DB" -c "ALTER TABLE webhook_deliveries SET (fillfactor = ${s#ff})" ;;
        "") ;;
        *) echo "unknown setup $s" >&2; exit 2 ;;
      esac
    done
    DBOID=$(psql -Atq "$WH_DB" -c "SELECT oid FROM pg_database WHERE datname = current_database()")
    tabstat() { psql -Atq -F' ' "$WH_DB" -c "SELECT n_tup_upd, n_tup_hot_upd, pg_indexes_size('webhook_deliveries'), pg_relation_size('webhook_deliveries') FROM pg_stat_user_tables WHERE relname = 'webhook_deliveries'"; }
    backends() { # user+system ticks of this database's backends but this one
      local b=0
      for p in $(psql -Atq "$WH_DB" -c "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'"); do
        [ -r "/proc/$p/stat" ] && b=$((b + $(awk '{print $14 + $15}' "/proc/$p/stat")))
      done
      echo "$b"
    }
    for case in $CASES; do
      case $case in
        prefill1 | prefill10)
          n=${case#prefill}
          wh_endpoints "$n"
          wh_prefill $((N / n)) "$n"
          ;;
        paced1)
          wh_endpoints 1
          { echo "\\set p 1"; wh_event_sql; wh_notify_sql; } > "$WH_WORK/paced.sql"
          ;;
      esac
      wh_rotate_log
      psql -q "$WH_DB" -c CHECKPOINT
      sleep 0.6
      read -r u0 h0 i0 p0 <<<"$(tabstat)"
      lsn0=$(psql -Atq "$WH_DB" -c "SELECT pg_current_wal_lsn()")
      wh_start_server worker
      if [ "$case" = paced1 ]; then
        pgbench -n -c 2 -j 2 -R 200 -T 15 -f "$WH_WORK/paced.sql" "$WH_DB" >"$WH_WORK/pgbench.log" 2>&1
        wh_wait_done true 60
      else
        wh_wait_done true 300
      fi
      b1=$(backends)
      s1=$(awk '{print $14 + $15}' "/proc/$WH_SERVER/stat")
      lsn1=$(psql -Atq "$WH_DB" -c "SELECT pg_current_wal_lsn()")
      wh_stop_server
      sleep 0.6 # the backends' statistics, flushed at their exit
      read -r u1 h1 i1 p1 <<<"$(tabstat)"
      read -r count rate _ _ _ <<<"$(wh_arrivals)"
      read -r rec tot <<<"$("$WALDUMP" -p "$PGWAL" -s "$lsn0" -e "$lsn1" 2>/dev/null | awk -v db="/$DBOID/" '
        index($0, db) || / COMMIT / { if (match($0, /len \(rec\/tot\): +[0-9]+\/ *[0-9]+/)) { s = substr($0, RSTART, RLENGTH); sub(/.*: +/, "", s); split(s, a, "/"); r += a[1]; t += a[2] } }
        END { print r + 0, t + 0 }' || true)"
      all=$(psql -Atq "$WH_DB" -c "SELECT pg_wal_lsn_diff('$lsn1', '$lsn0')")
      awk -v l="$1" -v c="$case" -v d="$count" -v rate="$rate" -v b="$b1" -v s="$s1" -v hz="$HZ" -v rec="$rec" -v tot="$tot" -v all="$all" \
        -v u="$((u1 - u0))" -v h="$((h1 - h0))" -v di="$((i1 - i0))" -v dh="$((p1 - p0))" -v la="$(cut -d' ' -f1 /proc/loadavg)" 'BEGIN {
        printf "%-7s %-9s %6d delivered %6d/s  PG CPU %6.1f us  server %6.1f us  WAL %5.0f B (FPI incl. %5.0f, cluster %5.0f)  HOT %5.1f %% of %6d updates  index +%5.1f B  heap +%5.1f B  per delivery; load %s\n",
          l, c, d, rate, 1e6 * b / hz / d, 1e6 * s / hz / d, rec / d, tot / d, all / d, 100 * h / (u > 0 ? u : 1), u, di / d, dh / d, la }'
    done
  )
}

echo "== $(date -u +%T) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); sides: $SIDES; cases: $CASES"
for r in $(seq 1 "$ROUNDS"); do
  echo "-- round $r ($(date -u +%T))"
  for side in $SIDES; do
    label=${side%%=*}; rest=${side#*=}; bin=${rest%%:*}; setup=""
    [ "$rest" = "$bin" ] || setup=${rest#*:}
    run "$label" "$bin" "$setup" "${PREFIX}_$label"
  done
done
[ -n "${HOT_KEEP_DB:-}" ] || for side in $SIDES; do psql -h 127.0.0.1 -U postgres -qc "DROP DATABASE IF EXISTS ${PREFIX}_${side%%=*} WITH (FORCE)" postgres; done
