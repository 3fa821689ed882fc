#!/usr/bin/env bash
# The pre-filled drain of bench/webhooks-dataset.sh (2,000 events to `ds-big`'s 10 endpoints,
# 20,000 deliveries, one `--role worker`) on two databases of bench/dataset.sh, alternating A, B,
# A, B … (issue 22, item 3: the big dataset against the small one, same binary, same window).
# Per round, besides the script's deliveries/s: the load average before and after, the CPU the
# machine spent meanwhile at nice > 0 (other sessions' builds) and not idle (/proc/stat), the
# database's blocks read and hit, the cluster's WAL, full-page images and checkpoints
# (`pg_stat_wal`, `pg_stat_bgwriter`: cluster-wide), the dead versions in `webhook_deliveries`
# before the round, and the claim statement's own time (the server's debug line "webhook claim
# statement", `claim_us`: count, median, p90 and sum). At the end: per database the median and
# the sum of deliveries/s, and A ÷ B by the median of the pairs' ratios and by the sums.
# Usage: BENCH_BIN=<partner-server> bash bench/dataset-prefill-ab.sh <db A> <db B>
#   PREFILL_AB_ROUNDS (default 3) pairs; PREFILL_AB_VACUUM=1 runs `VACUUM (ANALYZE)` of the
#   webhook tables before each round (both sides, not timed); PREFILL_AB_OUT (default a new
#   directory under /tmp) keeps each round's output and server log; BENCH_PORT as in
#   bench/webhooks-lib.sh. Loopback only; writes what bench/webhooks-dataset.sh writes.
set -euo pipefail
cd "$(dirname "$0")/.."
export PGHOST=127.0.0.1 PGPORT=${BENCH_PGPORT:-5432} PGUSER=postgres
A=${1:?database A}
B=${2:?database B}
: "${BENCH_BIN:?BENCH_BIN=<partner-server binary>}"
ROUNDS=${PREFILL_AB_ROUNDS:-3}
OUT=${PREFILL_AB_OUT:-$(mktemp -d /tmp/prefill-ab.XXXXXX)}
mkdir -p "$OUT"

snap() { # db: blks_read blks_hit wal_records wal_fpi wal_bytes checkpoints buffers_backend dead_tuples
  psql -Atq -F' ' "$1" -c "
    SELECT d.blks_read, d.blks_hit, w.wal_records, w.wal_fpi, w.wal_bytes,
      b.checkpoints_timed + b.checkpoints_req, b.buffers_backend,
      (SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'webhook_deliveries')
    FROM pg_stat_database d, pg_stat_wal w, pg_stat_bgwriter b WHERE d.datname = current_database()"
}
cpu() { # jiffies: nice, busy (all but idle and iowait), total
  awk '/^cpu / {print $3, $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat
}

# bench/webhooks-dataset.sh's hook: the counters just before the worker starts ("prefilled") and
# once it has stopped ("drained"), so that the deltas are the drain's own (not the writes and the
# ANALYZE of the pre-fill, nor the arrivals' analysis).
hook() {
  local f="$PREFILL_AB_TAG.$1"
  snap "$PREFILL_AB_DB" >"$f.snap"; cpu >"$f.cpu"; cut -d' ' -f1-3 /proc/loadavg >"$f.load"
  psql -Atq -F' ' "$PREFILL_AB_DB" -c "
    SELECT 'heap:' || relname, heap_blks_read, heap_blks_hit FROM pg_statio_user_tables
    UNION ALL SELECT 'idx:' || indexrelname, idx_blks_read, idx_blks_hit FROM pg_statio_user_indexes" >"$f.rel"
}
export -f hook snap cpu
export BENCH_WH_HOOK=hook

printf '%-5s %-26s %6s %8s %-16s %-16s %6s %6s %8s %8s %7s %7s %3s %9s %6s %7s %7s %8s  %s\n' \
  round db count "deliv/s" "load before" "load after" "nice%" "busy%" blks_read blks_hit fpi "WAL MB" ckp dead_before claims "p50 ms" "p90 ms" "sum ms" "top reads" | tee "$OUT/table.txt"
