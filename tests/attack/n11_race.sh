#!/usr/bin/env bash
# N11, rights withdrawn under load (see n11_race.py): a user token hammering /dna-links from
# THREADS threads while the operator withdraws DNA access. In-process limiter, budget 100000/60s.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
dropdb -h 127.0.0.1 -U postgres --if-exists attack_n11r
PARTNER_RATE_LIMIT=100000/60s RUST_LOG=warn start_server n11r ${N11R_PORT:-18770} || exit 1
trap 'stop_server; dropdb -h 127.0.0.1 -U postgres --if-exists attack_n11r' EXIT
BASE=$BASE TOKEN=$TOKEN ITOKEN=$ITOKEN DB=attack_n11r python3 -u "$ATTACK_DIR/n11_race.py"
