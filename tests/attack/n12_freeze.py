#!/usr/bin/env python3
"""N12 (attack6), driven by n12_freeze.sh: A's PostgreSQL connections frozen in pgproxy.py.
HANG=1: attempts held in flight by the receiver at the SIGTERM.
Env: BASE (B, for ingest), A_BASE, TOKEN, ITOKEN, RECV_LOG, RECV_PORT, DB, FREEZE, A_PID,
WATCH (s after the freeze, default 40), TERM_AFTER (s after the second freeze, default 1)."""
import json, os, subprocess, sys, threading, time, uuid
import requests
sys.path.insert(0, os.path.dirname(__file__))
import s05  # noqa: E402

A, DB, FREEZE, A_PID = os.environ["A_BASE"], os.environ["DB"], os.environ["FREEZE"], int(os.environ["A_PID"])
WATCH, TERM_AFTER = float(os.environ.get("WATCH", "40")), float(os.environ.get("TERM_AFTER", "1"))
st, j = s05.api("POST", "/api/v1/webhook-endpoints",
                {"url": f"https://127.0.0.1:{s05.RECV_PORT}/n12", "events": ["lead.created"], "secret": True})
assert st == 201, (st, j)
stop = threading.Event()
ready, reads = [], []  # (t, status, seconds)


def feeder():
    i = 0
    while not stop.is_set():
        try:
            s05.ingest(f"n12-{i}-{uuid.uuid4().hex[:6]}")
        except Exception as e:  # B is direct: should not fail
            print("   ingest failed:", e)
        i += 1
        time.sleep(0.2)


def probe(path, out, token=None):
    while not stop.is_set():
        t = time.time()
        try:
            h = {"Authorization": "Bearer " + token} if token else {}
            r = requests.get(A + path, headers=h, timeout=8)
            out.append((t, r.status_code, time.time() - t))
        except Exception:
            out.append((t, "timeout", time.time() - t))
        time.sleep(0.25)


def freeze():
    ports = subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", DB, "-Atc",
                            f"select client_port from pg_stat_activity where datname='{DB}' and pid <> pg_backend_pid()"],
                           capture_output=True, text=True).stdout.split()
    with open(FREEZE, "a") as f:
        f.write(" ".join(ports) + "\n")
    return time.time(), len(ports)


def arrivals():
    return sorted(json.loads(l)["t"] for l in open(s05.RECV_LOG) if "/n12" in json.loads(l)["path"])


def summary(label, out, t0, t1):
    seg = [x for x in out if t0 <= x[0] < t1]
    bad = [x for x in seg if x[1] != 200]
    line = f"   {label}: {len(seg)} probes, {len(bad)} not 200"
    if bad:
        kinds = {}
        for x in bad:
            kinds[x[1]] = kinds.get(x[1], 0) + 1
        line += f" {kinds}, first at +{bad[0][0] - t0:.1f}s, last at +{bad[-1][0] - t0:.1f}s"
    ok_after = [x for x in seg if x[1] == 200 and (not bad or x[0] > bad[-1][0])]
    if ok_after and bad:
        line += f"; 200 again from +{ok_after[0][0] - t0:.1f}s"
    line += f"; slowest {max((x[2] for x in seg), default=0):.2f}s"
    line += "; answers slower than 1 s: " + str(sum(1 for x in seg if x[2] > 1.0))
    print(line)


threads = [threading.Thread(target=feeder, daemon=True),
           threading.Thread(target=probe, args=("/readyz", ready), daemon=True),
           threading.Thread(target=probe, args=("/api/v1/webhook-endpoints", reads, os.environ["TOKEN"]), daemon=True)]
[t.start() for t in threads]
time.sleep(6)
before = len(arrivals())
t0, n = freeze()
print(f"freeze 1: {n} connections of {DB} frozen at {time.strftime('%H:%M:%S', time.gmtime(t0))} ({before} deliveries before)")
time.sleep(WATCH)
arr = [t for t in arrivals() if t > t0]
gap = (arr[0] - t0) if arr else None
per5 = [sum(1 for t in arr if t0 + k * 5 <= t < t0 + (k + 1) * 5) for k in range(int(WATCH // 5))]
print(f"   deliveries after the freeze: first at +{gap:.2f}s" if gap is not None else "   no delivery after the freeze", f"; per 5 s: {per5} (ingest: 25 per 5 s)")
summary("A /readyz", ready, t0, t0 + WATCH)
summary("A partner read", reads, t0, t0 + WATCH)
pend = subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", DB, "-Atc",
                       "select count(*) filter (where status='pending'), count(*) from webhook_deliveries"],
                      capture_output=True, text=True).stdout.strip()
print(f"   deliveries pending|all: {pend}")
# second freeze, then SIGTERM. HANG=1: the receiver first holds its answers 30 s, so attempts are
# in flight (their record must wait for a frozen link) when the SIGTERM comes.
if os.environ.get("HANG"):
    open(os.environ["RECV_MODE"], "w").write("200 30")
    time.sleep(1.5)
t1, n = freeze()
time.sleep(TERM_AFTER)
term = time.time()
os.kill(A_PID, 15)
while True:
    try:
        os.kill(A_PID, 0)
        if subprocess.run(["ps", "-o", "stat=", "-p", str(A_PID)], capture_output=True, text=True).stdout.strip().startswith("Z"):
            break
    except OSError:
        break
    if time.time() - term > 60:
        break
    time.sleep(0.05)
print(f"freeze 2: {n} connections frozen; SIGTERM {TERM_AFTER:.1f}s later; A gone {time.time() - term:.2f}s after the SIGTERM")
stop.set()
time.sleep(0.5)