echo "(the columns after deliv/s are the drain's own: from the backlog written to the worker stopped; top reads: blocks read by relation)" | tee -a "$OUT/table.txt"
for r in $(seq 1 "$ROUNDS"); do
  for db in "$A" "$B"; do
    if [ -n "${PREFILL_AB_VACUUM:-}" ]; then
      # "index": index cleanup forced (INDEX_CLEANUP ON). By default VACUUM skips the index pass
      # when fewer than 2 % of the table's pages hold dead items: on the big dataset a round's
      # dead versions are far below that (their index entries stay), on the small one not.
      opt=ANALYZE; [ "$PREFILL_AB_VACUUM" != index ] || opt="ANALYZE, INDEX_CLEANUP ON"
      psql -q "$db" -c "VACUUM ($opt) webhook_deliveries" -c "VACUUM ($opt) webhook_endpoint_queue" \
        -c "VACUUM ($opt) webhook_attempts" -c "VACUUM ($opt) domain_events" -c "VACUUM ($opt) leads"
    fi
    tag="$r-$db"
    RUST_LOG="warn,partner_postgres::claim=debug" BENCH_KEEP_SERVER_LOG="$OUT/$tag.server.log" \
      PREFILL_AB_TAG="$OUT/$tag" PREFILL_AB_DB=$db \
      BENCH_DATASET=$db BENCH_WH_CASES=prefill bash bench/webhooks-dataset.sh >"$OUT/$tag.out" 2>&1
    before=$(cat "$OUT/$tag.prefilled.snap"); lb=$(cat "$OUT/$tag.prefilled.load"); c0=$(cat "$OUT/$tag.prefilled.cpu")
    after=$(cat "$OUT/$tag.drained.snap"); la=$(cat "$OUT/$tag.drained.load"); c1=$(cat "$OUT/$tag.drained.cpu")
    # The relations the drain read most blocks of (outside shared buffers).
    top=$(awk 'NR == FNR {r[$1] = $2; next} {d = $2 - r[$1]; if (d > 0) print d, $1}' \
      "$OUT/$tag.prefilled.rel" "$OUT/$tag.drained.rel" | sort -rn | head -3 | awk '{printf "%s%s=%s", (NR > 1 ? "," : ""), $2, $1}')
    line=$(grep '^pre-filled' "$OUT/$tag.out")
    count=$(sed -E 's/.*: ([0-9]+) delivered.*/\1/' <<<"$line")
    rate=$(sed -E 's/.* delivered, ([0-9]+) deliveries\/s.*/\1/' <<<"$line")
    read -r n0 busy0 tot0 <<<"$c0"; read -r n1 busy1 tot1 <<<"$c1"
    read -r br0 bh0 _ fpi0 wb0 ck0 _ dead0 <<<"$before"
    read -r br1 bh1 _ fpi1 wb1 ck1 _ _ <<<"$after"
    claims=$({ grep -oE 'claim_us"?[=:]"?[0-9]+' "$OUT/$tag.server.log" || true; } | grep -oE '[0-9]+$' | sort -n |
      awk '{a[NR] = $1; s += $1} END {if (NR) printf "%d %.2f %.2f %.0f", NR, a[int((NR + 1) / 2)] / 1000, a[int(NR * 0.9 + 0.5)] / 1000, s / 1000; else print "0 - - -"}')
    printf '%-5s %-26s %6s %8s %-16s %-16s %6.1f %6.1f %9s %9s %7s %7.1f %3s %11s %6s %7s %7s %8s  %s\n' \
      "$r" "$db" "$count" "$rate" "$lb" "$la" \
      "$(awk -v a="$n0" -v b="$n1" -v t="$tot0" -v u="$tot1" 'BEGIN {print 100 * (b - a) / (u - t)}')" \
      "$(awk -v a="$busy0" -v b="$busy1" -v t="$tot0" -v u="$tot1" 'BEGIN {print 100 * (b - a) / (u - t)}')" \
      $((br1 - br0)) $((bh1 - bh0)) $((fpi1 - fpi0)) "$(awk -v a="$wb0" -v b="$wb1" 'BEGIN {print (b - a) / 1048576}')" \
      $((ck1 - ck0)) "$dead0" $claims "${top:--}" | tee -a "$OUT/table.txt"
    echo "$r $db $rate" >>"$OUT/rates.txt"
  done
done
awk -v a="$A" -v b="$B" '
  $2 == a {ra[$1] = $3; sa += $3; na++} $2 == b {rb[$1] = $3; sb += $3; nb++}
  END {
    for (r in ra) if (r in rb && rb[r] > 0) q[++n] = ra[r] / rb[r]
    asort(q)
    med = n % 2 ? q[(n + 1) / 2] : (q[n / 2] + q[n / 2 + 1]) / 2
    i = 0; for (r in ra) xa[++i] = ra[r]; asort(xa); i = 0; for (r in rb) xb[++i] = rb[r]; asort(xb)
    ma = na % 2 ? xa[(na + 1) / 2] : (xa[na / 2] + xa[na / 2 + 1]) / 2
    mb = nb % 2 ? xb[(nb + 1) / 2] : (xb[nb / 2] + xb[nb / 2 + 1]) / 2
    printf "%s: median %d, sum %d over %d rounds; %s: median %d, sum %d over %d rounds\n", a, ma, sa, na, b, mb, sb, nb
    printf "%s / %s: pair ratios", a, b; for (i = 1; i <= n; i++) printf " %.2f", q[i]
    printf "; median %.2f; ratio of the sums %.2f\n", med, sa / sb
  }' "$OUT/rates.txt" | tee -a "$OUT/table.txt"
echo "(kept in $OUT)"
