#!/usr/bin/env python3
"""Rights changed while cached, under load: THREADS threads call /dna-links with a user token
while DNA access is withdrawn (ROUNDS times, given back in between). Counts, per round, the
200s of requests SENT after the withdrawal was answered (must be 0), the reads (catalog tuples)
of the 403s, and every status. Env: BASE ITOKEN DB THREADS ROUNDS."""
import json, os, subprocess, threading, time, urllib.request, urllib.error
BASE, ITOKEN, DB = os.environ["BASE"], os.environ["ITOKEN"], os.environ["DB"]
THREADS, ROUNDS = int(os.environ.get("THREADS", "16")), int(os.environ.get("ROUNDS", "3"))


def call(method, path, token, body=None):
    h = {"content-type": "application/json", "Authorization": "Bearer " + token}
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(BASE + path, data=data, headers=h, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def tuples():
    return int(subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", DB, "-Atc",
        "select sum(coalesce(seq_tup_read,0)+coalesce(idx_tup_fetch,0)) from pg_stat_user_tables where relname in ('catalog_products','partner_prices')"],
        capture_output=True, text=True).stdout.strip() or 0)


time.sleep(float(os.environ.get("WARMUP", "25")))
u = json.loads(call("POST", "/internal/v1/users", ITOKEN, {"email": "n11r@demo.test", "partnerId": "demo-clinic", "admin": False})[1])["data"]
UT = json.loads(call("POST", f"/internal/v1/users/{u['id']}/tokens", ITOKEN, {})[1])["data"]["token"]
p = json.loads(call("GET", "/internal/v1/partners/demo-clinic", ITOKEN)[1])["data"]
for k in ("partnerId", "createdAt", "updatedAt"):
    p.pop(k, None)
for rnd in range(ROUNDS):
    p["dnaAccess"] = True
    call("PUT", "/internal/v1/partners/demo-clinic", ITOKEN, p)
    print(f"  round {rnd}: DNA on, token: {call('GET', '/api/v1/dna-links', UT)[0]}")
    log, stop = [], threading.Event()

    def hammer():
        while not stop.is_set():
            t0 = time.time(); st = call("GET", "/api/v1/dna-links", UT)[0]; log.append((t0, time.time(), st))
    ths = [threading.Thread(target=hammer) for _ in range(THREADS)]
    [t.start() for t in ths]
    time.sleep(1.0)
    p["dnaAccess"] = False
    call("PUT", "/internal/v1/partners/demo-clinic", ITOKEN, p)
    answered = time.time()
    time.sleep(1.0)
    stop.set(); [t.join() for t in ths]
    time.sleep(12); before = tuples()
    after_sent = [s for (t0, t1, s) in log if t0 > answered]
    ok_late = sum(1 for s in after_sent if s == 200)
    straddling = [s for (t0, t1, s) in log if t0 <= answered < t1]
    # the 403s' reads: hammer again, only 403s expected now
    log2 = [call("GET", "/api/v1/dna-links", UT)[0] for _ in range(50)]
    time.sleep(12); extra = tuples() - before
    print(f"  round {rnd}: {len(log)} requests; sent after the withdrawal answered: {len(after_sent)} "
          f"({ok_late} x 200 <- must be 0); in flight at the answer: {len(straddling)} ({straddling.count(200)} x 200); "
          f"then 50 more: {sorted(set(log2))}, catalog+prices tuples read by them {extra}")
