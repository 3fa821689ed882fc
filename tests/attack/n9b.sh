#!/usr/bin/env bash
# N9b re-try: s05_inflight.sh through pgproxy.py with the LISTEN connection blackholed, RUNS times
# (BLACKHOLE_WAY / BLACKHOLE_LEAD passed through, see s05_inflight.py). Prints each run's result
# lines and the listener's warnings from the server log.
set -uo pipefail
cd "$(dirname "$0")"; mkdir -p out
TAG=${TAG:-n9b}; PP=${PROXY_PORT:-15443}
for run in $(seq 1 "${RUNS:-1}"); do
  name=${TAG}_$run; freeze=out/$name.freeze; : >"$freeze"
  dropdb -h 127.0.0.1 -U postgres --if-exists "${DB_PREFIX:-attack_}$name"
  python3 pgproxy.py "$PP" "$freeze" & PROXY=$!
  for _ in $(seq 1 50); do (exec 3<>/dev/tcp/127.0.0.1/"$PP") 2>/dev/null && break; sleep 0.2; done
  echo "== $name way=${BLACKHOLE_WAY:-both} lead=${BLACKHOLE_LEAD:-0.2} slack=${SLACK:-0.05}"
  PG_PORT=$PP BLACKHOLE=$freeze S05_NAME=$name S05_PORT=${S05_PORT:-18580} ./s05_inflight.sh 2>&1 | grep -v '^server\|^\s*$'
  echo "   listener warnings: $(grep -c 'echoes no probe' out/$name.server.log) 'echoes no probe', $(grep -c 'probe hung\|probe failed' out/$name.server.log) probe hung/failed, $(grep -c 'connection closed' out/$name.server.log) closed"
  kill "$PROXY"; wait "$PROXY" 2>/dev/null
  sleep 1
  dropdb -h 127.0.0.1 -U postgres --if-exists "${DB_PREFIX:-attack_}$name" || echo "   (attack_$name still busy)"
done
