#!/usr/bin/env python3
"""attack14's driver: for DURATION seconds, leads through the operator API (RATE a second, each a
delivery to every endpoint), and churn on the partner API: PATCH of a random endpoint's custom
header (a claimed delivery is given back), resend of a random delivery, and every DISABLE_EVERY
seconds one endpoint disabled, enabled again and recovered. Writes what it did to OUT (JSON).

env: BASE, TOKEN, ITOKEN, PARTNER, DURATION, RATE, PATCH_EVERY, RESEND_EVERY, DISABLE_EVERY, OUT
"""
import json, os, random, threading, time, urllib.request, datetime

BASE = os.environ["BASE"]
TOKEN = os.environ["TOKEN"]
ITOKEN = os.environ["ITOKEN"]
PARTNER = os.environ.get("PARTNER", "demo-clinic")
DUR = float(os.environ.get("DURATION", "60"))
RATE = float(os.environ.get("RATE", "5"))
PATCH_EVERY = float(os.environ.get("PATCH_EVERY", "0.3"))
RESEND_EVERY = float(os.environ.get("RESEND_EVERY", "0.5"))
DISABLE_EVERY = float(os.environ.get("DISABLE_EVERY", "10"))
OUT = os.environ["OUT"]


def call(method, path, body=None, tok=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(BASE + path, data=data, method=method)
    req.add_header("Authorization", "Bearer " + (tok or TOKEN))
    req.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            txt = r.read()
            return r.status, (json.loads(txt) if txt else None)
    except urllib.error.HTTPError as e:
        return e.code, e.read()[:300]
    except Exception as e:  # noqa
        return 0, str(e)


eps = [e["id"] for e in call("GET", "/api/v1/webhook-endpoints")[1]["data"]]
stop = time.time() + DUR
log = {"leads": 0, "lead_err": 0, "patches": 0, "patch_err": 0, "resends": [], "resend_err": 0,
       "disables": [], "recovered": 0, "errors": []}
start_iso = (datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=5)).isoformat()


def ingest():
    i = 0
    while time.time() < stop:
        t0 = time.time()
        s, b = call("POST", "/internal/v1/leads", {
            "partnerId": PARTNER, "firstName": "Ann", "lastName": "Lee",
            "email": f"a14-{i}@example.com", "emailConsent": True, "phone": "+1 555 0100",
            "smsConsent": True, "origin": "managed-website", "location": "Austin, TX"}, ITOKEN)
        i += 1
        if s in (200, 201):
            log["leads"] += 1
        else:
            log["lead_err"] += 1
            if len(log["errors"]) < 5:
                log["errors"].append(["lead", s, str(b)[:200]])
        time.sleep(max(0, 1 / RATE - (time.time() - t0)) * random.uniform(0.2, 1.8))


def patcher():
    n = 0
    while time.time() < stop:
        e = random.choice(eps)
        n += 1
        s, b = call("PATCH", f"/api/v1/webhook-endpoints/{e}",
                    {"customHeader": {"name": "X-A14", "value": f"v{n}"}})
        if s == 200:
            log["patches"] += 1
        else:
            log["patch_err"] += 1
            if len(log["errors"]) < 10:
                log["errors"].append(["patch", s, str(b)[:200]])
        time.sleep(PATCH_EVERY * random.uniform(0.2, 1.8))


def resender():
    while time.time() < stop:
        time.sleep(RESEND_EVERY * random.uniform(0.2, 1.8))
        s, b = call("GET", "/api/v1/webhook-deliveries?limit=50")
        if s != 200:
            continue
        ds = b.get("data") or []
        if not ds:
            continue
        d = random.choice(ds)
        s, b = call("POST", f"/api/v1/webhook-deliveries/{d['id']}/resend")
        if s in (200, 202):
            log["resends"].append([time.time(), d["id"]])
        else:
            log["resend_err"] += 1


def disabler():
    while time.time() < stop - DISABLE_EVERY:
        time.sleep(DISABLE_EVERY * random.uniform(0.5, 1.0))
        e = random.choice(eps)
        t0 = time.time()
        s1, _ = call("PATCH", f"/api/v1/webhook-endpoints/{e}", {"enabled": False})
        time.sleep(random.uniform(0.1, 1.0))
        s2, _ = call("PATCH", f"/api/v1/webhook-endpoints/{e}", {"enabled": True})
        rec = 0
        for _ in range(20):
            s3, b = call("POST", f"/api/v1/webhook-endpoints/{e}/recover", {"since": start_iso})
            if s3 not in (200, 202) or not isinstance(b, dict):
                break
            b = b.get("data", b)
            rec += b.get("requeued", 0)
            if not b.get("remaining"):
                break
        log["disables"].append([t0, time.time(), e, s1, s2, rec])
        log["recovered"] += rec


ts = [threading.Thread(target=f) for f in (ingest, ingest, patcher, resender, disabler)]
for t in ts:
    t.start()
for t in ts:
    t.join()
json.dump(log, open(OUT, "w"))
print(json.dumps({k: (len(v) if isinstance(v, list) else v) for k, v in log.items()}))
