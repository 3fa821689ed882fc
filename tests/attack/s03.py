#!/usr/bin/env python3
"""S-03: recover is capped at 1,000 per call; test, resend and recover share 20 calls a minute per
partner (2xx and 4xx other than 429 count; operator calls do not); re-enabling requeues nothing.
Measures the POSTs a target receives from disable/enable/recover cycles.

Env: BASE, TOKEN, ITOKEN, RECV_LOG, RECV_MODE, RECV_PORT, DB, N (failed deliveries to build, 1100)."""
import json, os, subprocess, sys, threading, time, uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
import requests

BASE, TOKEN, ITOKEN = os.environ["BASE"], os.environ["TOKEN"], os.environ["ITOKEN"]
RECV_LOG, RECV_MODE, RECV_PORT, DB = os.environ["RECV_LOG"], os.environ["RECV_MODE"], int(os.environ["RECV_PORT"]), os.environ["DB"]
N = int(os.environ.get("N", "1100"))
P = "demo-clinic"


def api(method, path, body=None, token=None, headers=False):
    r = requests.request(method, BASE + path, json=body,
                         headers={"Authorization": "Bearer " + (token or TOKEN)}, timeout=60)
    try:
        j = r.json()
    except Exception:
        j = r.text
    return (r.status_code, j, r.headers) if headers else (r.status_code, j)


def sql(q):
    return subprocess.run(["psql", "-qtA", DB, "-c", q], capture_output=True, text=True).stdout.strip()


def counts(ep):
    return sql(f"select status, count(*) from webhook_deliveries where endpoint_id='{ep}' group by 1 order by 1").replace("\n", " ")


def received():
    with open(RECV_LOG) as f:
        return sum(1 for _ in f)


def mode(s):
    open(RECV_MODE, "w").write(s)


def main():
    st, j = api("GET", "/api/v1/webhook-endpoints")
    for e in j["data"]:
        api("DELETE", f"/api/v1/webhook-endpoints/{e['id']}")
    st, j = api("POST", "/api/v1/webhook-endpoints",
                {"url": f"https://127.0.0.1:{RECV_PORT}/target", "events": ["lead.created"]})
    ep = j["data"]["id"]
    mode("200 30")  # the target hangs: deliveries pile up pending
    t0 = time.time()

    def ingest(i):
        return api("POST", "/internal/v1/leads", {
            "partnerId": P, "firstName": "S03", "lastName": str(i), "email": f"s03-{i}@x.test",
            "emailConsent": True, "phone": "+1 555 0100", "smsConsent": True,
            "origin": "managed-website", "location": "X"}, token=ITOKEN)[0]
    with ThreadPoolExecutor(8) as ex:
        sts = list(ex.map(ingest, range(N)))
    print(f"ingested {sts.count(201)} leads in {time.time() - t0:.1f}s; deliveries: {counts(ep)}")
    st, j = api("PATCH", f"/api/v1/webhook-endpoints/{ep}", {"enabled": False})
    print(f"disabled: {counts(ep)}")
    mode("200")
    time.sleep(1)
    base = received()
    st, j = api("PATCH", f"/api/v1/webhook-endpoints/{ep}", {"enabled": True})
    time.sleep(3)
    print(f"re-enabled ({st}): {counts(ep)}; POSTs to the target after re-enabling: {received() - base}")

    since = (datetime.now(timezone.utc) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    print("== recover cap")
    base = received()
    t = time.time()
    st, j = api("POST", f"/api/v1/webhook-endpoints/{ep}/recover", {"since": since})
    print(f"recover: {st} {j}")
    while time.time() - t < 15 and "pending" in counts(ep):
        time.sleep(0.5)
    print(f"  {received() - base} POSTs in {time.time() - t:.1f}s; {counts(ep)}")

    print("== disable/enable/recover cycles, for 60 s (partner API only)")
    base = received()
    t = time.time()
    statuses = []
    while time.time() - t < 60:
        api("PATCH", f"/api/v1/webhook-endpoints/{ep}", {"enabled": False})
        api("PATCH", f"/api/v1/webhook-endpoints/{ep}", {"enabled": True})
        st, j = api("POST", f"/api/v1/webhook-endpoints/{ep}/recover", {"since": since})
        statuses.append((st, j["data"]["requeued"] if st == 202 else j["error"]["code"]))
        if st == 429:
            time.sleep(1)
        else:
            time.sleep(0.5)
    admitted = [s for s in statuses if s[0] != 429]
    print(f"  {len(statuses)} recover calls: {len(admitted)} admitted {admitted[:3]}..., "
          f"{len(statuses) - len(admitted)} answered 429; {received() - base} POSTs to the target in 60 s")
    time.sleep(61)

    print("== the action budget: 40 calls at once (test, resend of an unknown id, recover with a bad since)")
    dl = sql(f"select id from webhook_deliveries where endpoint_id='{ep}' limit 1")
    calls = []
    for i in range(40):
        k = i % 4
        if k == 0:
            calls.append(("test", "POST", f"/api/v1/webhook-endpoints/{ep}/test", None))
        elif k == 1:
            calls.append(("resend-404", "POST", f"/api/v1/webhook-deliveries/{uuid.uuid4()}/resend", None))
        elif k == 2:
            calls.append(("recover-400", "POST", f"/api/v1/webhook-endpoints/{ep}/recover", {"since": "2001-01-01T00:00:00Z"}))
        else:
            calls.append(("resend", "POST", f"/api/v1/webhook-deliveries/{dl}/resend", None))
    bar = threading.Barrier(len(calls))
    out = [None] * len(calls)

    def run(i):
        bar.wait()
        name, m, p, b = calls[i]
        st, j, h = api(m, p, b, headers=True)
        out[i] = (name, st, h.get("Retry-After"))
    ts = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    [t.start() for t in ts]
    [t.join() for t in ts]
    adm = [o for o in out if o[1] != 429]
    print(f"  admitted {len(adm)} (want 20): {sorted(set((o[0], o[1]) for o in adm))}")
    print(f"  429: {len(out) - len(adm)}, Retry-After values {sorted(set(o[2] for o in out if o[1] == 429))}; 5xx: {[o for o in out if o[1] >= 500]}")
    st, j = api("POST", f"/internal/v1/partners/{P}/webhook-endpoints/{ep}/test", token=ITOKEN)
    print(f"  operator test while the partner is over budget: {st}")
    uid = api("POST", "/internal/v1/users", {"email": f"second{uuid.uuid4().hex[:6]}@x.test", "partnerId": P, "admin": False}, token=ITOKEN)[1]["data"]["id"]
    tok2 = api("POST", f"/internal/v1/users/{uid}/tokens", token=ITOKEN)[1]["data"]["token"]
    st, j = api("POST", f"/api/v1/webhook-endpoints/{ep}/test", token=tok2)
    print(f"  another token of the same partner: {st}")
    print("RESULT", json.dumps({"admitted_at_once": len(adm)}))


if __name__ == "__main__":
    sys.exit(main())
