#!/usr/bin/env bash
# Drill 1, long form (issue 24, extensions §11): PostgreSQL of the drill's own (initdb into a
# temporary directory, pg_ctl on a free port; the shared server on 5432 is never touched) is
# stopped for 10 s and started again while an `--role api` process answers partner reads and
# operator ingest (about 50 requests/s each) and an `--role worker` process delivers lead.created
# to 10 endpoints at nginx over HTTPS (bench/webhooks-lib.sh's receiver). Release build.
#
# Records: the answers while down (status, code, Retry-After, slowest), the time from the
# restart to the first success, that every lead answered 201 is in the database, that every
# delivery arrived under its own id (repeats only under the same id), and event→delivery p50 per
# second after the restart. Exits non-zero when §11 or "nothing lost" does not hold.
# Bounded (about a minute plus the build) and self-stopping; loopback only.
#
#   bench/drills/pg-restart.sh                  # builds the release binary first
#   PARTNER_BIN=path/to/partner-server bench/drills/pg-restart.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/webhooks-lib.sh
DOWN=${DRILL_DOWN_SECS:-10}
BEFORE=5
AFTER=15
API_PORT=$WH_PORT
WORKER_PORT=$((WH_PORT + 1))
PGDIR=$(mktemp -d /tmp/pp-drill-pg.XXXXXX)
PG_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
PG_BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
API_PID="" WORKER_PID=""

as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
pg_start() {
  as_pg "$PG_BIN/pg_ctl" -D "$PGDIR/data" -l "$PGDIR/log" -w \
    -o "-p $PG_PORT -c listen_addresses=127.0.0.1 -k $PGDIR -c max_connections=100" start >/dev/null
}
pg_stop() { as_pg "$PG_BIN/pg_ctl" -D "$PGDIR/data" -m fast -w stop >/dev/null; }
cleanup() {
  [ -n "$API_PID" ] && kill -9 "$API_PID" 2>/dev/null || true
  [ -n "$WORKER_PID" ] && kill -9 "$WORKER_PID" 2>/dev/null || true
  as_pg "$PG_BIN/pg_ctl" -D "$PGDIR/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$PGDIR"
  wh_cleanup
}
trap cleanup EXIT

# The receiver, and the release binary unless one is given.
command -v nginx >/dev/null || {
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light >/dev/null
  nginx -s stop 2>/dev/null || true
}
if [ -n "${PARTNER_BIN:-}" ]; then BIN=$PARTNER_BIN; else cargo build --release -q -p partner-server; fi

# The cluster of the drill's own; the library's psql calls and the server go to it.
[ "$(id -u)" = 0 ] && chown postgres "$PGDIR"
as_pg "$PG_BIN/initdb" -D "$PGDIR/data" -U postgres --auth=trust -E UTF8 >/dev/null
pg_start
export PGPORT=$PG_PORT
export DATABASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/$WH_DB"
export PARTNER_WEBHOOK_POLL_INTERVAL=${PARTNER_WEBHOOK_POLL_INTERVAL:-5s}
# The reads' token never runs out of budget (a 429 would hide the answers the drill looks at).
export PARTNER_RATE_LIMIT=1000000/60s

wh_start_receiver
wh_prepare_db
wh_endpoints 10
wh_rotate_log

start_role() { # role port → pid
  PARTNER_BIND="127.0.0.1:$2" $BIN serve --no-migrate --role "$1" >>"$WH_WORK/$1.log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$2/healthz" >/dev/null && { echo $pid; return; }; sleep 0.1; done
  echo "the $1 process did not start" >&2; tail -20 "$WH_WORK/$1.log" >&2; exit 1
}
API_PID=$(start_role api "$API_PORT")
WORKER_PID=$(start_role worker "$WORKER_PORT")

