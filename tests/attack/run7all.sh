#!/usr/bin/env bash
# attack7's sequence: waits for /work/bin/LEAD2_REL_DONE, then the availability triples
# (lead2, e5ecfe4, main side by side), then the N9d runs and the storm in parallel.
cd "$(dirname "$0")"
while [ ! -e /work/bin/LEAD2_REL_DONE ]; do sleep 5; done
echo "-- $(date -u +%T) lead2 ready: $(ls -l /work/bin/partner-server-lead2)"
export BINS="l2=/work/bin/partner-server-lead2 e5=/work/bin/partner-server-lead-e5ecfe4 m=/work/bin/partner-server-97dd6dd"
F='s/ \(of 64 ingested for s05_inflight\)//; s/, 0 failed attempts, 0 held connections closed//; s/0 changes leaked; 0 to an old URL, 0 not signed with a returned secret, 0 signed with an erased one/0 leaked (all 4 counts 0)/'
for a in ${AVAIL:-"0.02 16 a0216" "0.01 16 a0116" "0.015 16 a01516" "0.02 8 a028" "0.03 16 a0316" "0.02 16 a0216b" "0.04 16 a0416" "0.03 8 a038"}; do
  ./run7.sh avail $a 32000 2>&1 | grep -E "^--|TOTAL|A's log|vouched" | sed -E "$F"
done
echo "-- $(date -u +%T) n9d + storm (parallel)"
./run7.sh n9d 0.02 n02 32100 >out/n02.txt 2>&1 &
./run7.sh n9d 0.05 n05 32120 >out/n05.txt 2>&1 &
./run7.sh n9d 0.1 n10 32140 >out/n10.txt 2>&1 &
./run7.sh storm sf8 32160 >out/sf8.txt 2>&1 &
wait
for t in n02 n05 n10 sf8; do echo "== $t"; grep -vE "NOTICE|^server " out/$t.txt; done
echo "-- $(date -u +%T) all done"
