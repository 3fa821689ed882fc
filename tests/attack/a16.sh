#!/usr/bin/env bash
# attack16 (2026-11-28): fe92e2b's shared endpoint-row check answers (lead) against main, side by
# side, each with a backlog drained while its endpoints change (a16_backlog.py), judged by
# a16_judge.py (every delivery that left as the endpoint was before a change answered before it
# arrived, and how long after that answer).
#   a16.sh DELAY TAG     (DELAY: LISTEN held that long by pgproxy.py; NOPROXY=1: direct)
# Env: BINS (default "l=/work/bin/partner-server-attack16 m=/work/bin/partner-server-main"),
# CPU=n busy loops, SERIAL=1 (one binary after the other), and a16_backlog.py's settings.
set -uo pipefail
cd "$(dirname "$0")"; mkdir -p out
export DB_PREFIX=pp_attack16_ RUST_LOG=${RUST_LOG:-info,partner_webhooks::worker=debug} DELAY=$1
export BINS=${BINS:-"l=/work/bin/partner-server-attack16 m=/work/bin/partner-server-main"}
tag=$2 i=0 pids=()
L() { echo "-- $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg): $*"; }
hogs=()
if [ "${CPU:-0}" -gt 0 ]; then
  for _ in $(seq 1 "$CPU"); do ( while :; do :; done ) & hogs+=($!); done
  trap 'kill "${hogs[@]}" 2>/dev/null' EXIT
fi
L "a16 DELAY=$DELAY NOPROXY=${NOPROXY:-0} RECV=${RECV:-keep} HOLD=${HOLD:-0} CPU=${CPU:-0} K=${K:-2} ROUNDS=${ROUNDS:-6} N=${N:-1500} CHANGES=${CHANGES:-8} GAP=${GAP:-0.05} $BINS"
for nb in $BINS; do n=${nb%%=*} b=${nb#*=}; i=$((i+1))
  ( PARTNER_BIN=$b A16_NAME=${tag}_$n A16_PORT=$((18700+20*i)) A16_PROXY=$((18700+20*i+9)) \
    ./a16_one.sh >out/${tag}_$n.txt 2>&1 ) &
  pids+=($!)
  if [ "${SERIAL:-0}" = 1 ]; then wait $!; else sleep 0.3; fi
done
wait "${pids[@]}"
for nb in $BINS; do n=${nb%%=*}
  grep -hE '^ +(drain|[0-9]+ changes|log|metrics)' out/${tag}_$n.txt | sed "s/^ */   [$n] /"
  SERVER_LOG=out/${tag}_$n.server.log python3 a16_judge.py out/${tag}_$n.recv.jsonl | sed "s/^/   [$n] /"
done
L "done"
