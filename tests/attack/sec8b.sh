#!/usr/bin/env bash
# attack8, round 2: the same attacks with the pool starved (PARTNER_DB_POOL_SIZE=4: the worker's
# share is one connection), in parallel; then 10 endpoints, 8 rounds (240 changes), pool 4.
cd "$(dirname "$0")"
F='s/, 0 failed attempts, 0 held connections closed//; s/ \(of 64 ingested for s05_inflight\)//'
echo "-- $(date -u +%T) pool 4: n9d + storm (parallel), load $(cut -d' ' -f1-3 /proc/loadavg)"
PARTNER_DB_POOL_SIZE=4 ./run8.sh n9d 0.02 p4s02 18340 >out/p4s02.txt 2>&1 &
PARTNER_DB_POOL_SIZE=4 ./run8.sh n9d 0.03 p4s03 18350 >out/p4s03.txt 2>&1 &
PARTNER_DB_POOL_SIZE=4 LINK_DELAY=0.02 ./run8.sh storm p4sf8 18370 >out/p4sf8.txt 2>&1 &
wait
for t in p4s02 p4s03 p4sf8; do echo "== $t"; grep -vE "NOTICE|^server " out/$t.txt | sed -E "$F"; done
ROUNDS=8 K=10 BINS="n13=/work/bin/partner-server-lead-n13" ./run8.sh avail 0.015 4 p4k8 18380 2>&1 | grep -E "^--|TOTAL|A's log|vouched|SLACK" | sed -E "$F"
echo "-- $(date -u +%T) all done"
