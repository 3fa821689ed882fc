#!/usr/bin/env python3
"""S-07: a disabled endpoint must not keep pending deliveries.

Env: BASE, TOKEN, ITOKEN, RECV_PORT, TRIALS.
1. resend / test / recover on a disabled endpoint (partner API): 400 invalid_request, nothing pending.
2. races released together by a barrier, each against PATCH {enabled:false}:
   test (operator mirror, outside the partner's action budget), recover (operator mirror),
   resend (operator mirror), and a lead ingest. After both are answered, a disabled endpoint with
   a pending delivery is stuck (the claim skips disabled endpoints)."""
import os, sys, threading, time, uuid
from datetime import datetime, timedelta, timezone
import requests

BASE, TOKEN, ITOKEN = os.environ["BASE"], os.environ["TOKEN"], os.environ["ITOKEN"]
RECV_PORT = int(os.environ["RECV_PORT"])
TRIALS = int(os.environ.get("TRIALS", "30"))
P = "demo-clinic"


def api(method, path, body=None, token=None):
    r = requests.request(method, BASE + path, json=body,
                         headers={"Authorization": "Bearer " + (token or TOKEN)}, timeout=30)
    try:
        return r.status_code, r.json()
    except Exception:
        return r.status_code, r.text


def op(method, path, body=None):
    return api(method, f"/internal/v1/partners/{P}" + path, body, token=ITOKEN)


def race(*calls):
    bar = threading.Barrier(len(calls))
    out = [None] * len(calls)

    def run(i, c):
        bar.wait()
        out[i] = c()
    ts = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    return out


def ingest(tag):
    return api("POST", "/internal/v1/leads", {
        "partnerId": P, "firstName": "S07", "lastName": tag, "email": f"{tag}@s07.test",
        "emailConsent": True, "phone": "+1 555 0100", "smsConsent": True, "origin": "managed-website", "location": "X"}, token=ITOKEN)


def pending(ep):
    st, j = op("GET", f"/webhook-deliveries?endpointId={ep}&status=pending&limit=500")
    return len(j["data"])


def main():
    st, j = api("GET", "/api/v1/webhook-endpoints")
    for e in j["data"]:
        api("DELETE", f"/api/v1/webhook-endpoints/{e['id']}")
    # receiver answers 500 on /fail: deliveries end failed after the short schedule
    st, j = api("POST", "/api/v1/webhook-endpoints",
                {"url": f"https://127.0.0.1:{RECV_PORT}/fail", "events": ["lead.created"]})
    ep = j["data"]["id"]
    for i in range(5):
        ingest(f"seed{i}-{uuid.uuid4().hex[:6]}")
    time.sleep(4)
    st, j = op("GET", f"/webhook-deliveries?endpointId={ep}&status=failed&limit=50")
    failed = [d["id"] for d in j["data"]]
    print("seed deliveries failed:", len(failed))
    since = (datetime.now(timezone.utc) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.000Z")

    print("== 1. actions on a disabled endpoint (partner API)")
    api("PATCH", f"/api/v1/webhook-endpoints/{ep}", {"enabled": False})
    for name, (m, p, b) in {
        "resend": ("POST", f"/api/v1/webhook-deliveries/{failed[0]}/resend", None),
        "test": ("POST", f"/api/v1/webhook-endpoints/{ep}/test", None),
        "recover": ("POST", f"/api/v1/webhook-endpoints/{ep}/recover", {"since": since}),
    }.items():
        st, j = api(m, p, b)
        print(f"  {name:8} {st} {j.get('error', {}).get('code') if isinstance(j, dict) else j}")
    print("  pending while disabled:", pending(ep))

    print("== 2. races against PATCH {enabled:false}")
    results = {}
    for kind in ["test", "recover", "resend", "ingest"]:
        stuck = 0
        answered = []
        for i in range(TRIALS):
            api("PATCH", f"/api/v1/webhook-endpoints/{ep}", {"enabled": True})
            # let whatever was requeued before fail again so the trial starts clean
            t0 = time.time()
            while pending(ep) and time.time() - t0 < 5:
                time.sleep(0.2)
            if kind == "test":
                action = lambda: op("POST", f"/webhook-endpoints/{ep}/test")
            elif kind == "recover":
                action = lambda: op("POST", f"/webhook-endpoints/{ep}/recover", {"since": since})
            elif kind == "resend":
                action = lambda: op("POST", f"/webhook-deliveries/{failed[i % len(failed)]}/resend")
            else:
                action = lambda: ingest(f"race{i}-{uuid.uuid4().hex[:6]}")
            a, d = race(action, lambda: api("PATCH", f"/api/v1/webhook-endpoints/{ep}", {"enabled": False}))
            answered.append(a[0])
            time.sleep(1.0)
            n = pending(ep)
            if n:
                stuck += 1
                if stuck == 1:
                    time.sleep(20)
                    st, g = api("GET", "/api/v1/webhook-endpoints")
                    cur = [e for e in g["data"] if e["id"] == ep][0]
                    st, pl = op("GET", f"/webhook-deliveries?endpointId={ep}&status=pending&limit=5")
                    print(f"    {kind} trial {i}: 21 s later endpoint {cur['status']}, pending {pending(ep)}:",
                          [(x['id'][:8], x['event'], x['attempts'], x['nextAttemptAt']) for x in pl['data']])
        results[kind] = stuck
        print(f"  {kind:8} stuck pending on a disabled endpoint in {stuck} of {TRIALS} trials; action statuses {sorted(set(answered))}")
    api("PATCH", f"/api/v1/webhook-endpoints/{ep}", {"enabled": False})
    time.sleep(2)
    print("  finally, disabled, pending:", pending(ep), "(worker does not claim them)")
    print("RESULT", results)


if __name__ == "__main__":
    sys.exit(main())
