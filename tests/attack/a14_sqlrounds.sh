#!/usr/bin/env bash
# a14_sqlrounds.sh ROUNDS DUR: a14_sqlrace.sh lead2 then main, ROUNDS times (the hard setting unless overridden).
D="$(cd "$(dirname "$0")" && pwd)"
for r in $(seq 1 "${1:-3}"); do for m in lead2 main; do
  echo "== round $r $m $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  LATE=${LATE:-0.2} SHOW=${SHOW:-0} ENDPOINTS=${ENDPOINTS:-2} WORKERS=${WORKERS:-6} WRATE=${WRATE:-150} WRITE_RATE=${WRITE_RATE:-30} \
    "$D/a14_sqlrace.sh" $m "${2:-45}" 2>&1 | grep -E "^deliveries|^claims|^markers|^monitor|tps|VIOL"
done; done
