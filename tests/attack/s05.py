#!/usr/bin/env python3
"""S-05: concurrent changes to one webhook endpoint.

Env: BASE, TOKEN, ITOKEN, RECV_LOG, RECV_PORT, TRIALS (default 25).

A. rotation (PATCH {secret:true}) racing PATCH {events}, released together by a barrier:
   both 200; events equal the events PATCH's; the next delivery verifies with the returned secret.
B. two rotations released together: both 200; the next delivery verifies with both returned
   secrets (one current, one previous during the overlap).
C. a worker's 410 -> disabled (gone) racing a storm of PATCH {events}: after every PATCH is
   answered the endpoint is still disabled, reason gone.
D. rotation racing PATCH {enabled:false}/{enabled:true} and {customHeader}: fields not named
   survive.
"""
import base64, hashlib, hmac, json, os, sys, threading, time, uuid
import requests

BASE, TOKEN, ITOKEN = os.environ["BASE"], os.environ["TOKEN"], os.environ["ITOKEN"]
RECV_LOG, RECV_PORT = os.environ["RECV_LOG"], int(os.environ["RECV_PORT"])
TRIALS = int(os.environ.get("TRIALS", "25"))
PARTNER = os.environ.get("PARTNER", "demo-clinic")
S = requests.Session()


def api(method, path, body=None, token=None):
    r = requests.request(method, BASE + path, json=body,
                         headers={"Authorization": "Bearer " + (token or TOKEN)}, timeout=30)
    try:
        j = r.json()
    except Exception:
        j = r.text
    return r.status_code, j


def ingest(tag):
    st, j = api("POST", "/internal/v1/leads", {
        "partnerId": PARTNER, "firstName": "Race", "lastName": tag, "email": f"{tag}@race.test",
        "emailConsent": True, "phone": "+1 555 0100", "smsConsent": True,
        "origin": "managed-website", "location": "Austin, TX"}, token=ITOKEN)
    assert st == 201, (st, j)
    return j["data"]["id"]