# A partner read token (partner wh-1's user).
op() { curl -sf -X "$1" "http://127.0.0.1:$API_PORT/internal/v1$2" -H "Authorization: Bearer $PARTNER_INTERNAL_TOKEN" -H 'Content-Type: application/json' ${3:+-d "$3"}; }
user=$(op POST /users '{"email":"drill@wh-1.test","partnerId":"wh-1","admin":false}' | python3 -c 'import json, sys; print(json.load(sys.stdin)["data"]["id"])')
TOKEN=$(op POST "/users/$user/tokens" | python3 -c 'import json, sys; print(json.load(sys.stdin)["data"]["token"])')

# The load: ingest and reads, one request at a time each, paced at 50/s, for the whole drill.
# One line an answer: kind start end status retry_after code lead_id (times in epoch seconds).
python3 - "$API_PORT" "$PARTNER_INTERNAL_TOKEN" "$TOKEN" $((BEFORE + DOWN + AFTER)) >"$WH_WORK/answers.txt" <<'PY' &
import http.client, json, sys, threading, time
port, internal, token, secs = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
end_at = time.time() + secs
out, lock = sys.stdout, threading.Lock()
def run(kind):
    conn, n, nxt = None, 0, time.time()
    while time.time() < end_at:
        nxt += 0.02
        n += 1
        if kind == "ingest":
            body = json.dumps({"partnerId": "wh-%d" % (n % 10 + 1), "firstName": "Ann", "lastName": "Lee",
                "email": "ann@example.com", "emailConsent": True, "phone": "+1 555 0100", "smsConsent": True,
                "origin": "managed-website", "location": "Austin, TX"})
            req = ("POST", "/internal/v1/leads", body, {"Authorization": "Bearer " + internal, "Content-Type": "application/json"})
        else:
            req = ("GET", "/api/v1/leads?limit=5", None, {"Authorization": "Bearer " + token})
        t0 = time.time()
        status, ra, code, lead = 0, "-", "-", "-"
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=10)
            conn.request(*req)
            res = conn.getresponse()
            raw = res.read()
            status, ra = res.status, res.getheader("Retry-After") or "-"
            try:
                b = json.loads(raw)
                code = (b.get("error") or {}).get("code") or "-"
                if status == 201:
                    lead = b["data"]["id"]
            except ValueError:
                pass
        except Exception:
            conn = None
        t1 = time.time()
        with lock:
            out.write("%s %.6f %.6f %d %s %s %s\n" % (kind, t0, t1, status, ra, code, lead))
        time.sleep(max(0.0, nxt - time.time()))
threads = [threading.Thread(target=run, args=(k,)) for k in ("ingest", "read")]
for t in threads: t.start()
for t in threads: t.join()
PY
LOAD=$!
sleep "$BEFORE"
pg_stop
STOPPED=$(date +%s.%N)
sleep "$DOWN"
STARTING=$(date +%s.%N)
pg_start
UP=$(date +%s.%N)
wait "$LOAD"
echo "PostgreSQL stopped $(awk -v a="$STOPPED" -v b="$STARTING" 'BEGIN {printf "%.1f", b - a}') s; pg_ctl start took $(awk -v a="$STARTING" -v b="$UP" 'BEGIN {printf "%.2f", b - a}') s"

# The answers: while down (begun after the stop finished, ended before the start began), §11's
# 503; anywhere, no other 5xx and no transport error; the first success after the restart.
python3 - "$WH_WORK/answers.txt" "$STOPPED" "$STARTING" "$UP" >"$WH_WORK/verdict.txt" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1])]
stopped, starting, up = map(float, sys.argv[2:5])
down = [r for r in rows if float(r[1]) >= stopped and float(r[2]) <= starting]
good = [r for r in down if r[3] == "503" and r[5] == "unavailable" and r[4] == "1"]
slowest = max((float(r[2]) - float(r[1]) for r in down), default=0)
bad = [r for r in rows if r[3] == "0" or (r[3] >= "500" and r[3] != "503")]
first = min((float(r[2]) for r in rows if float(r[1]) >= up and r[3].startswith("2")), default=None)
statuses = {}
for r in rows: statuses[r[3]] = statuses.get(r[3], 0) + 1
print("answers: %d in all %s; while down: %d, %d of them 503 unavailable with Retry-After: 1, slowest %.0f ms; other 5xx or no answer anywhere: %d"
      % (len(rows), dict(sorted(statuses.items())), len(down), len(good), slowest * 1000, len(bad)))
