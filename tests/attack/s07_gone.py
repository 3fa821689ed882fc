#!/usr/bin/env python3
"""S-07 by delivery: the worker disables an endpoint on 410 (gone) while leads keep arriving.
After the stream stops, a disabled endpoint with pending deliveries is stuck. Env as s07.py."""
import os, sys, threading, time, uuid
sys.path.insert(0, os.path.dirname(__file__))
import s07  # noqa: E402

TRIALS = int(os.environ.get("TRIALS", "10"))
st, j = s07.api("GET", "/api/v1/webhook-endpoints")
for e in j["data"]:
    s07.api("DELETE", f"/api/v1/webhook-endpoints/{e['id']}")
st, j = s07.api("POST", "/api/v1/webhook-endpoints",
                {"url": f"https://127.0.0.1:{s07.RECV_PORT}/gone", "events": ["lead.created"]})
ep = j["data"]["id"]
stuck = 0
for i in range(TRIALS):
    s07.api("PATCH", f"/api/v1/webhook-endpoints/{ep}", {"enabled": True})
    stop = threading.Event()

    def stream():
        while not stop.is_set():
            s07.ingest(f"gone{i}-{uuid.uuid4().hex[:6]}")
    ts = [threading.Thread(target=stream) for _ in range(4)]
    [t.start() for t in ts]
    t0 = time.time()
    while time.time() - t0 < 10:
        st, g = s07.api("GET", "/api/v1/webhook-endpoints")
        if [e for e in g["data"] if e["id"] == ep][0]["status"] == "disabled":
            break
        time.sleep(0.05)
    time.sleep(0.3)
    stop.set()
    [t.join() for t in ts]
    time.sleep(3)
    st, g = s07.api("GET", "/api/v1/webhook-endpoints")
    cur = [e for e in g["data"] if e["id"] == ep][0]
    n = s07.pending(ep)
    if cur["status"] == "disabled" and n:
        stuck += 1
    print(f"trial {i}: endpoint {cur['status']}/{cur['disabledReason']}, pending {n}")
print(f"RESULT stuck in {stuck} of {TRIALS}")