def deliveries_with(needle, path_part, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        found = []
        with open(RECV_LOG) as f:
            for line in f:
                rec = json.loads(line)
                if needle in rec["body"] and path_part in rec["path"]:
                    found.append(rec)
        if found:
            return found
        time.sleep(0.1)
    return []


def hdr(rec, name):
    return [v for k, v in rec["headers"] if k.lower() == name.lower()]


def signs(rec, secret):
    """Whether `secret` verifies X-Partner-Signature and (for whsec_) webhook-signature."""
    sig = hdr(rec, "X-Partner-Signature")
    if not sig:
        return False, "no X-Partner-Signature"
    parts = [p.split("=", 1) for p in sig[0].split(",")]
    t = [v for k, v in parts if k == "t"][0]
    v1s = [v for k, v in parts if k == "v1"]
    body = rec["body"].encode()
    mac = hmac.new(secret.encode(), t.encode() + b"." + body, hashlib.sha256).hexdigest()
    ok_stripe = mac in v1s
    ok_std = None
    ws = hdr(rec, "webhook-signature")
    if ws and secret.startswith("whsec_"):
        key = base64.b64decode(secret[len("whsec_"):])
        wid, wts = hdr(rec, "webhook-id")[0], hdr(rec, "webhook-timestamp")[0]
        want = base64.b64encode(hmac.new(key, f"{wid}.{wts}.".encode() + body, hashlib.sha256).digest()).decode()
        ok_std = ("v1," + want) in ws[0].split(" ")
    return ok_stripe and ok_std is not False, f"stripe={ok_stripe} std={ok_std} v1s={len(v1s)}"


def race(*calls):
    """Runs the calls released together; returns their results in order."""
    bar = threading.Barrier(len(calls))
    out = [None] * len(calls)

    def run(i, c):
        bar.wait()
        out[i] = c()

    ts = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


def main():
    # Leave room: delete the partner's endpoints from earlier runs.
    st, j = api("GET", "/api/v1/webhook-endpoints")
    for e in j["data"]:
        api("DELETE", f"/api/v1/webhook-endpoints/{e['id']}")
    url = f"https://127.0.0.1:{RECV_PORT}/s05"
    st, j = api("POST", "/api/v1/webhook-endpoints",
                {"url": url + "/a", "events": ["lead.created"], "secret": True})
    assert st == 201, (st, j)
    ep = j["data"]["id"]
    fails = {"A": 0, "B": 0, "C": 0, "D": 0}
    runs = {"A": 0, "B": 0, "C": 0, "D": 0}

    # A: rotation vs events
    for i in range(TRIALS):
        evs = ["lead.created"] if i % 2 else ["lead.created", "order.created"]
        rot, pat = race(lambda: api("PATCH", f"/api/v1/webhook-endpoints/{ep}", {"secret": True}),
                        lambda: api("PATCH", f"/api/v1/webhook-endpoints/{ep}", {"events": evs}))
        runs["A"] += 1
        if rot[0] != 200 or pat[0] != 200:
            print("A", i, "status", rot[0], pat[0], rot[1], pat[1]); fails["A"] += 1; continue
        secret = rot[1]["data"]["secret"]
        st, g = api("GET", "/api/v1/webhook-endpoints")
        cur = [e for e in g["data"] if e["id"] == ep][0]
        bad = []
        if sorted(cur["events"]) != sorted(evs):
            bad.append(f"events {cur['events']} != {evs}")
        tag = f"a{i}-{uuid.uuid4().hex[:8]}"
        lid = ingest(tag)
        recs = deliveries_with(lid, "/s05/a")
        if not recs:
            bad.append("no delivery")
        else:
            ok, why = signs(recs[0], secret)
            if not ok:
                bad.append("returned secret does not sign: " + why)
        if bad:
            fails["A"] += 1
            print("A", i, bad)

    # B: two rotations
    for i in range(TRIALS):
        r1, r2 = race(lambda: api("PATCH", f"/api/v1/webhook-endpoints/{ep}", {"secret": True}),
                      lambda: api("PATCH", f"/api/v1/webhook-endpoints/{ep}", {"secret": True}))
        runs["B"] += 1
        if r1[0] != 200 or r2[0] != 200:
            print("B", i, "status", r1[0], r2[0]); fails["B"] += 1; continue
        s1, s2 = r1[1]["data"]["secret"], r2[1]["data"]["secret"]
        lid = ingest(f"b{i}-{uuid.uuid4().hex[:8]}")
        recs = deliveries_with(lid, "/s05/a")
        bad = []
        if not recs:
            bad.append("no delivery")
        else:
            for n, s in (("first", s1), ("second", s2)):
                ok, why = signs(recs[0], s)
                if not ok:
                    bad.append(f"{n} returned secret does not sign: {why}")
        if bad:
            fails["B"] += 1
            print("B", i, bad)

    # D: rotation vs enable toggles and custom header: unnamed fields survive
    for i in range(TRIALS):
        hv = f"hv-{uuid.uuid4().hex}"
        rot, hdrp, dis = race(
            lambda: api("PATCH", f"/api/v1/webhook-endpoints/{ep}", {"secret": True}),
            lambda: api("PATCH", f"/api/v1/webhook-endpoints/{ep}", {"customHeader": {"name": "X-Key", "value": hv}}),
            lambda: api("PATCH", f"/api/v1/webhook-endpoints/{ep}", {"enabled": False}))
        runs["D"] += 1
        bad = []
        if (rot[0], hdrp[0], dis[0]) != (200, 200, 200):
            bad.append(f"status {rot[0]} {hdrp[0]} {dis[0]}")
        st, _ = api("PATCH", f"/api/v1/webhook-endpoints/{ep}", {"enabled": True})
        if st != 200:
            bad.append(f"re-enable {st}")
        if not bad:
            secret = rot[1]["data"]["secret"]
            lid = ingest(f"d{i}-{uuid.uuid4().hex[:8]}")
            recs = deliveries_with(lid, "/s05/a")
            if not recs:
                bad.append("no delivery")
            else:
                ok, why = signs(recs[0], secret)
                if not ok:
                    bad.append("secret lost: " + why)
                if hdr(recs[0], "X-Key") != [hv]:
                    bad.append(f"header lost: {hdr(recs[0], 'X-Key')}")
        if bad:
            fails["D"] += 1
            print("D", i, bad)
    api("PATCH", f"/api/v1/webhook-endpoints/{ep}", {"customHeader": None})

    # C: 410 gone vs PATCH {events} storm
    st, j = api("POST", "/api/v1/webhook-endpoints",
                {"url": url + "/gone", "events": ["lead.created"], "secret": True})
    assert st == 201, (st, j)
    gone = j["data"]["id"]
    for i in range(max(5, TRIALS // 2)):
        st, _ = api("PATCH", f"/api/v1/webhook-endpoints/{gone}", {"enabled": True})
        stop = threading.Event()
        statuses = []

        def storm(k):
            n = 0
            while not stop.is_set():
                evs = ["lead.created"] if n % 2 else ["lead.created", "payout.created"]
                statuses.append(api("PATCH", f"/api/v1/webhook-endpoints/{gone}", {"events": evs})[0])
                n += 1

        ts = [threading.Thread(target=storm, args=(k,)) for k in range(4)]
        for t in ts:
            t.start()
        lid = ingest(f"c{i}-{uuid.uuid4().hex[:8]}")
        recs = deliveries_with(lid, "/s05/gone")
        time.sleep(0.5)  # the worker records the 410 while the storm goes on
        stop.set()
        for t in ts:
            t.join()
        runs["C"] += 1
        st, g = api("GET", "/api/v1/webhook-endpoints")
        cur = [e for e in g["data"] if e["id"] == gone][0]
        bad = []
        if not recs:
            bad.append("no delivery")
        if cur["status"] != "disabled" or cur["disabledReason"] != "gone":
            bad.append(f"after storm: status={cur['status']} reason={cur['disabledReason']}")
        if any(s != 200 for s in statuses):
            bad.append(f"PATCH statuses {sorted(set(statuses))}")
        if bad:
            fails["C"] += 1
        print("C", i, f"{len(statuses)} PATCHes", bad or "ok")

    print("RESULT", json.dumps({k: f"{fails[k]} failed of {runs[k]}" for k in runs}))
    return 1 if any(fails.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
