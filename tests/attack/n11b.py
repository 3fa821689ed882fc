#!/usr/bin/env python3
"""N11b re-try: a token this process has seen stops authenticating (revoked, rotated, expired, its
user deleted, its partner deactivated; a portal session whose minting token was rotated). Its
first request per instance may still run its (refunded) read; every later one must take the token
check alone and read no partner data. Two instances on one database (BASE, BASE2), tuple counters
of every table, 12 s settle per measure. Env: BASE BASE2 TOKEN ITOKEN DB N."""
import json, os, subprocess, threading, time, urllib.request, urllib.error
BASE, BASE2, TOKEN, ITOKEN, DB = (os.environ[k] for k in ("BASE", "BASE2", "TOKEN", "ITOKEN", "DB"))
N = int(os.environ.get("N", "20"))
NOISE = {"webhook_deliveries", "webhook_endpoints", "events", "api_tokens", "portal_users", "partners",
         "idempotency_keys", "outbox", "schema_migrations", "__diesel_schema_migrations", "domain_events_bg"}


def call(method, path, token=None, body=None, base=None):
    h = {"content-type": "application/json"}
    if token:
        h["Authorization"] = "Bearer " + token
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request((base or BASE) + path, data=data, headers=h, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def snap():
    out = subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", DB, "-Atc",
        "select relname, coalesce(seq_tup_read,0)+coalesce(idx_tup_fetch,0) from pg_stat_user_tables"],
        capture_output=True, text=True).stdout.split()
    return {l.split("|")[0]: int(l.split("|")[1]) for l in out}


last = None


def settle():
    global last
    time.sleep(12)  # a backend flushes its table statistics up to ~10 s late
    last = snap()


def delta():
    before = last
    settle()
    return {k: v - before.get(k, 0) for k, v in last.items() if v != before.get(k, 0)}


def show(label, sts, d):
    data = {k: v for k, v in d.items() if k not in NOISE}
    noise = {k: v for k, v in d.items() if k in NOISE}
    print(f"  {label}: {len(sts)} GETs -> {', '.join(f'{s}x{sts.count(s)}' for s in sorted(set(sts)))}; "
          f"partner-data tuples {data or 0} (token/other tables {noise})", flush=True)
    return data


def burst(label, tok, paths, n=N):
    sts = [call("GET", p, tok, base=(BASE2 if i % 2 else BASE))[0] for i in range(n) for p in paths]
    return show(label, sts, delta())


def first(label, tok, path):
    """One request on each instance: the request that may still run its read (once per instance)."""
    sts = [call("GET", path, tok, base=b)[0] for b in (BASE, BASE2)]
    return show(label + f" (first request per instance, {path})", sts, delta())


time.sleep(float(os.environ.get("WARMUP", "15")))
settle()
print(f"  idle ~12 s: {delta() or 0}", flush=True)
lead = json.loads(call("GET", "/api/v1/leads?includeTest=true&limit=1", TOKEN)[1])["data"][0]["id"]
order = json.loads(call("GET", "/api/v1/orders?limit=1", TOKEN)[1])["data"]
order = (order[0].get("orderId") or order[0].get("id")) if order else "x"
pay = json.loads(call("GET", "/api/v1/payouts?limit=1", TOKEN)[1])["data"]
pay = (pay[0].get("recordId") or pay[0].get("id")) if pay else "x"
ev = json.loads(call("GET", "/api/v1/events?limit=1", TOKEN)[1])["data"]
ev = ev[0]["id"] if ev else "x"
sub = json.loads(call("GET", "/api/v1/sub-accounts", TOKEN)[1])["data"]
sub = sub[0]["id"] if sub else "x"
cp = json.loads(call("GET", "/api/v1/care-services-coupons", TOKEN)[1]).get("data") or []
cp = cp[0]["code"] if cp else "x"
READS = ["/api/v1/leads?includeTest=true&limit=200", f"/api/v1/leads/{lead}", "/api/v1/orders?limit=200",
         f"/api/v1/orders/{order}", "/api/v1/payouts?limit=200", f"/api/v1/payouts/{pay}",
         "/api/v1/events?limit=200", f"/api/v1/events/{ev}", "/api/v1/sub-accounts", f"/api/v1/sub-accounts/{sub}",
         "/api/v1/care-services-coupons?format=csv", "/api/v1/care-services-coupons", f"/api/v1/care-services-coupons/{cp}",
         "/api/v1/dna-links", "/api/v1/medical-intake-links", "/api/v1/care-service-links", "/api/v1/embed"]
GROUP = ["/api/v1/webhook-deliveries?limit=200", "/api/v1/webhook-endpoints"]
FIRST = f"/api/v1/payouts/{pay}"   # a failing token's read of it fetches 1 payouts tuple by primary key
print(f"  ids: lead {lead} order {order} payout {pay} event {ev} sub {sub} coupon {cp}", flush=True)


