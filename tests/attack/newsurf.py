#!/usr/bin/env python3
"""New surfaces probed as an attacker: portal sessions, Idempotency-Key, events-feed cursors.
Env: BASE TOKEN ITOKEN. Creates a second partner `victim-n` with a token (operator API)."""
import subprocess, base64, json, os, threading, urllib.request, urllib.error, uuid

BASE, TOKEN, ITOKEN = os.environ["BASE"], os.environ["TOKEN"], os.environ["ITOKEN"]


def call(method, path, token=None, body=None, headers=None):
    h = {"content-type": "application/json"}
    if token:
        h["Authorization"] = "Bearer " + token
    h.update(headers or {})
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    req = urllib.request.Request(BASE + path, data=data, headers=h, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            raw = r.read()
            return r.status, {k.lower(): v for k, v in r.headers.items()}, raw
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


def js(raw):
    try:
        return json.loads(raw)
    except Exception:
        return raw[:200]


def show(label, r, expect=None):
    st, h, raw = r
    flag = "" if expect is None else ("  ok" if st in (expect if isinstance(expect, tuple) else (expect,)) else "  <-- UNEXPECTED")
    extra = " replayed" if h.get("idempotent-replayed") else ""
    print(f"  {label}: {st}{extra} {raw[:160].decode('utf-8', 'replace')}{flag}")
    return r


# A second partner with its own token.
call("PUT", "/internal/v1/partners/victim-n", ITOKEN, {
    "name": "Victim", "email": "v@victim.test", "active": True, "dnaAccess": True, "headlessLinks": True,
    "defaultLang": "en", "enabledLangs": ["en"], "careServices": {"subscriptionActive": False,
    "manualOverride": False, "yearlyBundle": False, "services": []}})
u = js(call("POST", "/internal/v1/users", ITOKEN, {"email": "ops@victim.test", "partnerId": "victim-n", "admin": False})[2])
VTOKEN = js(call("POST", f"/internal/v1/users/{u['data']['id']}/tokens", ITOKEN, {})[2])["data"]["token"]
print("== Idempotency-Key")
key = "attack-" + uuid.uuid4().hex
import random
SUB = "77"
body = {"nickname": "Attack sub", "subId": SUB}
a = show("partner A POST /sub-accounts with key K", call("POST", "/api/v1/sub-accounts", TOKEN, body, {"Idempotency-Key": key}), 201)
show("partner B, same key K, same body (must run as its own, not replay A)",
     call("POST", "/api/v1/sub-accounts", VTOKEN, body, {"Idempotency-Key": key}), (201, 400, 409))
show("partner A again (replay)", call("POST", "/api/v1/sub-accounts", TOKEN, body, {"Idempotency-Key": key}), 201)
show("partner A, same key, body with other whitespace (422)",
     call("POST", "/api/v1/sub-accounts", TOKEN, json.dumps(body, indent=1).encode(), {"Idempotency-Key": key}), 422)
show("partner A, same key, same body, path with a query (422)",
     call("POST", "/api/v1/sub-accounts?x=1", TOKEN, body, {"Idempotency-Key": key}), 422)
show("operator, same key on an operator POST (separate space)",
     call("POST", "/internal/v1/users", ITOKEN, {"email": "k@victim.test", "partnerId": "victim-n", "admin": False}, {"Idempotency-Key": key}), 201)
for bad in ["", "x" * 256, "é", "a\tb"]:
    show(f"malformed key {bad[:12]!r}", call("POST", "/api/v1/sub-accounts", TOKEN, body,
                                             {"Idempotency-Key": bad.encode('utf-8').decode('latin-1')}), 400)
# Secrets in kept answers: the endpoint secret is "shown once"; a replay shows it again.
k2 = "attack-ep-" + uuid.uuid4().hex
ep = {"url": "https://127.0.0.1:9/hook", "events": ["lead.created"],
      "customHeader": {"name": "X-Api-Key", "value": "supersecret-value-1234"}}
r1 = call("POST", "/api/v1/webhook-endpoints", TOKEN, ep, {"Idempotency-Key": k2})
r2 = call("POST", "/api/v1/webhook-endpoints", TOKEN, ep, {"Idempotency-Key": k2})
print(f"  endpoint POST {r1[0]} {r1[2][:300]!r}")
print(f"  endpoint POST {r1[0]}, replay {r2[0]} replayed={r2[1].get('idempotent-replayed')}; "
      f"secret in replay: {'secret' in r2[2].decode() and js(r1[2]).get('data', {}).get('secret', '?') in r2[2].decode()}; "
      f"header value in replay: {b'supersecret-value-1234' in r2[2]}")
EP = js(r1[2]).get("data", {}).get("id")
# Concurrency: 20 same-key requests released together.
k3 = "attack-race-" + uuid.uuid4().hex
res, barrier = [], threading.Barrier(20)


def racer():
    barrier.wait()
    res.append(call("POST", "/api/v1/sub-accounts", TOKEN, {"nickname": "Race", "subId": "78"}, {"Idempotency-Key": k3})[0])


ts = [threading.Thread(target=racer) for _ in range(20)]
[t.start() for t in ts]
[t.join() for t in ts]
print(f"  20 concurrent same-key POSTs: {sorted(res)}; sub-accounts with subId 78: "
      f"{sum(1 for s in js(call('GET', '/api/v1/sub-accounts?limit=200', TOKEN)[2])['data'] if s['subId'] == '78')}")

u2 = js(call("POST", "/internal/v1/users", ITOKEN, {"email": "intern@demo.test", "partnerId": "demo-clinic", "admin": False})[2])
PT2 = js(call("POST", f"/internal/v1/users/{u2['data']['id']}/tokens", ITOKEN, {})[2])["data"]["token"]
print("== Portal sessions")
m = show("mint (integration token)", call("POST", "/api/v1/portal-sessions", TOKEN), 201)
url = js(m[2])["data"]["url"]
code = url.split("#code=")[1]
ex = show("exchange", call("POST", "/portal/v1/sessions", body={"code": code}), 201)
PT = js(ex[2])["data"]["token"]
show("exchange the same code again", call("POST", "/portal/v1/sessions", body={"code": code}), 400)
m2 = js(call("POST", "/api/v1/portal-sessions", TOKEN)[2])["data"]["url"].split("#code=")[1]
res, barrier = [], threading.Barrier(10)


def ex_race():
    barrier.wait()
    res.append(call("POST", "/portal/v1/sessions", body={"code": m2})[0])


ts = [threading.Thread(target=ex_race) for _ in range(10)]
[t.start() for t in ts]
[t.join() for t in ts]
print(f"  10 concurrent exchanges of one code: {sorted(res)}  {'ok' if res.count(201) == 1 else '<-- UNEXPECTED'}")
show("code with whitespace/case changes", call("POST", "/portal/v1/sessions", body={"code": " " + code.upper() + " "}), 400)
show("code as a bearer token on /api/v1", call("GET", "/api/v1/webhook-endpoints", code), 401)
for method, path, exp in [
    ("GET", "/api/v1/webhook-endpoints", 200), ("GET", "/api/v1/webhook-deliveries", 200),
    ("GET", "/api/v1/webhook-deliveries/by-hour", 200),
    ("GET", "/api/v1/leads", 403), ("GET", f"/api/v1/leads/{uuid.uuid4()}", 403), ("GET", "/api/v1/orders", 403),
    ("GET", "/api/v1/payouts", 403), ("GET", "/api/v1/sub-accounts", 403), ("GET", "/api/v1/care-services-coupons", 403),
    ("GET", "/api/v1/dna-links", 403), ("GET", "/api/v1/events", 403), ("GET", f"/api/v1/events/{uuid.uuid4()}", 403),
    ("POST", "/api/v1/portal-sessions", 403), ("POST", "/api/v1/sub-accounts", 403),
    ("GET", "/api/v1/leads?format=csv", 403), ("GET", "/internal/v1/partners/demo-clinic", (401, 404)),
    ("GET", "/api/v1/openapi.json", 200),
]:
    show(f"portal token {method} {path}", call(method, path, PT, {} if method == "POST" else None), exp)
show("portal token PATCH own endpoint {secret:true} (allowed: rotate)",
     call("PATCH", f"/api/v1/webhook-endpoints/{EP}", PT, {"secret": True}), 200)
show("portal token PATCH own endpoint url (endpoint calls of the spec: allowed?)",
     call("PATCH", f"/api/v1/webhook-endpoints/{EP}", PT, {"url": "https://127.0.0.1:9/moved"}), (200, 403))
vep = js(call("POST", "/api/v1/webhook-endpoints", VTOKEN, {"url": "https://127.0.0.1:9/v", "events": ["lead.created"]})[2])
vid = vep.get("data", {}).get("id")
show("portal token PATCH partner B's endpoint", call("PATCH", f"/api/v1/webhook-endpoints/{vid}", PT, {"enabled": False}), 404)
show("portal token DELETE partner B's endpoint", call("DELETE", f"/api/v1/webhook-endpoints/{vid}", PT), 404)
r = show("portal token Idempotency-Key replay of A's endpoint POST (K2, same body): secret again",
     call("POST", "/api/v1/webhook-endpoints", PT, ep, {"Idempotency-Key": k2}))
print(f"  -> portal token sees the integration's secret: {js(r1[2]).get('data', {}).get('secret', '?') in r[2].decode()}, header value: {b'supersecret-value-1234' in r[2]}")
r = show("non-admin token? (same partner, other user) replay", call("POST", "/api/v1/webhook-endpoints", PT2, ep, {"Idempotency-Key": k2}))
k4 = "attack-rot-" + uuid.uuid4().hex
rot = call("PATCH", f"/api/v1/webhook-endpoints/{EP}", TOKEN, {"secret": True}, {"Idempotency-Key": k4})
sec = js(rot[2]).get("data", {}).get("secret")
print(f"  integration token rotates with key K4: {rot[0]}, secret {str(sec)[:10]}…")
for who, tok in [("portal token", PT), ("other user's token", PT2), ("same token", TOKEN)]:
    r = call("PATCH", f"/api/v1/webhook-endpoints/{EP}", tok, {"secret": True}, {"Idempotency-Key": k4})
    print(f"  {who} replays K4: {r[0]} replayed={r[1].get('idempotent-replayed')}, sees the new secret: {bool(sec) and sec in r[2].decode()}")
kept = subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", os.environ.get("DB", "attack_newsurf"), "-Atc",
                       "select count(*) from idempotency_keys where position(convert_to('" + str(sec) + "','UTF8') in body) > 0"
                       " or position(convert_to('supersecret-value-1234','UTF8') in body) > 0"],
                      capture_output=True, text=True)
