#!/usr/bin/env bash
# a15_pair.sh NAME DUR: a15_marker.sh with main (NAME_m) then tid (NAME_t), same settings.
D="$(cd "$(dirname "$0")" && pwd)"
N=$1 DUR=${2:-90}
for side in ${SIDES:-m t}; do
  bin=/work/bin/partner-server-main; [ $side = t ] && bin=/work/bin/partner-server-tid
  echo "=== ${N}_$side $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  nice -n 10 "$D/a15_marker.sh" "${N}_$side" "$bin" 18610 "$DUR" 2>&1 | grep -v "^ [0-9a-f]\{8\}-\|^-\|endpoint_id\|rows)\|^$"
done
