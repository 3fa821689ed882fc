#!/usr/bin/env bash
# Extensions §11 against a frozen PostgreSQL (issue 23, N12 against §11): a cluster of the drill's
# own (initdb into a temporary directory, pg_ctl on a free port; the shared server on 5432 is never
# touched), the `demo` server on it, then DRILL_RUNS times: `kill -STOP` of the postmaster and
# every child (the kernel keeps acknowledging), four calls at once (partner GET /api/v1/leads,
# operator GET /internal/v1/partners/demo-clinic, catalog GET /api/all-products, /readyz) timed,
# again once found, and DRILL_FROZEN_SECS into the freeze; then `kill -CONT` and calls until all
# four answer 2xx. Prints each answer as name=status/Retry-After/code/time and exits non-zero when
# a call asked at the freeze is not 503 within 1.5 s or recovery takes more than 1.5 s.
# Bounded (about 10 s a run) and self-stopping; loopback only.
#
#   bench/drills/pg-sigstop.sh                  # builds the debug binary first
#   PARTNER_BIN=path/to/partner-server DRILL_RUNS=10 bench/drills/pg-sigstop.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${DRILL_RUNS:-5}
FROZEN=${DRILL_FROZEN_SECS:-3}
PGDIR=$(mktemp -d /tmp/pp-sigstop-pg.XXXXXX)
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PG_PORT=$(free_port)
API_PORT=$(free_port)
PG_BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
SERVER_PID=""

as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
cleanup() {
  [ -n "$SERVER_PID" ] && kill -9 "$SERVER_PID" 2>/dev/null || true
  # Never leave the cluster stopped: a SIGSTOPped postmaster ignores pg_ctl.
  if [ -f "$PGDIR/data/postmaster.pid" ]; then
    pm=$(head -1 "$PGDIR/data/postmaster.pid")
    kill -CONT "$pm" $(pgrep -P "$pm") 2>/dev/null || true
  fi
  as_pg "$PG_BIN/pg_ctl" -D "$PGDIR/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$PGDIR"
}
trap cleanup EXIT

if [ -z "${PARTNER_BIN:-}" ]; then
  cargo build -q -p partner-server
  PARTNER_BIN=target/debug/partner-server
fi
[ "$(id -u)" = 0 ] && chown postgres "$PGDIR"
as_pg "$PG_BIN/initdb" -D "$PGDIR/data" -U postgres --auth=trust >/dev/null
as_pg "$PG_BIN/pg_ctl" -D "$PGDIR/data" -l "$PGDIR/log" -w \
  -o "-p $PG_PORT -c listen_addresses=127.0.0.1 -k $PGDIR" start >/dev/null

DATABASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/partner_portal" \
  PARTNER_BIND="127.0.0.1:$API_PORT" PARTNER_METRICS_BIND=127.0.0.1:0 \
  PARTNER_DEMO_ACCESS_FILE="$PGDIR/access" PARTNER_RATE_LIMIT=100000/60s RUST_LOG=warn \
  "$PARTNER_BIN" demo >"$PGDIR/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 120); do [ -s "$PGDIR/access" ] && break; sleep 0.5; done
[ -s "$PGDIR/access" ] || { echo "the demo server did not start"; tail "$PGDIR/server.log"; exit 1; }
set -a; . "$PGDIR/access"; set +a
echo "== pg-sigstop: $RUNS runs, ${FROZEN}s frozen each, PARTNER_DB_PROBE_TIMEOUT=${PARTNER_DB_PROBE_TIMEOUT:-default}, load $(cut -d' ' -f1-3 /proc/loadavg)"

BASE="http://127.0.0.1:$API_PORT" PGDATA="$PGDIR/data" RUNS=$RUNS FROZEN=$FROZEN python3 - <<'EOF'
import os, sys, time, json, signal, subprocess, threading, urllib.request, urllib.error

BASE, PGDATA = os.environ["BASE"], os.environ["PGDATA"]
RUNS, FROZEN = int(os.environ["RUNS"]), float(os.environ["FROZEN"])
CALLS = [("partner", "/api/v1/leads?limit=5", os.environ["PARTNER_TOKEN"]),
         ("operator", "/internal/v1/partners/demo-clinic", os.environ["INTERNAL_TOKEN"]),
         ("catalog", "/api/all-products?partner_id=demo-clinic", None),
         ("readyz", "/readyz", None)]

def call(path, token):
    req = urllib.request.Request(BASE + path)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    t = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            r.read()
            return r.status, None, None, time.monotonic() - t
    except urllib.error.HTTPError as e:
        try:
            code = json.loads(e.read())["error"]["code"]
        except Exception:
            code = None
        return e.code, e.headers.get("Retry-After"), code, time.monotonic() - t
    except Exception as e:
        return 0, None, type(e).__name__, time.monotonic() - t

def four():
    out = {}
    ts = [threading.Thread(target=lambda c=c: out.__setitem__(c[0], call(c[1], c[2]))) for c in CALLS]
    [t.start() for t in ts]
    [t.join() for t in ts]
    return out

def show(r):
    return " ".join(f"{n}={s}/{ra or '-'}/{c or '-'}/{d * 1000:.0f}ms" for n, (s, ra, c, d) in sorted(r.items()))

def cluster():
    pm = int(open(PGDATA + "/postmaster.pid").readline())
    kids = subprocess.run(["pgrep", "-P", str(pm)], capture_output=True, text=True).stdout.split()
    return [pm] + [int(k) for k in kids]

failed = False
for run in range(1, RUNS + 1):
    before = four()
    if any(s != 200 for s, *_ in before.values()):
        print(f"run {run}: not all 200 before the freeze: {show(before)}")
        failed = True
        break
    pids = cluster()
    for p in pids:
        os.kill(p, signal.SIGSTOP)
    frozen = time.monotonic()
    try:
        at = four()
        found = four()
        time.sleep(max(0.0, FROZEN - (time.monotonic() - frozen)))
        late = four()
    finally:
        for p in pids:
            try:
                os.kill(p, signal.SIGCONT)
            except ProcessLookupError:
                pass
    resumed = time.monotonic()
    while True:
        r = four()
        if all(s == 200 for s, *_ in r.values()):
            back = time.monotonic() - resumed
            break
        if time.monotonic() - resumed > 10:
            back = None
            break
        time.sleep(0.02)
    ok_at = all(s == 503 and c == "unavailable" and d < 1.5 and (n == "readyz" or ra == "1")
                for n, (s, ra, c, d) in at.items())
    print(f"run {run}: at the freeze {show(at)}")
    print(f"       once found {show(found)}")
    print(f"       {FROZEN:.0f} s in {show(late)}")
    print(f"       all 2xx {'never' if back is None else f'{back * 1000:.0f} ms'} after SIGCONT")
    if not ok_at or back is None or back > 1.5:
        failed = True
    time.sleep(1)
sys.exit(1 if failed else 0)
EOF
echo "== load $(cut -d' ' -f1-3 /proc/loadavg)"
