#!/usr/bin/env bash
# attack7 (2026-11-27): re-try of N13 (availability on a slow link) and N9d on lead2.
#   run7.sh avail D POOL TAG   -- n9e_many (6 endpoints, ~540 deliveries) through pgslow delayall D,
#                                 one run per binary in BINS side by side (own ports), pool POOL
#   run7.sh n9d D TAG PORT     -- s05_inflight through n9d_link.sh, delayall D (64 deliveries, 4 changes)
#   run7.sh storm TAG PORT     -- the held-answer storm (freeze 8 s around each change)
# BINS: "name=path ..." (default lead2, e5ecfe4). Logs: out/<tag>_<name>.txt; B's pool B_POOL (4).
set -uo pipefail
cd "$(dirname "$0")"; mkdir -p out
export DB_PREFIX=${DB_PREFIX:-pp_attack7_} B_POOL=${B_POOL:-4}
export RUST_LOG=${RUST_LOG:-info,partner_webhooks::checks=trace}
BINS=${BINS:-"l2=/work/bin/partner-server-lead2 e5=/work/bin/partner-server-lead-e5ecfe4"}
L() { echo "-- $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg): $*"; }
case $1 in
avail)
  d=$2 pool=$3 tag=$4 port=${5:-31000} i=0; pids=()
  L "avail d=$d pool=$pool $BINS"
  for nb in $BINS; do n=${nb%%=*} b=${nb#*=}; i=$((i+1))
    ( PARTNER_BIN=$b PARTNER_DB_POOL_SIZE=$pool N9D_PY=n9e_many.py LINK_MODE=delayall LINK_DELAY=$d K=6 ROUNDS=4 \
      N9D_NAME=${tag}_$n N9D_PORT=$((port+10*i)) N9D_PROXY=$((port+10*i+9)) ./n9d_link.sh >out/${tag}_$n.txt 2>&1 ) &
    pids+=($!); sleep 0.3
  done
  wait "${pids[@]}"
  for nb in $BINS; do n=${nb%%=*}; echo "   [$n] $(grep -h 'TOTAL' out/${tag}_$n.txt)"; echo "   [$n] $(grep -h "A's log" out/${tag}_$n.txt)"; python3 late_vouch.py out/${tag}_$n.server.log; done
  L "avail d=$d done" ;;
n9d)
  d=$2 tag=$3 port=$4
  L "n9d d=$d"
  PARTNER_BIN=${PARTNER_BIN:-/work/bin/partner-server-lead2} PARTNER_DB_POOL_SIZE=${PARTNER_DB_POOL_SIZE:-8} LINK_MODE=delayall LINK_DELAY=$d JITTER=1.5 \
    N9D_NAME=$tag N9D_PORT=$port N9D_PROXY=$((port+9)) ./n9d_link.sh
  python3 late_vouch.py out/$tag.server.log; L "n9d d=$d done" ;;
storm)
  tag=$2 port=$3
  L "storm freeze 8"
  PARTNER_BIN=${PARTNER_BIN:-/work/bin/partner-server-lead2} PARTNER_DB_POOL_SIZE=${PARTNER_DB_POOL_SIZE:-8} STORM=1 STORM_MODE=freeze STORM_FOR=8 LINK_DELAY=0 \
    N9D_NAME=$tag N9D_PORT=$port N9D_PROXY=$((port+9)) ./n9d_link.sh
  python3 late_vouch.py out/$tag.server.log; L "storm done" ;;
esac