print("first success %s after pg_ctl start returned" % ("never" if first is None else "%.0f ms" % ((first - up) * 1000)))
ok = len(down) > 0 and len(good) == len(down) and slowest <= 1.0 and not bad and first is not None and first - up <= 1.0
print("verdict-answers", "ok" if ok else "FAILED")
PY
cat "$WH_WORK/verdict.txt"
awk '$4 == 201 {print $7}' "$WH_WORK/answers.txt" >"$WH_WORK/leads.txt"

# Every delivery done, then: the 201 leads all there, each delivered (one endpoint per
# partner), every arrival under a real delivery id.
wh_wait_done true 120 || true
sleep 0.5
psql -q "$WH_DB" -c "CREATE TABLE bench_ok (id uuid)" -c "\\copy bench_ok FROM '$WH_WORK/leads.txt'" \
  -c "TRUNCATE bench_arrivals" -c "\\copy bench_arrivals FROM '$WH_WORK/access.log' WITH (FORMAT text, DELIMITER ' ')"
read -r answered missing undelivered pending arrivals distinct strangers <<<"$(psql -qtA -F' ' "$WH_DB" -c "
  SELECT (SELECT count(*) FROM bench_ok),
         (SELECT count(*) FROM bench_ok o WHERE NOT EXISTS (SELECT 1 FROM leads l WHERE l.id = o.id)),
         (SELECT count(*) FROM bench_ok o WHERE NOT EXISTS (
            SELECT 1 FROM domain_events e JOIN webhook_deliveries d ON d.event_id = e.id
            JOIN bench_arrivals a ON a.id = d.id::text WHERE e.subject = o.id::text)),
         (SELECT count(*) FROM webhook_deliveries WHERE status <> 'delivered'),
         (SELECT count(*) FROM bench_arrivals),
         (SELECT count(DISTINCT id) FROM bench_arrivals),
         (SELECT count(*) FROM bench_arrivals a WHERE NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.id::text = a.id))")"
echo "leads answered 201: $answered; missing from the database: $missing; not delivered: $undelivered; deliveries not delivered: $pending; requests received: $arrivals for $distinct deliveries ($((arrivals - distinct)) repeats, $strangers under unknown ids)"

# Event→delivery p50 per second of event time after the restart.
psql -qtA -F' ' "$WH_DB" -c "
  WITH a AS (
    SELECT extract(epoch FROM d.created_at) - $UP AS after, b.ms - extract(epoch FROM d.created_at) AS lat
    FROM bench_arrivals b JOIN webhook_deliveries d ON d.id::text = b.id
    WHERE extract(epoch FROM d.created_at) >= $UP)
  SELECT floor(after)::int, count(*), round((1000 * percentile_cont(0.5) WITHIN GROUP (ORDER BY lat))::numeric, 1)
  FROM a GROUP BY 1 ORDER BY 1" >"$WH_WORK/p50.txt"
echo "event→delivery p50 by second after the restart (second, deliveries, p50 ms):"
awk '{printf "  %ss: %s, %s ms\n", $1, $2, $3}' "$WH_WORK/p50.txt"
back=$(awk '$3 < 100 {print $1; exit}' "$WH_WORK/p50.txt")
echo "p50 under 100 ms from second ${back:-never} after the restart"
kill "$API_PID" "$WORKER_PID" 2>/dev/null || true
grep -q "verdict-answers ok" "$WH_WORK/verdict.txt" && [ "$missing" = 0 ] && [ "$undelivered" = 0 ] \
  && [ "$pending" = 0 ] && [ "$strangers" = 0 ] && [ -n "$back" ] && [ "$back" -lt 5 ]
