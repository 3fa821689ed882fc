#!/usr/bin/env python3
"""N9e: many endpoints, a steady flow of deliveries and concurrent changes, while the LISTEN
connection is held DELAY s (pgproxy.py PORT:delay<s>, set by n9e_many.sh) so the announcements
are late and only the endpoint-row check before each attempt stands between a change and a leak.
K endpoints; a lead ingested every INGEST_EVERY s (one delivery per endpoint); ROUNDS rounds, each
for every endpoint at once: two rotations {secret:true} released together, then
{url: next, secret:true, expirePrevious:true}. Every delivery is then judged by n9e_judge.py
against the changes answered more than SLACK s before it arrived (old URL, erased secret, a
returned secret that does not sign; both X-Partner-Signature and webhook-signature checked).
Env: BASE TOKEN ITOKEN RECV_LOG RECV_PORT RECV_MODE, K, ROUNDS, INGEST_EVERY, SLACK, GAP."""
import json, os, subprocess, sys, threading, time, uuid
sys.path.insert(0, os.path.dirname(__file__))
import s05  # noqa: E402

K, ROUNDS = int(os.environ.get("K", "6")), int(os.environ.get("ROUNDS", "4"))
EVERY, SLACK, GAP = float(os.environ.get("INGEST_EVERY", "0.15")), float(os.environ.get("SLACK", "0.05")), float(os.environ.get("GAP", "1.5"))
RECV_PORT = s05.RECV_PORT
open(os.environ["RECV_MODE"], "w").write("200 " + os.environ.get("RECV_DELAY", "0.3"))  # attack13: RECV_DELAY
run = uuid.uuid4().hex[:6]
eps = []  # (id, timeline: [(answered, kind, url, secret)])
for k in range(K):
    url = f"https://127.0.0.1:{RECV_PORT}/many-{run}-{k}-v0"
    st, j = s05.api("POST", "/api/v1/webhook-endpoints", {"url": url, "events": ["lead.created"], "secret": True})
    eps.append((j["data"]["id"], [(time.time(), "create", url, j["data"]["secret"])]))
stop = threading.Event()


def feeder():
    i = 0
    while not stop.is_set():
        s05.ingest(f"many{i}-{uuid.uuid4().hex[:6]}"); i += 1
        time.sleep(EVERY)


def patch(k, body, kind):
    st, j = s05.api("PATCH", f"/api/v1/webhook-endpoints/{eps[k][0]}", body)
    t = time.time()
    assert st == 200, (st, j)
    eps[k][1].append((t, kind, j["data"]["url"], j["data"]["secret"]))


def all_at_once(calls):
    ts = [threading.Thread(target=c) for c in calls]
    [t.start() for t in ts]; [t.join() for t in ts]


threading.Thread(target=feeder, daemon=True).start()
time.sleep(2)
changes = 0
for r in range(1, ROUNDS + 1):
    calls = []
    for k in range(K):
        calls += [lambda k=k: patch(k, {"secret": True}, "rotate")] * 2
    all_at_once(calls); changes += 2 * K
    time.sleep(GAP)
    all_at_once([lambda k=k: patch(k, {"url": f"https://127.0.0.1:{RECV_PORT}/many-{run}-{k}-v{r}", "secret": True, "expirePrevious": True}, "move+expire") for k in range(K)])
    changes += K
    time.sleep(GAP)
stop.set()
time.sleep(4)
open(os.environ["RECV_MODE"], "w").write("200")
json.dump([tl for _, tl in eps], open(s05.RECV_LOG + ".timeline.json", "w"))
subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "n9e_judge.py"), s05.RECV_LOG, str(SLACK)])
for ep, _ in eps:
    s05.api("DELETE", f"/api/v1/webhook-endpoints/{ep}")