print(f"  kept answers holding the secret or the header value in clear (idempotency_keys, bytea search): {kept.stdout.strip() or kept.stderr.strip()[:200]}")
# Revocation: the integration token that minted it is rotated away; does the portal session live on?
print("== Events feed cursors")
p = js(call("GET", "/api/v1/events?limit=2", TOKEN)[2])
cur = p["page"]["nextCursor"]
print(f"  A's cursor: {cur}")
show("B uses A's cursor", call("GET", f"/api/v1/events?cursor={cur}", VTOKEN), 400)
try:
    pad = cur + "=" * (-len(cur) % 4)
    raw = base64.urlsafe_b64decode(pad)
    print(f"  cursor decodes to {raw[:120]!r}")
    forged = bytearray(raw)
    forged[0] ^= 1
    fc = base64.urlsafe_b64encode(bytes(forged)).decode().rstrip("=")
    show("A with a bit-flipped cursor", call("GET", f"/api/v1/events?cursor={fc}", TOKEN), 400)
except Exception as e:
    print("  cursor is not base64:", e)
for c in ["x", "0", "-1", "%00", "a" * 5000, cur + "x", cur[:-1]]:
    show(f"A with cursor {c[:20]!r}", call("GET", f"/api/v1/events?cursor={c}", TOKEN), (400, 414))
