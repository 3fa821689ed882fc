#!/usr/bin/env python3
"""N8 variation: a request the budget admits is charged, reads, and gets its unit back when the
read's token check or the portal scope then refuses it. Does a refused-after-read request read
partner data, and without any budget? Env: BASE TOKEN ITOKEN DB N; READ_PATH and TABLE (default the leads page and `leads`)."""
import json, os, subprocess, time, urllib.request, urllib.error
BASE, TOKEN, ITOKEN, DB = os.environ["BASE"], os.environ["TOKEN"], os.environ["ITOKEN"], os.environ["DB"]
N = int(os.environ.get("N", "30"))
PATH = os.environ.get("READ_PATH") or "/api/v1/leads?includeTest=true&limit=200"
TABLE = os.environ.get("TABLE", "leads")


def call(method, path, token=None, body=None):
    h = {"content-type": "application/json"}
    if token:
        h["Authorization"] = "Bearer " + token
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(BASE + path, data=data, headers=h, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def tuples():
    time.sleep(12)  # a backend flushes its table statistics up to ~10 s late
    return int(subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", DB, "-Atc",
        "select coalesce(seq_tup_read,0)+coalesce(idx_tup_fetch,0) from pg_stat_user_tables where relname='" + TABLE + "'"],
        capture_output=True, text=True).stdout.strip())


def burst(label, tok):
    b = tuples()
    st = [call("GET", PATH, tok)[0] for _ in range(N)]
    a = tuples()
    print(f"  {label}: {N} GETs -> {sorted(set(st))} ({', '.join(f'{s}x{st.count(s)}' for s in sorted(set(st)))}); {TABLE} tuples read {a - b}")


time.sleep(float(os.environ.get("WARMUP", "35")))
b = tuples(); time.sleep(3); print(f"  idle: leads tuples {tuples() - b} over ~4.5 s")
code = json.loads(call("POST", "/api/v1/portal-sessions", TOKEN)[1])["data"]["url"].split("#code=")[1]
PT = json.loads(call("POST", "/portal/v1/sessions", None, {"code": code})[1])["data"]["token"]
call("GET", "/api/v1/webhook-endpoints", PT)  # the process has now seen the portal token
burst("portal session token on leads (403 expected, no partner data)", PT)
while call("GET", PATH, TOKEN)[0] != 429:
    pass
burst("integration token over budget (control: 429, no partner data)", TOKEN)
u = json.loads(call("POST", "/internal/v1/users", ITOKEN, {"email": "n8r@demo.test", "partnerId": "demo-clinic", "admin": False})[1])["data"]
t = json.loads(call("POST", f"/internal/v1/users/{u['id']}/tokens", ITOKEN, {})[1])["data"]
print(f"  user token first GET: {call('GET', PATH, t['token'])[0]}")
print(f"  rotate it (old text revoked): {call('POST', '/internal/v1/tokens/' + t['id'] + '/rotate', ITOKEN)[0]}")
burst("revoked token on leads (401 expected)", t["token"])
print(f"  (one admitted page reads ~{int(os.environ.get('PAGE', '335'))} leads tuples)")
