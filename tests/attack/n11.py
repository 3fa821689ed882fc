#!/usr/bin/env python3
"""N11 re-try: does any 403/401/429 of a partner read read partner data (tuple counters of every
partner table), and can the budget be bypassed? Env: BASE BASE2 TOKEN ITOKEN DB N."""
import json, os, subprocess, time, urllib.request, urllib.error
BASE, BASE2, TOKEN, ITOKEN, DB = (os.environ[k] for k in ("BASE", "BASE2", "TOKEN", "ITOKEN", "DB"))
N = int(os.environ.get("N", "20"))
NOISE = {"webhook_deliveries", "webhook_endpoints", "events", "api_tokens", "portal_users", "partners",
         "idempotency_keys", "outbox", "schema_migrations", "__diesel_schema_migrations"}


def call(method, path, token=None, body=None, base=None, accept=None):
    h = {"content-type": "application/json"}
    if token:
        h["Authorization"] = "Bearer " + token
    if accept:
        h["Accept"] = accept
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request((base or BASE) + path, data=data, headers=h, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


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
    global last
    before = last
    settle()
    return {k: v - before.get(k, 0) for k, v in last.items() if v != before.get(k, 0)}


def burst(label, tok, paths, base_alt=False, accept=None):
    sts = []
    rl = 0
    for i in range(N):
        for p in paths:
            st, _, h = call("GET", p, tok, base=(BASE2 if base_alt and i % 2 else BASE), accept=accept)
            sts.append(st)
            rl += any(k.lower() == "x-ratelimit-remaining" for k in h)
    d = delta()
    data = {k: v for k, v in d.items() if k not in NOISE}
    noise = {k: v for k, v in d.items() if k in NOISE}
    print(f"  {label}: {len(sts)} GETs -> {', '.join(f'{s}x{sts.count(s)}' for s in sorted(set(sts)))}; "
          f"with X-RateLimit: {rl}; partner-data tuples {data or 0} (token/other tables {noise})")
    return sts, data


time.sleep(float(os.environ.get("WARMUP", "30")))
settle()
idle = delta(); print(f"  idle ~12 s: {idle or 0}")
# ids for by-id reads (the integration token; one unit of each group)
lead = json.loads(call("GET", "/api/v1/leads?includeTest=true&limit=1", TOKEN)[1])["data"][0]["id"]
order = json.loads(call("GET", "/api/v1/orders?limit=1", TOKEN)[1])["data"]
order = order[0].get("orderId") or order[0].get("id") if order else "x"
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
print(f"  ids: lead {lead} order {order} payout {pay} event {ev} sub {sub} coupon {cp}")
settle()


def portal():
    code = json.loads(call("POST", "/api/v1/portal-sessions", TOKEN)[1])["data"]["url"].split("#code=")[1]
    return json.loads(call("POST", "/portal/v1/sessions", None, {"code": code})[1])["data"]["token"]


# 1. a portal session never seen by the process: its first request is a leads read
PT = portal()
burst("unseen portal session, first requests on every partner read (17 paths)", PT, READS)
# 2. seen (it has now been seen): every path again, and alternating instances
burst("seen portal session, 17 paths", PT, READS)
burst("seen portal session, 17 paths alternating two instances (Redis)", PT, READS, base_alt=True)
burst("seen portal session, coupons CSV (Accept: text/csv)", PT, ["/api/v1/care-services-coupons"], accept="text/csv")
# 3. the portal session on its own group (deliveries log, endpoints): budget 3 / 60 s
burst("portal session on webhook-deliveries + endpoints (allowed; budget 3/60 s)", PT,
      ["/api/v1/webhook-deliveries?limit=200", "/api/v1/webhook-endpoints", "/api/v1/webhook-deliveries/by-hour"])
# 4. a DNA-link requirement: a user token, seen with DNA access, then the partner loses it
u = json.loads(call("POST", "/internal/v1/users", ITOKEN, {"email": "n11@demo.test", "partnerId": "demo-clinic", "admin": False})[1])["data"]
t = json.loads(call("POST", f"/internal/v1/users/{u['id']}/tokens", ITOKEN, {})[1])["data"]
UT = t["token"]
print(f"  user token, DNA links with DNA access: {call('GET', '/api/v1/dna-links', UT)[0]}, second instance {call('GET', '/api/v1/dna-links', UT, base=BASE2)[0]}")
settle()
pbody = json.loads(call("GET", "/internal/v1/partners/demo-clinic", ITOKEN)[1])["data"]
for k in ("partnerId", "createdAt", "updatedAt"):
    pbody.pop(k, None)
pbody["dnaAccess"] = False
print(f"  partner loses DNA access: {call('PUT', '/internal/v1/partners/demo-clinic', ITOKEN, pbody)[0]}")
burst("user token seen WITH DNA access, now without: DNA links (1 read per instance allowed by the design)", UT, ["/api/v1/dna-links"], base_alt=True)
burst("same token, now known without DNA: DNA links", UT, ["/api/v1/dna-links"], base_alt=True)
pbody["dnaAccess"] = True
print(f"  DNA access given back: {call('PUT', '/internal/v1/partners/demo-clinic', ITOKEN, pbody)[0]}; "
      f"DNA links {call('GET', '/api/v1/dna-links', UT)[0]} {call('GET', '/api/v1/dna-links', UT, base=BASE2)[0]}")
settle()
# 5. budget: the user token on leads (budget 3/60 s; instances share Redis)
burst("user token on leads, both instances (budget 3/60 s: expect 3 x 200)", UT, ["/api/v1/leads?includeTest=true&limit=200"], base_alt=True)
# 6. the partner deactivated while the tokens are cached
pbody["active"] = False
print(f"  partner deactivated: {call('PUT', '/internal/v1/partners/demo-clinic', ITOKEN, pbody)[0]}")
burst("user token (cached, partner now inactive), 17 paths", UT, READS, base_alt=True)
burst("portal session (cached, partner inactive) on its own group", PT, ["/api/v1/webhook-deliveries?limit=200", "/api/v1/webhook-endpoints"], base_alt=True)
pbody["active"] = True
print(f"  partner active again: {call('PUT', '/internal/v1/partners/demo-clinic', ITOKEN, pbody)[0]}")
# 7. the token revoked (rotated) while cached; the portal session whose minting token is rotated
PT2 = portal()
print(f"  new portal session PT2 on webhook-endpoints: {call('GET', '/api/v1/webhook-endpoints', PT2)[0]}")
settle()
r = json.loads(call("POST", f"/internal/v1/tokens/{t['id']}/rotate", ITOKEN)[1])["data"]
print(f"  user token rotated (old text revoked); new token on dna-links {call('GET', '/api/v1/dna-links', r['token'])[0]}")
settle()
burst("revoked user token (cached), 17 paths", UT, READS, base_alt=True)
# the demo's integration token minted PT/PT2: rotate it (its portal sessions end)
toks = json.loads(call("GET", f"/internal/v1/users/{u['id']}/tokens", ITOKEN)[1])["data"]
print(f"  user's tokens: {[(x['tokenPrefix'], bool(x['revokedAt'])) for x in toks]}")