dc = js(call("GET", "/api/v1/webhook-deliveries?limit=1", TOKEN)[2])["page"].get("nextCursor")
lc = js(call("GET", "/api/v1/leads?limit=1", TOKEN)[2])["page"].get("nextCursor")
show("A: a leads cursor on the events feed", call("GET", f"/api/v1/events?cursor={lc}", TOKEN), 400)
if dc:
    show("A: a deliveries cursor on the events feed", call("GET", f"/api/v1/events?cursor={dc}", TOKEN), 400)
show("A: an events cursor on leads", call("GET", f"/api/v1/leads?cursor={cur}", TOKEN), 400)
show("B: A's event by id", call("GET", f"/api/v1/events/{p['data'][0]['id']}", VTOKEN), 404)
show("since far in the past", call("GET", "/api/v1/events?since=1970-01-01T00:00:00Z", TOKEN), (200, 410))
show("since far in the future", call("GET", "/api/v1/events?since=9999-12-31T23:59:59Z", TOKEN), 200)
show("types junk", call("GET", "/api/v1/events?types=lead.created,ping", TOKEN), 400)
print("== Portal session after the minting user is deleted / its token rotated")
u3 = js(call("POST", "/internal/v1/users", ITOKEN, {"email": "temp@demo.test", "partnerId": "demo-clinic", "admin": False})[2])["data"]
t3 = js(call("POST", f"/internal/v1/users/{u3['id']}/tokens", ITOKEN, {})[2])["data"]
c3 = js(call("POST", "/api/v1/portal-sessions", t3["token"])[2])["data"]["url"].split("#code=")[1]
c3b = js(call("POST", "/api/v1/portal-sessions", t3["token"])[2])["data"]["url"].split("#code=")[1]
p3 = js(call("POST", "/portal/v1/sessions", body={"code": c3})[2])["data"]["token"]
show("portal session works", call("GET", "/api/v1/webhook-endpoints", p3), 200)
show("rotate the minting token", call("POST", f"/internal/v1/tokens/{t3['id']}/rotate", ITOKEN), 201)
show("portal session after the minting token's rotation", call("GET", "/api/v1/webhook-endpoints", p3), (200, 401))
show("delete the minting user", call("DELETE", f"/internal/v1/users/{u3['id']}", ITOKEN), (200, 204))
show("portal session after its user is deleted", call("GET", "/api/v1/webhook-endpoints", p3), 401)
show("unused code of the deleted user exchanged", call("POST", "/portal/v1/sessions", body={"code": c3b}), 400)
