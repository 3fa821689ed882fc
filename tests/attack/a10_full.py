#!/usr/bin/env python3
"""attack10: a full cluster (max_connections taken by the caller's fillers), SIGSTOP of the whole
cluster FREEZE s, and (HOLD > 0) another client that takes every slot freed (psql sessions with
application_name a10grab, one started every 50 ms from before the freeze) until HOLD s after
SIGCONT, when they are ended (pg_terminate_backend). Measures: answers while the slots are held
(503 fast, not hanging?), time to 2xx after the release (or after SIGCONT when HOLD=0).
Env: BASE, TOKEN, ITOKEN, PGDATA, PG_PORT, DB, FREEZE, HOLD, LOOPS, TAG."""
import os, signal, subprocess, threading, time, sys
sys.argv = [sys.argv[0]]
os.environ.setdefault("RECV_LOG", "/dev/null")
os.environ["FREEZES"] = ""  # a10_freeze's own sequence is not run: we use its helpers only
import importlib.util
FREEZE = float(os.environ.get("FREEZE", "3")); HOLD = float(os.environ.get("HOLD", "5"))
PG_PORT = os.environ["PG_PORT"]; PGDATA = os.environ["PGDATA"]
# the helpers (call, loop, log) of a10_freeze.py without running its main part
src = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "a10_freeze.py")).read()
src = src.split("\nthreads = [threading.Thread")[0]
g = {"__name__": "a10f"}; exec(compile(src, "a10_freeze.py", "exec"), g)
log, log_lock, stop = g["log"], g["log_lock"], g["stop"]
fmt = g["fmt"]
def psql(q, db="postgres"):
    return subprocess.run(["psql", "-h", "127.0.0.1", "-p", PG_PORT, "-U", "postgres", "-d", db, "-Atc", q],
                          capture_output=True, text=True)
grab = threading.Event(); procs = []
def grabber():
    env = dict(os.environ, PGAPPNAME="a10grab")
    while grab.is_set():
        procs.append(subprocess.Popen(["psql", "-h", "127.0.0.1", "-p", PG_PORT, "-U", "postgres", "-d", "template1",
                                       "-qAtc", "select pg_sleep(100)"], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(0.05)
        for p in list(procs):
            if p.poll() is not None:
                procs.remove(p)
threads = [threading.Thread(target=g["loop"], args=(k,), daemon=True)
           for k in ("partner", "operator", "readyz") for _ in range(int(os.environ.get("LOOPS", "2")))]
[t.start() for t in threads]
time.sleep(2)
if HOLD > 0:
    grab.set(); gt = threading.Thread(target=grabber, daemon=True); gt.start()
    time.sleep(0.5)
pids = g["cluster"]()
for p in pids: os.kill(p, signal.SIGSTOP)
freeze = time.monotonic(); time.sleep(FREEZE)
for p in pids:
    try: os.kill(p, signal.SIGCONT)
    except ProcessLookupError: pass
resumed = time.monotonic()
if HOLD > 0:
    time.sleep(HOLD)
    # psql cannot connect to a full cluster: the grabber's backends (database template1) are found
    # among the postmaster's children and ended by SIGTERM (what pg_terminate_backend sends)
    pm = int(open(PGDATA + "/postmaster.pid").readline())
    kids = subprocess.run(["pgrep", "-P", str(pm)], capture_output=True, text=True).stdout.split()
    gpids = []
    for k in kids:
        try:
            if " template1 " in open(f"/proc/{k}/cmdline").read().replace("\0", " ") + " ":
                gpids.append(int(k))
        except OSError:
            pass
    held = len(gpids)
    grab.clear(); gt.join()
    t_rel0 = time.monotonic()
    for p in procs: p.kill()
    for k in gpids:
        try: os.kill(k, signal.SIGTERM)
        except ProcessLookupError: pass
    released = time.monotonic()
    print(f"-- grabber held {held} backends at the release; SIGTERMed them "
          f"({fmt(released - t_rel0)} ms to end them)")
else:
    released = resumed
time.sleep(4)
stop.set(); [t.join(timeout=20) for t in threads]
with log_lock: ev = list(log)
ok = lambda e: 200 <= e[3] < 300
inflight = [e for e in ev if e[1] < freeze < e[2]]
print(f"-- SIGSTOP {FREEZE}s: in flight {len(inflight)} "
      f"({sorted(set(e[3] for e in inflight))}), answered by {fmt(max([e[2] - freeze for e in inflight] or [None]) if inflight else None)} ms")
hold = [e for e in ev if resumed <= e[1] < released]
if HOLD > 0:
    st = {}
    for e in hold: st[(e[0], e[3], e[5])] = st.get((e[0], e[3], e[5]), 0) + 1
    lat = sorted(e[2] - e[1] for e in hold)
    print(f"-- while the other client held the slots ({HOLD}s after SIGCONT): {len(hold)} calls {sorted(st.items())}; "
          f"latency p50 {fmt(lat[len(lat)//2]) if lat else '-'} max {fmt(lat[-1]) if lat else '-'} ms")
    # the last second of the hold: the state it settled in
    tail = [e for e in hold if e[1] >= released - 1.0]
    print(f"   last second of the hold: {len(tail)} calls, {sum(ok(e) for e in tail)} 2xx, "
          f"{sum(1 for e in tail if e[3] == 503)} 503, max latency {fmt(max([e[2]-e[1] for e in tail] or [0]))} ms")
after = [e for e in ev if e[1] >= released]
nonok = [e for e in ev if e[2] >= released and not ok(e)]
firsts = {k: min([e[2] for e in after if e[0] == k and ok(e)] or [None]) if any(e[0] == k and ok(e) for e in after) else None
          for k in ("partner", "operator", "readyz")}
print(f"-- after {'the release' if HOLD > 0 else 'SIGCONT'}: {len(nonok)} non-2xx answered after it, last at "
      f"{fmt(max(e[2] for e in nonok) - released) if nonok else '-'} ms, last started at "
      f"{fmt(max(e[1] for e in nonok) - released) if nonok else '-'} ms; first 2xx: "
      + " ".join(f"{k}={fmt(None if v is None else v - released)}" for k, v in firsts.items())
      + f"; calls after it {len(after)}, 2xx {sum(ok(e) for e in after)}")
bad = [e for e in ev if e[3] == 0 or e[3] >= 500 and e[3] != 503 or (400 <= e[3] < 500)]
print(f"== 500/transport/4xx: {len(bad)} {set((e[0], e[3], e[5]) for e in bad)}")
emails = [e[6][1] for e in ev if e[0] == "operator" and e[3] == 201]
open(os.environ["EMAILS_OUT"], "w").write("\n".join(emails) + "\n")
