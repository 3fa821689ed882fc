#!/usr/bin/env python3
"""attack13: changes aimed at the claim's window. K endpoints; N times: one lead ingested (one
delivery per endpoint, woken in-process: claimed within a millisecond or two) and, started a
so that the changes' answers come about when the delivery is sent (aimed from the calls'
moving-average latencies, +- JITTER_MS ms), every endpoint moved at once with a new secret and expirePrevious (so a
delivery sent on the claim's read, or on a check, made before the change is signed only by a
secret the change erased and goes to the old URL). Then PAUSE s. The LISTEN connection is held
by n9e_many.sh (DELAY), so announcements come late: only the claim's read or the row check stands
between a change and a leak. Same timeline format as n9e_many.py: judged by a13_judge.py (how
late, in ms, from the change each delivery missed) and n9e_judge.py.
Env: as n9e_many.py, plus N, JITTER_MS, PAUSE, RECV_DELAY."""
import json, os, random, subprocess, sys, threading, time, uuid
sys.path.insert(0, os.path.dirname(__file__))
import s05  # noqa: E402

K, N = int(os.environ.get("K", "6")), int(os.environ.get("N", "200"))
JIT, PAUSE = float(os.environ.get("JITTER_MS", "6")), float(os.environ.get("PAUSE", "0.03"))
open(os.environ["RECV_MODE"], "w").write("200 " + os.environ.get("RECV_DELAY", "0"))
run = uuid.uuid4().hex[:6]
eps = []
for k in range(K):
    url = f"https://127.0.0.1:{s05.RECV_PORT}/many-{run}-{k}-v0"
    st, j = s05.api("POST", "/api/v1/webhook-endpoints", {"url": url, "events": ["lead.created"], "secret": True})
    eps.append((j["data"]["id"], [(time.time(), "create", url, j["data"]["secret"])]))


lat = {"patch": 0.0, "ingest": 0.0}  # moving averages of each call's start -> answer, s


def timed(kind, f, *a):
    t0 = time.time(); f(*a); lat[kind] = 0.8 * lat[kind] + 0.2 * (time.time() - t0) if lat[kind] else time.time() - t0


def patch(k, r):
    body = {"url": f"https://127.0.0.1:{s05.RECV_PORT}/many-{run}-{k}-v{r}", "secret": True, "expirePrevious": True}
    st, j = s05.api("PATCH", f"/api/v1/webhook-endpoints/{eps[k][0]}", body)
    t = time.time()
    assert st == 200, (st, j)
    eps[k][1].append((t, "move+expire", j["data"]["url"], j["data"]["secret"]))


time.sleep(1)
for r in range(1, N + 1):
    # the ingest and the changes started OFF ms apart, either first (-JIT..+JIT): the change's
    # commit is to land between a claim's snapshot and its send
    # aimed: the changes' commits (about their answers) at the delivery's send (about the ingest's
    # answer + 1 ms), from the calls' moving-average latencies, +- JITTER_MS
    off = (lat["patch"] - lat["ingest"]) * -1 + random.uniform(-JIT, JIT) / 1000
    ts = [threading.Thread(target=timed, args=("patch", patch, k, r)) for k in range(K)]
    ing = threading.Thread(target=timed, args=("ingest", s05.ingest, f"race{r}-{uuid.uuid4().hex[:6]}"))
    first, then = (ts, [ing]) if off < 0 else ([ing], ts)
    [t.start() for t in first]; time.sleep(abs(off)); [t.start() for t in then]
    [t.join() for t in ts + [ing]]
    time.sleep(PAUSE)
time.sleep(4)
print(f"   latency (moving average): patch {1000 * lat['patch']:.1f} ms, ingest {1000 * lat['ingest']:.1f} ms")
json.dump([tl for _, tl in eps], open(s05.RECV_LOG + ".timeline.json", "w"))
subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "n9e_judge.py"), s05.RECV_LOG, "0"])
for ep, _ in eps:
    s05.api("DELETE", f"/api/v1/webhook-endpoints/{ep}")
