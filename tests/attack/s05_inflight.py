#!/usr/bin/env python3
"""S-05, in flight: deliveries queued before a rotation but sent after its answer. The receiver
answers slowly (RECV_MODE "200 1.5"), so the worker holds claimed deliveries while it waits for
the endpoint's slots (4 at a time). Every delivery that arrives after the rotation's answer should
verify with the returned secret; with expirePrevious, none should carry the old secret.
Env as s05.py plus RECV_MODE."""
import json, os, sys, time, uuid
sys.path.insert(0, os.path.dirname(__file__))
import s05  # noqa: E402
import subprocess


DB = os.environ.get("DB", "attack_s05i")
FROZEN = [None]  # when the latest freeze was applied (BLACKHOLE), for "+s after the freeze"


def since_freeze(t):
    return f" (+{t - FROZEN[0]:.2f}s after the freeze)" if FROZEN[0] else ""


def listener_sql(what):
    return subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", DB, "-Atc",
                           f"select {what} from pg_stat_activity where datname='{DB}' and query ilike 'listen%'"],
                          capture_output=True, text=True).stdout.split()


def kill_listener():
    """KILL_LISTENER=1: end the worker's LISTEN connection just before the change is made, so
    its NOTIFY is lost; the worker must treat what it claimed before the reconnect as stale.
    KILL_TWICE=1: end it, wait KILL_GAP s (it reconnects meanwhile), end it again.
    BLACKHOLE=FILE: instead silently blackhole it through pgproxy.py (no FIN/RST: the worker is
    not told), its client port written to FILE; a fresh LISTEN connection is blackholed each time.
    BLACKHOLE_WAY=up|down: freeze one direction only; BLACKHOLE_LEAD: seconds between the freeze
    and the PATCH (default 0.2). BEFORE_PATCH=CMD: run CMD (shell) instead, then wait the lead.
    JITTER=S: first sleep a random 0-S s (a random phase against the receiver's cadence)."""
    if os.environ.get("JITTER"):  # a random phase against the receiver's 1.5 s cadence
        import random
        time.sleep(random.uniform(0, float(os.environ["JITTER"])))
    if os.environ.get("BEFORE_PATCH"):  # n9d_link.sh: a shell command (the relay's control)
        subprocess.run(os.environ["BEFORE_PATCH"], shell=True)
        FROZEN[0] = time.time()
        time.sleep(float(os.environ.get("BLACKHOLE_LEAD", "0.2")))
        return
    if os.environ.get("BLACKHOLE"):
        ports = listener_sql("client_port")
        with open(os.environ["BLACKHOLE"], "a") as f:
            way = os.environ.get("BLACKHOLE_WAY", "")
            f.write(" ".join(p + (":" + way if way else "") for p in ports) + "\n")
        frozen_at = time.time()
        FROZEN[0] = frozen_at
        time.sleep(float(os.environ.get("BLACKHOLE_LEAD", "0.2")))
        print(f"    (blackholed LISTEN connection(s) on client port(s) {ports} at {time.strftime('%H:%M:%S', time.gmtime(frozen_at))}.{int(frozen_at * 1000) % 1000:03d} UTC)")
        return
    if os.environ.get("KILL_LISTENER"):
        out = listener_sql("pg_terminate_backend(pid)")
        print(f"    (terminated {len(out)} LISTEN connection(s))")
        if os.environ.get("KILL_TWICE"):
            time.sleep(float(os.environ.get("KILL_GAP", "0.6")))
            out = listener_sql("pg_terminate_backend(pid)")
            print(f"    (terminated {len(out)} LISTEN connection(s) again)")


RECV_MODE = os.environ["RECV_MODE"]


def run(expire):
    st, j = s05.api("POST", "/api/v1/webhook-endpoints",
                    {"url": f"https://127.0.0.1:{s05.RECV_PORT}/inflight-{expire}", "events": ["lead.created"], "secret": True})
    ep = j["data"]["id"]
    s0 = j["data"]["secret"]
    open(RECV_MODE, "w").write("200 1.5")
    ids = [s05.ingest(f"if{expire}-{i}-{uuid.uuid4().hex[:6]}") for i in range(16)]
    time.sleep(1.0)
    body = {"secret": True, "expirePrevious": True} if expire else {"secret": True}
    kill_listener()
    st, j = s05.api("PATCH", f"/api/v1/webhook-endpoints/{ep}", body)
    answered = time.time()
    if FROZEN[0]:
        print(f"    (PATCH answered +{answered - FROZEN[0]:.2f}s after the freeze)")
    s1 = j["data"]["secret"]
    time.sleep(9)
    open(RECV_MODE, "w").write("200")
    after = without_new = with_old = 0
    with open(s05.RECV_LOG) as f:
        for line in f:
            rec = json.loads(line)
            if f"/inflight-{expire}" not in rec["path"] or rec["t"] < answered + float(os.environ.get("SLACK", "0.05")):
                continue
            after += 1
            if not s05.signs(rec, s1)[0]:
                without_new += 1
                print(f"    +{rec['t'] - answered:.2f}s after the answer{since_freeze(rec['t'])}: not signed with the returned secret ({s05.signs(rec, s0)[1]} for the old)")
            if s05.signs(rec, s0)[0]:
                with_old += 1
                if expire:
                    print(f"    +{rec['t'] - answered:.2f}s after the answer{since_freeze(rec['t'])}: signed with the erased secret")
    print(f"expirePrevious={expire}: {after} deliveries arrived after the rotation was answered; "
          f"{without_new} not signed with the returned secret; {with_old} signed with the old secret")
    s05.api("DELETE", f"/api/v1/webhook-endpoints/{ep}")


for e in (False, True):
    run(e)


def after_change(kind):
    """Deliveries arriving after a PATCH that moved the URL or disabled the endpoint."""
    st, j = s05.api("POST", "/api/v1/webhook-endpoints",
                    {"url": f"https://127.0.0.1:{s05.RECV_PORT}/old-{kind}", "events": ["lead.created"], "secret": True})
    ep = j["data"]["id"]
    open(RECV_MODE, "w").write("200 1.5")
    for i in range(16):
        s05.ingest(f"ch{kind}-{i}-{uuid.uuid4().hex[:6]}")
    time.sleep(1.0)
    body = {"url": f"https://127.0.0.1:{s05.RECV_PORT}/new-{kind}"} if kind == "url" else {"enabled": False}
    kill_listener()
    st, j = s05.api("PATCH", f"/api/v1/webhook-endpoints/{ep}", body)
    answered = time.time()
    if FROZEN[0]:
        print(f"    (PATCH answered +{answered - FROZEN[0]:.2f}s after the freeze)")
    time.sleep(9)
    open(RECV_MODE, "w").write("200")
    late = []
    with open(s05.RECV_LOG) as f:
        for line in f:
            rec = json.loads(line)
            if f"/old-{kind}" in rec["path"] and rec["t"] >= answered + float(os.environ.get("SLACK", "0.05")):
                late.append(round(rec["t"] - answered, 2))
                print(f"    +{rec['t'] - answered:.2f}s after the answer{since_freeze(rec['t'])}: to the old URL / disabled endpoint")
    print(f"PATCH {body} answered {st}: {len(late)} deliveries still reached the old URL / the disabled endpoint afterwards, at +{late}s")
    s05.api("DELETE", f"/api/v1/webhook-endpoints/{ep}")


for k in ("url", "disable"):
    after_change(k)
