#!/usr/bin/env bash
# attack6's runs, in three streams (run6.sh 1|2|3), each logging to out/run6_<n>.txt.
# PARTNER_BIN: the binary under test; MAIN_BIN: the one before the fixes (A/B of avail.sh).
set -uo pipefail
cd "$(dirname "$0")"
export DB_PREFIX=${DB_PREFIX:-pp_attack6_} PARTNER_DB_POOL_SIZE=${PARTNER_DB_POOL_SIZE:-8}
export RUST_LOG=${RUST_LOG:-info,partner_webhooks::checks=trace}
L() { echo "-- $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg): $*"; }
case $1 in
1)  # N9c: held handshakes; a change timed around a handshake's end; closing receivers, many endpoints
  L n9c HOLD 3; HOLD=3 KINDS="none move disable expire" TRIALS=3 N9C_NAME=c3 N9C_PORT=27500 ./n9c_tls.sh
  L n9c HOLD 8; HOLD=8 KINDS="move disable expire" TRIALS=1 N9C_NAME=c8 N9C_PORT=27510 ./n9c_tls.sh
  L n9c HOLD 1 around; HOLD=1 LEAD=0.6 LEAD_JITTER=1.0 SLACK=0 KINDS="move disable expire" TRIALS=4 N9C_NAME=c1 N9C_PORT=27520 ./n9c_tls.sh
  L n9e close 0.3; RECV=close HOLD=0.3 DELAY=0.5 K=6 ROUNDS=3 N9E_NAME=e1 N9E_PORT=27530 N9E_PROXY=27539 ./n9e_many.sh
  L n9e close 0; RECV=close HOLD=0 DELAY=0.5 K=8 ROUNDS=3 N9E_NAME=e2 N9E_PORT=27540 N9E_PROXY=27549 ./n9e_many.sh
  for f in out/c3.server.log out/c8.server.log out/c1.server.log out/e1.server.log out/e2.server.log; do python3 late_vouch.py $f; done
  L done ;;
2)  # N9d: the worker's whole link slowed; a held answer
  i=0
  for d in ${DELAYS:-0.03 0.06 0.1 0.3}; do i=$((i+1))
    L n9d delay $d; LINK_DELAY=$d JITTER=1.5 N9D_NAME=d$i N9D_PORT=$((27600+10*i)) N9D_PROXY=$((27609+10*i)) ./n9d_link.sh
    python3 late_vouch.py out/d$i.server.log
  done
  L n9d storm freeze 8; STORM=1 STORM_MODE=freeze STORM_FOR=8 LINK_DELAY=0 N9D_NAME=dsf8 N9D_PORT=27660 N9D_PROXY=27669 ./n9d_link.sh
  L n9d storm freeze 30; STORM=1 STORM_MODE=freeze STORM_FOR=30 LINK_DELAY=0 N9D_NAME=dsf30 N9D_PORT=27670 N9D_PROXY=27679 ./n9d_link.sh
  L done ;;
3)  # N12, regressions, availability A/B
  L n12 1; PARTNER_DB_POOL_SIZE=6 WATCH=30 N12_NAME=n12a N12_PORT=27800 N12_PROXY=27809 timeout 200 ./n12_freeze.sh
  L av; for r in keep close; do for b in "$PARTNER_BIN" "$MAIN_BIN" "$PARTNER_BIN" "$MAIN_BIN"; do PARTNER_BIN=$b RECV=$r N=300 AV_NAME=av AV_PORT=27820 ./avail.sh; done; done
  L s05; TRIALS=10 S05_NAME=s05 S05_PORT=27840 ./s05.sh
  L n9b; RUNS=2 TAG=n9b S05_PORT=27850 PROXY_PORT=27859 ./n9b.sh
  L n12 2; PARTNER_DB_POOL_SIZE=6 WATCH=30 N12_NAME=n12b N12_PORT=27870 N12_PROXY=27879 timeout 200 ./n12_freeze.sh
  L done ;;
esac
