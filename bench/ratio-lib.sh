# Shared by the benchmarks that compare the server with pgbench of its own SQL in interleaved
# rounds (bench/by-id.sh, bench/events-feed.sh): run_wrk KEY URL and run_pgbench KEY FILE record
# each round under KEY (RPS, P99, TPS, and PGP99: pgbench's own p99 from its per-transaction log,
# the same-run reference for the server's p99 on a noisy machine); median reads a space-separated
# list on stdin. Expects CONNS, DURATION, DB and the header A (Authorization) set by the sourcing
# script.
declare -A RPS P99 TPS PGP99
run_wrk() { # key url
  local out
  out=$(wrk -t2 -c$CONNS -d"$DURATION" --latency -H "$A" "$2")
  if echo "$out" | grep -q 'Non-2xx'; then echo "$out" >&2; echo "wrk saw errors" >&2; exit 1; fi
  RPS[$1]="${RPS[$1]:-} $(echo "$out" | awk '/Requests\/sec/ {print $2}')"
  P99[$1]="${P99[$1]:-} $(echo "$out" | awk '$1 == "99%" {print $2}')"
  # The answer's size: bytes read over requests ("79589 requests in 8.05s, 29.98MB read").
  printf '  wrk     %-6s %10s req/s   p99 %8s   %s B/answer\n' "$1" "$(echo "$out" | awk '/Requests\/sec/ {print $2}')" "$(echo "$out" | awk '$1 == "99%" {print $2}')" \
    "$(echo "$out" | awk '/requests in/ {n = $1; b = $5; u = b; sub(/[0-9.]+/, "", u); sub(/read/, "", u); m = (u ~ /^KB/) ? 1024 : (u ~ /^MB/) ? 1048576 : (u ~ /^GB/) ? 1073741824 : 1; printf "%.0f", b * m / n}')"
}
run_pgbench() { # key file
  local t p log
  log=$(mktemp -d)
  t=$(pgbench -n -M prepared -c $CONNS -j 2 -T "${DURATION%s}" -l --log-prefix="$log/tx" -f "$2" "$DB" 2>/dev/null | awk '/^tps/ {print $3}')
  # The third field of each line is the transaction's latency in microseconds.
  p=$(cat "$log"/tx* | awk '{print $3}' | sort -n | awk '{a[NR]=$1} END {printf "%.2fms", a[int(NR * 0.99)] / 1000}')
  rm -rf "$log"
  TPS[$1]="${TPS[$1]:-} $t"
  PGP99[$1]="${PGP99[$1]:-} ${p%ms}"
  printf '  pgbench %-6s %10s tps   p99 %8s\n' "$1" "$t" "$p"
}
median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
