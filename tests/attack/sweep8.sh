#!/usr/bin/env bash
# attack8's sequence: run8.sh avail for each "D POOL TAG" of AVAIL (entries separated by commas;
# n13 and main side by side; K endpoints, default 6).
cd "$(dirname "$0")"
F='s/, 0 failed attempts, 0 held connections closed//; s/ \(of 64 ingested for s05_inflight\)//'
IFS=, read -ra runs <<<"${AVAIL:-0.025 16 a02516,0.03 16 a0316,0.04 16 a0416,0.06 16 a0616,0 16 a0016}"
for a in "${runs[@]}"; do
  # shellcheck disable=SC2086
  ./run8.sh avail $a 2>&1 | grep -E "^--|TOTAL|A's log|vouched|SLACK" | sed -E "$F"
done
