#!/usr/bin/env bash
# a14_pair.sh NAME DUR: a14_marker.sh with main (NAME_m) then lead2 (NAME_l), same settings.
D="$(cd "$(dirname "$0")" && pwd)"
N=$1 DUR=${2:-90}
for side in m l; do
  bin=/work/bin/partner-server-main; [ $side = l ] && bin=/work/bin/partner-server-lead2
  echo "=== ${N}_$side $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  nice -n 10 "$D/a14_marker.sh" "${N}_$side" "$bin" 18510 "$DUR" 2>&1 | grep -v "^ [0-9a-f]\{8\}-\|^-\|endpoint_id\|rows)\|^$"
done
