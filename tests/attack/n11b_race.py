#!/usr/bin/env python3
"""N11b under load: 16 threads read a payout by id with a user token, alternating two instances,
while the operator revokes the token. A failing token is forgotten, but a request of it already
in flight when the revocation lands may put it back (documented): how many failed requests still
ran their read? Each read of the payout fetches 1 `payouts` tuple, whether it answers 200 or not,
so tuples - 200s = failed requests that read. Env: BASE BASE2 TOKEN ITOKEN DB."""
import json, os, subprocess, threading, time, urllib.request, urllib.error
BASE, BASE2, TOKEN, ITOKEN, DB = (os.environ[k] for k in ("BASE", "BASE2", "TOKEN", "ITOKEN", "DB"))


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


def payouts():
    time.sleep(12)  # a backend flushes its table statistics up to ~10 s late
    return int(subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", DB, "-Atc",
        "select coalesce(seq_tup_read,0)+coalesce(idx_tup_fetch,0) from pg_stat_user_tables where relname='payouts'"],
        capture_output=True, text=True).stdout.strip())


time.sleep(float(os.environ.get("WARMUP", "15")))
pay = json.loads(call("GET", "/api/v1/payouts?limit=1", TOKEN)[1])["data"]
PATH = "/api/v1/payouts/" + (pay[0].get("recordId") or pay[0].get("id"))
for rnd in range(int(os.environ.get("ROUNDS", "2"))):
    u = json.loads(call("POST", "/internal/v1/users", ITOKEN, {"email": f"race{rnd}@n11b.test", "partnerId": "demo-clinic", "admin": False})[1])["data"]
    t = json.loads(call("POST", f"/internal/v1/users/{u['id']}/tokens", ITOKEN, {})[1])["data"]
    print(f"  round {rnd}: seen on both instances {call('GET', PATH, t['token'])[0]} {call('GET', PATH, t['token'], base=BASE2)[0]}", flush=True)
    b = payouts()
    stop, revoked, counts, lock = [False], [False], {}, threading.Lock()

    def hammer(i):
        while not stop[0]:
            st = call("GET", PATH, t["token"], base=(BASE2 if i % 2 else BASE))[0]
            with lock:
                counts[(st, revoked[0])] = counts.get((st, revoked[0]), 0) + 1

    th = [threading.Thread(target=hammer, args=(i,)) for i in range(16)]
    [x.start() for x in th]
    time.sleep(3)
    st = call("DELETE", f"/internal/v1/tokens/{t['id']}", ITOKEN)[0]
    revoked[0] = True
    time.sleep(6)
    stop[0] = True
    [x.join() for x in th]
    d = payouts() - b
    ok = sum(v for (s, _), v in counts.items() if s == 200)
    fail = sum(v for (s, _), v in counts.items() if s != 200)
    print(f"  round {rnd}: revoked ({st}) after 3 s, 6 s more; answers (status, sent after the revocation's answer): "
          f"{sorted(counts.items())}; payouts tuples {d} = {ok} x 200 + {d - ok} failed requests that still read (of {fail} failed)", flush=True)
