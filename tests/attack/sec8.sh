#!/usr/bin/env bash
# attack8's security runs on the fix (n13): one endpoint through a slow link (s05_inflight,
# 4 changes each), the held-answer storm, in parallel; then the starved pool (many endpoints,
# pool 4, slow link) judged with SLACK 0.05 and 0.
cd "$(dirname "$0")"
F='s/, 0 failed attempts, 0 held connections closed//; s/ \(of 64 ingested for s05_inflight\)//'
echo "-- $(date -u +%T) n9d + storm (parallel), load $(cut -d' ' -f1-3 /proc/loadavg)"
./run8.sh n9d 0.02 s02 18340 >out/s02.txt 2>&1 &
./run8.sh n9d 0.04 s04 18350 >out/s04.txt 2>&1 &
./run8.sh n9d 0.045 s045 18360 >out/s045.txt 2>&1 &
./run8.sh storm sf8 18370 >out/sf8.txt 2>&1 &
wait
for t in s02 s04 s045 sf8; do echo "== $t"; grep -vE "NOTICE|^server " out/$t.txt | sed -E "$F"; done
IFS=, read -ra runs <<<"${STARVE:-0.01 4 st014,0.02 4 st024,0.02 8 st028}"  # "D POOL TAG,..."
for a in "${runs[@]}"; do
  BINS="n13=/work/bin/partner-server-lead-n13" K=10 ./run8.sh avail $a 18380 2>&1 | grep -E "^--|TOTAL|A's log|vouched|SLACK" | sed -E "$F"
done
echo "-- $(date -u +%T) all done"
