#!/usr/bin/env bash
# attack13 (2026-11-27): the lead's claim_vouches (the claim statement's own read of the endpoint
# row vouches for a send whose slots are free within CHECKED_WITHIN = 5 ms of the claim's ask),
# lead ("v" = /work/bin/partner-server-vouch) against main ("m"), side by side, judged with SLACK=0.
#   a13.sh avail D POOL TAG      -- run8.sh avail (n9e_many through pgslow delayall D, K endpoints)
#   a13.sh listen DELAY TAG      -- n9e_many.sh (LISTEN held DELAY s by pgproxy, the rest direct)
# STALL_FOR=s STALL_EVERY=s (avail): the worker's instance A SIGSTOPped STALL_FOR s every STALL_EVERY s.
# Env: BINS (default v and m), K, ROUNDS, GAP, INGEST_EVERY, RECV_DELAY (n9e_many.py), RECV=close HOLD=s (every attempt a new connection, its
# TLS handshake held HOLD s), CPU=n (n busy loops at nice 0 for the run: a late worker).
# Every run prints, per binary: the deliveries, the SLACK=0 verdict (count of deliveries that
# arrived after a change's answer as the endpoint was before it, and the latest, in s), and the
# metric webhook_sends_vouched_total{by} (how many sends the claim's read vouched for), and
# a13_judge.py (each late delivery timed from the change it missed, not the latest one).
set -uo pipefail
cd "$(dirname "$0")"; mkdir -p out
export DB_PREFIX=pp_attack13_ RUST_LOG=${RUST_LOG:-info,partner_webhooks::checks=trace,partner_webhooks::worker=debug}
export BINS=${BINS:-"v=/work/bin/partner-server-vouch m=/work/bin/partner-server-main"}
L() { echo "-- $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg): $*"; }
hogs=()
if [ "${CPU:-0}" -gt 0 ]; then
  for _ in $(seq 1 "$CPU"); do ( while :; do :; done ) & hogs+=($!); done
  trap 'kill "${hogs[@]}" 2>/dev/null' EXIT
fi
slack0() {  # slack0 RECV_LOG NAME
  python3 n9e_judge.py "$1" 0 >"$1.slack0"
  local late; late=$(grep -o '+[0-9.]*s after' "$1.slack0" | tr -d '+s after' | sort -n)
  echo "   [$2] SLACK=0: $(grep -c '^    endpoint' "$1.slack0") late deliveries (as before an answered change), latest +$(echo "$late" | tail -1)s; $(tail -1 "$1.slack0" | cut -d: -f2 | cut -d';' -f1)"
  SERVER_LOG=${1%.recv.jsonl}.server.log python3 a13_judge.py "$1" | sed "s/^/   [$2] /"
}
pids_on() {  # the processes started with PARTNER_BIND=127.0.0.1:PORT (ours: 18400-18499 only)
  for e in /proc/[0-9]*/environ; do
    { tr '\0' '\n' <"$e"; } 2>/dev/null | grep -qx "PARTNER_BIND=127.0.0.1:$1" && { p=${e#/proc/}; echo "${p%/environ}"; }
  done
}
stall() {  # stall FLAG PORT... : while FLAG exists, SIGSTOP the servers on PORTs for $STALL_FOR s every $STALL_EVERY s
  local flag=$1; shift; local pids=() t
  for t in $(seq 1 100); do pids=(); for p in "$@"; do pids+=($(pids_on "$p")); done; [ ${#pids[@]} -ge $# ] && break; sleep 0.2; done
  sleep 4; echo "   stalling pids ${pids[*]}: ${STALL_FOR}s every ${STALL_EVERY}s" >&2; local n=0
  while [ -e "$flag" ]; do
    kill -STOP "${pids[@]}" 2>/dev/null; sleep "$STALL_FOR"; kill -CONT "${pids[@]}" 2>/dev/null; n=$((n+1)); sleep "$STALL_EVERY"
  done
  kill -CONT "${pids[@]}" 2>/dev/null; echo "   $n stalls" >&2
}
case $1 in
avail)
  d=$2 pool=$3 tag=$4
  if [ -n "${STALL_FOR:-}" ]; then  # the worker's instance (A) frozen now and then: a late worker
    touch "out/$tag.stalling"; stall "out/$tag.stalling" 18410 18420 & SP_PID=$!
  fi
  ./run8.sh avail "$d" "$pool" "$tag" 18400 | grep -E "^--|TOTAL|A's log" | grep -v SLACK
  [ -n "${STALL_FOR:-}" ] && { rm -f "out/$tag.stalling"; wait $SP_PID; }
  for nb in $BINS; do n=${nb%%=*}
    slack0 "out/${tag}_$n.recv.jsonl" "$n"
    echo "   [$n] $(grep -h "A's metrics" out/${tag}_$n.txt)"
  done ;;
listen)
  delay=$2 tag=$3 i=0; pids=()
  L "listen DELAY=$delay K=${K:-6} RECV=${RECV:-keep} HOLD=${HOLD:-0} CPU=${CPU:-0} $BINS"
  for nb in $BINS; do n=${nb%%=*} b=${nb#*=}; i=$((i+1))
    ( PARTNER_BIN=$b DELAY=$delay N9E_NAME=${tag}_$n N9E_PORT=$((18440+20*i)) N9E_PROXY=$((18440+20*i+9)) \
      ./n9e_many.sh >out/${tag}_$n.txt 2>&1 ) &
    pids+=($!); sleep 0.3
  done
  wait "${pids[@]}"
  for nb in $BINS; do n=${nb%%=*}
    echo "   [$n] $(grep -h 'TOTAL' out/${tag}_$n.txt)"; echo "   [$n] $(grep -h '   log:' out/${tag}_$n.txt)"
    slack0 "out/${tag}_$n.recv.jsonl" "$n"
    echo "   [$n] $(grep -h 'metrics:' out/${tag}_$n.txt)"
  done
  L "listen done" ;;
esac
