#!/usr/bin/env bash
# attack8: only the starved-pool part of sec8.sh (10 endpoints, the fix alone).
cd "$(dirname "$0")"
F='s/, 0 failed attempts, 0 held connections closed//; s/ \(of 64 ingested for s05_inflight\)//'
IFS=, read -ra runs <<<"${STARVE:-0.01 4 st014,0.02 4 st024,0.02 8 st028}"  # "D POOL TAG,..."
for a in "${runs[@]}"; do
  BINS=${BINS:-"n13=/work/bin/partner-server-lead-n13"} K=10 ./run8.sh avail $a 18380 2>&1 | grep -E "^--|TOTAL|A's log|vouched|SLACK" | sed -E "$F"
done
