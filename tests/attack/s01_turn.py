#!/usr/bin/env python3
"""S-01 at the window's turn: the peek (`spent`) happens before the read and the charge after
it, so a concurrent burst released when a window opens passes the peek together. How many of
its 429s read partner data? Env: BASE TOKEN DB WINDOW (seconds of PARTNER_RATE_LIMIT) N; BASE2: a
second instance (same database, same Redis) that gets every other request of the burst; KEYED=1:
the burst is POSTs replaying one Idempotency-Key (a kept sub-account creation) instead of GETs."""
import os, time, threading, urllib.request, urllib.error, subprocess
BASE, TOKEN, DB = os.environ["BASE"], os.environ["TOKEN"], os.environ["DB"]
WINDOW, N = int(os.environ.get("WINDOW", "20")), int(os.environ.get("N", "100"))
PATH = "/api/v1/leads?includeTest=true&limit=200"
TABLE = os.environ.get("TABLE", "idempotency_keys" if os.environ.get("KEYED") else "leads")

def leads_tuples():
    time.sleep(12)
    return int(subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", DB, "-Atc",
        "select coalesce(seq_tup_read,0)+coalesce(idx_tup_fetch,0) from pg_stat_user_tables where relname='" + TABLE + "'"],
        capture_output=True, text=True).stdout.strip())

BASE2 = os.environ.get("BASE2")
KEYED = os.environ.get("KEYED")


def get(i=0):
    base = BASE2 if BASE2 and i % 2 else BASE
    if KEYED:
        req = urllib.request.Request(base + "/api/v1/sub-accounts", method="POST",
                                     data=b'{"subId":"n8k","nickname":"N8 keyed"}',
                                     headers={"Authorization": "Bearer " + TOKEN, "content-type": "application/json",
                                              "Idempotency-Key": KEYED})
    else:
        req = urllib.request.Request(base + PATH, headers={"Authorization": "Bearer " + TOKEN})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            r.read(); return r.status
    except urllib.error.HTTPError as e:
        return e.code

time.sleep(float(os.environ.get("WARMUP", "40")))  # the demo start-up reads for ~30 s
get()  # the instance has now seen the token
if BASE2:
    get(1)
for trial in range(int(os.environ.get("TRIALS", "4"))):
    # spend the budget, then wait for the next window and release N together
    while get() != 429:
        pass
    if BASE2:
        while get(1) != 429:
            pass
    before = leads_tuples()
    wait = WINDOW - (time.time() % WINDOW) + 0.05
    if wait < 1: wait += WINDOW
    barrier, res = threading.Barrier(N), []
    def w(i):
        barrier.wait(); res.append(get(i))
    ts = [threading.Thread(target=w, args=(i,)) for i in range(N)]
    time.sleep(wait - 0.02)
    [t.start() for t in ts]; [t.join() for t in ts]
    after = leads_tuples()
    ok, lim = res.count(200), res.count(429)
    one = 320  # leads of the demo partner, read by one admitted page (includeTest, limit 200) ~ 200-320
    print(f"  trial {trial + 1}: {N} GETs released at the window's turn: {ok} x 200, {lim} x 429; "
          f"{TABLE} tuples read {after - before} (~{(after - before) / max(1, ok + lim):.0f} per request; "
          f"an admitted page reads ~{one})")
