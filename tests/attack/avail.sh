#!/usr/bin/env bash
# Availability cost of the check (attack6): N leads ingested at once to one endpoint, the time
# until all N are delivered, with RECV=keep (receiver.py, keep-alive) or RECV=close (slowtls.py
# with HOLD s handshakes, one answer per connection: every attempt needs a new connection).
# Prints the worker's late-check warnings, webhook_checks_late_total, and how many row checks
# vouched although answered more than 50 ms after they were asked (trace lines of
# partner_webhooks::checks with us > 50000; absent from binaries without that line).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
NAME=${AV_NAME:-av}; SP=${AV_PORT:-18920}
dropdb -h 127.0.0.1 -U postgres --if-exists "${DB_PREFIX:-attack_}$NAME"
export PARTNER_DB_POOL_SIZE=${PARTNER_DB_POOL_SIZE:-6}
RUST_LOG=${RUST_LOG:-info,partner_webhooks::checks=trace} PARTNER_RATE_LIMIT=100000/60s start_server "$NAME" "$SP" >/dev/null || exit 1
if [ "${RECV:-keep}" = close ]; then
  RECV_LOG=$ATTACK_DIR/out/$NAME.recv.jsonl; : >"$RECV_LOG"
  python3 "$ATTACK_DIR/slowtls.py" --port $((SP+5)) --log "$RECV_LOG" --hold "${HOLD:-0}" & RECV_PID=$!
  sleep 0.5
else
  start_receiver "$NAME" $((SP+5))
fi
trap 'stop_server; stop_receiver' EXIT
for id in $(P "$BASE/api/v1/webhook-endpoints" | jq -r '.data[].id'); do P -X DELETE "$BASE/api/v1/webhook-endpoints/$id" >/dev/null; done
L0=$(cut -d' ' -f1 /proc/loadavg)
R=$(ATTACK_DIR=$ATTACK_DIR BASE=$BASE TOKEN=$TOKEN ITOKEN=$ITOKEN RECV_LOG=$RECV_LOG RECV_PORT=$((SP+5)) python3 - <<'PY'
import os, sys, time, uuid, json, threading
sys.path.insert(0, os.environ.get("ATTACK_DIR", "."))
import s05
N = int(os.environ.get("N", "100"))
st, j = s05.api("POST", "/api/v1/webhook-endpoints", {"url": f"https://127.0.0.1:{s05.RECV_PORT}/av", "events": ["lead.created"], "secret": True})
t0 = time.time()
def go(k):
    for i in range(k, N, 8):
        s05.ingest(f"av{i}-{uuid.uuid4().hex[:6]}")
ts = [threading.Thread(target=go, args=(k,)) for k in range(8)]
[t.start() for t in ts]; [t.join() for t in ts]
t1 = time.time()
while time.time() - t0 < float(os.environ.get("AV_WAIT", "90")):
    got = sorted(json.loads(l)["t"] for l in open(os.environ["RECV_LOG"]))
    if len(got) >= N:
        break
    time.sleep(0.2)
got = sorted(json.loads(l)["t"] for l in open(os.environ["RECV_LOG"]))
print(f"{len(got)}/{N} delivered; ingest {t1 - t0:.1f}s; all delivered {got[-1] - t0 if len(got) >= N else float('nan'):.1f}s after the first ingest; median arrival {got[len(got)//2] - t0 if got else float('nan'):.1f}s")
PY
)
late_metric=$(curl -s "$METRICS" | awk '/^webhook_checks_late_total/ {s+=$2} END {print s+0}')
vouched_late=$(python3 -c "
import json,sys
n=m=0
for l in open('$SERVER_LOG'):
    try: r=json.loads(l)
    except Exception: continue
    f=r.get('fields',r)
    if str(f.get('message','')).endswith('row check answered'):
        m+=1; n+= int(f.get('us',0))>50000
print(f'{n} of {m}')")
echo "$(basename "$BIN") recv=${RECV:-keep} hold=${HOLD:-0} N=${N:-100}: $R; late checks (metric) $late_metric; 'too late to vouch' $(grep -c 'too late to vouch' "$SERVER_LOG"); checks vouching though answered >50 ms after asked: $vouched_late; load $L0 -> $(cut -d' ' -f1 /proc/loadavg)"
stop_server; stop_receiver; trap - EXIT
sleep 1; dropdb -h 127.0.0.1 -U postgres --if-exists "${DB_PREFIX:-attack_}$NAME" || echo "   (db busy)"
