#!/usr/bin/env python3
"""N10 variations: kept answers showing a secret once, replayed by the same token after its
rotation, under a different body, for portal links, portal sessions and operator token calls;
then a bytea search of idempotency_keys for every secret/token/code seen. Env: BASE TOKEN ITOKEN DB."""
import json, os, subprocess, uuid, urllib.request, urllib.error
BASE, TOKEN, ITOKEN, DB = os.environ["BASE"], os.environ["TOKEN"], os.environ["ITOKEN"], os.environ["DB"]
seen_secrets = []


def call(method, path, token=None, body=None, key=None):
    h = {"content-type": "application/json"}
    if token:
        h["Authorization"] = "Bearer " + token
    if key:
        h["Idempotency-Key"] = key
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(BASE + path, data=data, headers=h, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers.get("Idempotent-Replayed"), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Idempotent-Replayed"), e.read().decode()


def check(label, r, expect, secret=None):
    leak = bool(secret) and secret in r[2]
    ok = r[0] == expect and not (leak and expect != 200 and expect != 201)
    print(f"  {label}: {r[0]} replayed={r[1]} shows the secret={leak}  {'ok' if ok else '<-- UNEXPECTED'}")
    return r


def d(r):
    return json.loads(r[2])["data"]


u = d(call("POST", "/internal/v1/users", ITOKEN, {"email": f"n10-{uuid.uuid4().hex[:6]}@demo.test", "partnerId": "demo-clinic", "admin": True}))
t = d(call("POST", f"/internal/v1/users/{u['id']}/tokens", ITOKEN, {}))
T = t["token"]; seen_secrets.append(T)
ep = d(call("POST", "/api/v1/webhook-endpoints", TOKEN, {"url": "https://127.0.0.1:9/n10", "events": ["lead.created"], "secret": True}))["id"]
print("== same token after its rotation")
k = "n10-rot-" + uuid.uuid4().hex
r = call("PATCH", f"/api/v1/webhook-endpoints/{ep}", T, {"secret": True}, k)
s1 = d(r)["secret"]; seen_secrets.append(s1)
print(f"  user token T rotates the endpoint secret with key K: {r[0]}")
check("T replays K (same body)", call("PATCH", f"/api/v1/webhook-endpoints/{ep}", T, {"secret": True}, k), 200, None)
t2 = d(call("POST", f"/internal/v1/tokens/{t['id']}/rotate", ITOKEN))
T2 = t2["token"]; seen_secrets.append(T2)
check("T's replacement T' replays K (same body)", call("PATCH", f"/api/v1/webhook-endpoints/{ep}", T2, {"secret": True}, k), 422, s1)
check("the revoked T replays K", call("PATCH", f"/api/v1/webhook-endpoints/{ep}", T, {"secret": True}, k), 401, s1)
check("T' replays K with another body", call("PATCH", f"/api/v1/webhook-endpoints/{ep}", T2, {"secret": True, "expirePrevious": True}, k), 422, s1)
check("integration token replays K", call("PATCH", f"/api/v1/webhook-endpoints/{ep}", TOKEN, {"secret": True}, k), 422, s1)
print("== same token, another body under the same key")
k2 = "n10-body-" + uuid.uuid4().hex
r = call("PATCH", f"/api/v1/webhook-endpoints/{ep}", TOKEN, {"secret": True}, k2); s2 = d(r)["secret"]; seen_secrets.append(s2)
check("same token, K2, other body", call("PATCH", f"/api/v1/webhook-endpoints/{ep}", TOKEN, {"secret": True, "expirePrevious": False}, k2), 422, s2)
check("same token, K2, other path (query)", call("PATCH", f"/api/v1/webhook-endpoints/{ep}?x=1", TOKEN, {"secret": True}, k2), 422, s2)
check("same token, K2, same body: replay", call("PATCH", f"/api/v1/webhook-endpoints/{ep}", TOKEN, {"secret": True}, k2), 200, None)
print("== portal links and sessions")
k3 = "n10-portal-" + uuid.uuid4().hex
r = call("POST", "/api/v1/portal-sessions", TOKEN, None, k3)
code = d(r)["url"].split("#code=")[1]; seen_secrets.append(code)
print(f"  integration token mints a portal link with K3: {r[0]}")
check("T' replays K3", call("POST", "/api/v1/portal-sessions", T2, None, k3), 422, code)
check("integration token replays K3", call("POST", "/api/v1/portal-sessions", TOKEN, None, k3), 201, None)
ex = call("POST", "/portal/v1/sessions", None, {"code": code}, "n10-ex-" + uuid.uuid4().hex)
PT = d(ex)["token"]; seen_secrets.append(PT)
print(f"  exchange with an Idempotency-Key: {ex[0]}")
check("exchange again, same code (used), same key style", call("POST", "/portal/v1/sessions", None, {"code": code}), 400, PT)
k4 = "n10-pt-" + uuid.uuid4().hex
r = call("PATCH", f"/api/v1/webhook-endpoints/{ep}", PT, {"secret": True}, k4); s4 = d(r)["secret"]; seen_secrets.append(s4)
print(f"  portal session rotates the secret with K4: {r[0]}")
check("integration token replays the portal's K4", call("PATCH", f"/api/v1/webhook-endpoints/{ep}", TOKEN, {"secret": True}, k4), 422, s4)
check("T' replays the portal's K4", call("PATCH", f"/api/v1/webhook-endpoints/{ep}", T2, {"secret": True}, k4), 422, s4)
check("portal session replays its K4", call("PATCH", f"/api/v1/webhook-endpoints/{ep}", PT, {"secret": True}, k4), 200, None)
print("== operator token calls")
k5 = "n10-op-" + uuid.uuid4().hex
r = call("POST", f"/internal/v1/users/{u['id']}/tokens", ITOKEN, {}, k5); ot = d(r); seen_secrets.append(ot["token"])
print(f"  operator issues a token with K5: {r[0]}")
check("operator replays K5", call("POST", f"/internal/v1/users/{u['id']}/tokens", ITOKEN, {}, k5), 201, None)
check("a partner token sends K5 to /internal", call("POST", f"/internal/v1/users/{u['id']}/tokens", TOKEN, {}, k5), 401, ot["token"])
check("the issued token sends K5 to /internal", call("POST", f"/internal/v1/users/{u['id']}/tokens", ot["token"], {}, k5), 401, ot["token"])
k6 = "n10-oprot-" + uuid.uuid4().hex
r = call("POST", f"/internal/v1/tokens/{ot['id']}/rotate", ITOKEN, None, k6); rt = d(r); seen_secrets.append(rt["token"])
print(f"  operator rotates it with K6: {r[0]}")
check("operator replays K6", call("POST", f"/internal/v1/tokens/{ot['id']}/rotate", ITOKEN, None, k6), 201, None)
check("the rotated-in token uses the API", call("GET", "/api/v1/webhook-endpoints", rt["token"]), 200)
print("== header value sealed too")
k7 = "n10-hdr-" + uuid.uuid4().hex
body = {"url": "https://127.0.0.1:9/n10h", "events": ["lead.created"], "secret": True,
        "customHeader": {"name": "X-N10", "value": "n10-header-value-" + uuid.uuid4().hex[:8]}}
seen_secrets.append(body["customHeader"]["value"])
r = call("POST", "/api/v1/webhook-endpoints", TOKEN, body, k7)
if r[0] == 201:
    seen_secrets.append(d(r)["secret"])
print(f"  POST endpoint with a header value and K7: {r[0]} {r[2][:100] if r[0] != 201 else ''}")
check("T' replays K7", call("POST", "/api/v1/webhook-endpoints", T2, body, k7), 422, body["customHeader"]["value"])
print("== idempotency_keys, bytea search")
for s in seen_secrets:
    n = subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", DB, "-Atc",
                        f"select count(*) from idempotency_keys where position(convert_to('{s}','UTF8') in body) > 0"],
                       capture_output=True, text=True)
    print(f"  rows holding {s[:12]}… in clear: {n.stdout.strip() or n.stderr.strip()[:120]}")
print("  rows:", subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", DB, "-Atc",
      "select count(*), count(*) filter (where get_byte(body,0)=0) from idempotency_keys"], capture_output=True, text=True).stdout.strip(),
      "(all, starting with a NUL byte)")