def user(tag, **tok):
    u = json.loads(call("POST", "/internal/v1/users", ITOKEN, {"email": f"{tag}@n11b.test", "partnerId": "demo-clinic", "admin": False})[1])["data"]
    t = json.loads(call("POST", f"/internal/v1/users/{u['id']}/tokens", ITOKEN, tok)[1])["data"]
    return u, t


def see(tok, paths=READS):
    """Every path once on each instance, so both processes have seen the token (and read with it)."""
    sts = [call("GET", p, tok, base=b)[0] for b in (BASE, BASE2) for p in paths]
    return sorted(set(sts))


# control: a well-formed token never issued (the token check alone, per request)
fake = TOKEN[:-6] + ("aaaaaa" if not TOKEN.endswith("aaaaaa") else "bbbbbb")
settle()
burst("control: unknown token (never valid), 17 paths", fake, READS)

scen = {}
# A. revoked (DELETE /internal/v1/tokens/{id})
ua, ta = user("rev")
ub, tb = user("rot")
EXP = time.time() + 60
uc, tc = user("exp", expiresAt=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(EXP)))
ud, td = user("del")
print(f"  seen on 17 paths x 2 instances: revoked-to-be {see(ta['token'])}, rotated-to-be {see(tb['token'])}, "
      f"expiring {see(tc['token'])}, user-deleted-to-be {see(td['token'])}", flush=True)
sa = call("DELETE", "/internal/v1/tokens/" + ta["id"], ITOKEN)[0]
sb = call("POST", "/internal/v1/tokens/" + tb["id"] + "/rotate", ITOKEN)[0]
sd = call("DELETE", "/internal/v1/users/" + ud["id"], ITOKEN)[0]
print(f"  DELETE token A: {sa}; rotate B: {sb}; DELETE user D: {sd}", flush=True)
settle()
for label, tok in (("revoked token A", ta["token"]), ("rotated-away token B", tb["token"]), ("token D of a deleted user", td["token"])):
    first(label, tok, FIRST)
    scen[label] = burst(f"{label}, 17 paths x {N}, alternating instances", tok, READS)
# C. expired while seen
while time.time() < EXP + 1:
    time.sleep(1)
settle()
first("expired token C", tc["token"], FIRST)
scen["expired token C"] = burst(f"expired token C, 17 paths x {N}", tc["token"], READS)

# E. the partner deactivated while its tokens are seen: a user token, a portal session, the integration token
ue, te = user("deact")
code = json.loads(call("POST", "/api/v1/portal-sessions", TOKEN)[1])["data"]["url"].split("#code=")[1]
PT = json.loads(call("POST", "/portal/v1/sessions", None, {"code": code})[1])["data"]["token"]
se, sp, si = see(te["token"]), see(PT, GROUP), see(TOKEN)
print(f"  seen: user token E {se}, portal session {sp}, integration token {si}", flush=True)
pbody = json.loads(call("GET", "/internal/v1/partners/demo-clinic", ITOKEN)[1])["data"]
for k in ("partnerId", "createdAt", "updatedAt"):
    pbody.pop(k, None)
pbody["active"] = False
print(f"  partner deactivated: {call('PUT', '/internal/v1/partners/demo-clinic', ITOKEN, pbody)[0]}", flush=True)
settle()
first("user token E, partner inactive", te["token"], FIRST)
scen["partner inactive: user token E"] = burst(f"user token E (partner inactive), 17 paths x {N}", te["token"], READS)
scen["partner inactive: integration token"] = burst(f"integration token (partner inactive), 17 paths x {N}", TOKEN, READS)
scen["partner inactive: portal session"] = burst(f"portal session (partner inactive), its group x {N}", PT, GROUP)
pbody["active"] = True
sr = call("PUT", "/internal/v1/partners/demo-clinic", ITOKEN, pbody)[0]
se, si, sp = see(te["token"], [FIRST]), see(TOKEN, [FIRST]), see(PT, GROUP[1:])
print(f"  partner active again: {sr}; user token E {se}, integration {si}, portal {sp} (expect 200: a forgotten token works again)", flush=True)

# F. a portal session minted by a user token that is then rotated away
uf, tf = user("mint")
code = json.loads(call("POST", "/api/v1/portal-sessions", tf["token"])[1])["data"]["url"].split("#code=")[1]
PF = json.loads(call("POST", "/portal/v1/sessions", None, {"code": code})[1])["data"]["token"]
seenf = see(PF, GROUP)
sf = call("POST", "/internal/v1/tokens/" + tf["id"] + "/rotate", ITOKEN)[0]
print(f"  portal session minted by user token F, seen: {seenf}; rotate F: {sf}", flush=True)
settle()
scen["portal session of a rotated minter"] = burst(f"portal session of rotated token F, its group x {N}", PF, GROUP)

# G (revoked under load): n11b_race.py
print("SUMMARY " + json.dumps({k: sum(v.values()) if v else 0 for k, v in scen.items()}))
