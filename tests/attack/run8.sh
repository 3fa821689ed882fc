#!/usr/bin/env bash
# attack8 (2026-11-27): re-try of N13's pool part (lead 3f86e48: a check's answer aged from when
# its read was sent, once it held its connection) against main (406d89d: aged from before the
# pool wait). Same as run7.sh, with:
#   run8.sh avail D POOL TAG [PORT]  -- n9e_many (K endpoints, default 6, ~540 deliveries) through
#                                       pgslow delayall D, one run per binary of BINS side by side;
#                                       also judged with SLACK=0 (every delivery after an answer)
#   run8.sh n9d D TAG PORT           -- s05_inflight through n9d_link.sh, delayall D
#   run8.sh storm TAG PORT           -- the held-answer storm (freeze STORM_FOR s around each change)
# BINS: "name=path ..." (default n13 = lead 3f86e48, m = main 406d89d). Logs: out/<tag>_<name>.txt.
set -uo pipefail
cd "$(dirname "$0")"; mkdir -p out
export DB_PREFIX=${DB_PREFIX:-pp_attack8_} B_POOL=${B_POOL:-4}
export RUST_LOG=${RUST_LOG:-info,partner_webhooks::checks=trace}
BINS=${BINS:-"n13=/work/bin/partner-server-lead-n13 m=/work/bin/partner-server-main"}
L() { echo "-- $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg): $*"; }
case $1 in
avail)
  d=$2 pool=$3 tag=$4 port=${5:-18300} i=0; pids=()
  L "avail d=$d pool=$pool K=${K:-6} $BINS"
  for nb in $BINS; do n=${nb%%=*} b=${nb#*=}; i=$((i+1))
    ( PARTNER_BIN=$b PARTNER_DB_POOL_SIZE=$pool N9D_PY=n9e_many.py LINK_MODE=delayall LINK_DELAY=$d K=${K:-6} ROUNDS=${ROUNDS:-4} \
      N9D_NAME=${tag}_$n N9D_PORT=$((port+10*i)) N9D_PROXY=$((port+10*i+9)) ./n9d_link.sh >out/${tag}_$n.txt 2>&1 ) &
    pids+=($!); sleep 0.3
  done
  wait "${pids[@]}"
  for nb in $BINS; do n=${nb%%=*}
    echo "   [$n] $(grep -h 'TOTAL' out/${tag}_$n.txt)"; echo "   [$n] $(grep -h "A's log" out/${tag}_$n.txt)"
    python3 n9e_judge.py out/${tag}_$n.recv.jsonl 0 >out/${tag}_$n.slack0
    echo "   [$n] SLACK=0: $(tail -1 out/${tag}_$n.slack0 | cut -d: -f2 | cut -d';' -f1), latest arrival after an answer +$(grep -o '+[0-9.]*s after' out/${tag}_$n.slack0 | tr -d '+s after' | sort -n | tail -1)s"
    python3 late_vouch.py out/${tag}_$n.server.log
  done
  L "avail d=$d done" ;;
n9d)
  d=$2 tag=$3 port=$4
  L "n9d d=$d"
  PARTNER_BIN=${PARTNER_BIN:-/work/bin/partner-server-lead-n13} PARTNER_DB_POOL_SIZE=${PARTNER_DB_POOL_SIZE:-8} LINK_MODE=delayall LINK_DELAY=$d JITTER=${JITTER:-1.5} \
    N9D_NAME=$tag N9D_PORT=$port N9D_PROXY=$((port+9)) ./n9d_link.sh
  python3 late_vouch.py out/$tag.server.log; L "n9d d=$d done" ;;
storm)
  tag=$2 port=$3
  L "storm freeze ${STORM_FOR:-8}"
  PARTNER_BIN=${PARTNER_BIN:-/work/bin/partner-server-lead-n13} PARTNER_DB_POOL_SIZE=${PARTNER_DB_POOL_SIZE:-8} STORM=1 STORM_MODE=freeze STORM_FOR=${STORM_FOR:-8} LINK_DELAY=${LINK_DELAY:-0} \
    N9D_NAME=$tag N9D_PORT=$port N9D_PROXY=$((port+9)) ./n9d_link.sh
  python3 late_vouch.py out/$tag.server.log; L "storm done" ;;
esac
