#!/usr/bin/env python3
"""attack10 (a9_freeze.py + RETRY_NOW=1: keyed writes not answered 201 during a freeze are retried
from SIGCONT every 0.2 s with their key; time of the last 409 after SIGCONT, replay checks).
attack9: extensions §11 against a SIGSTOPped PostgreSQL, under continuous traffic.

Loops (LOOPS threads per kind) call partner GET /api/v1/leads, operator POST /internal/v1/leads
(unique emails), catalog GET /api/all-products and /readyz without pause, logging every answer.
For each freeze length in FREEZES (seconds, or "restart" for `pg_ctl restart -m fast`):
SIGSTOP of the postmaster and every child, wait, SIGCONT; then measure:
  - calls in flight at the freeze: time from the freeze to their answer (max), their statuses;
  - calls started during the freeze: latency (max), statuses;
  - any 500 / non-503 error / transport error / missing Retry-After on a 503;
  - after SIGCONT: time until the last non-2xx answer ended and the first 2xx per kind;
  - a lead ingested 0.2 s after SIGCONT (+ after all-2xx): time until the receiver got lead.created;
At the end: every lead answered 201 is in the database (psql), nothing lost.
Env: BASE, TOKEN, ITOKEN, PGDATA, PG_PORT, DB, RECV_LOG, FREEZES, LOOPS, TAG."""
import json, os, signal, subprocess, sys, threading, time, urllib.request, urllib.error, uuid

BASE, TOKEN, ITOKEN = os.environ["BASE"], os.environ["TOKEN"], os.environ["ITOKEN"]
PGDATA, PG_PORT, DB = os.environ["PGDATA"], os.environ["PG_PORT"], os.environ["DB"]
RECV_LOG = os.environ["RECV_LOG"]
FREEZES = os.environ.get("FREEZES", "3").split()
LOOPS = int(os.environ.get("LOOPS", "2"))
TAG = os.environ.get("TAG", "a9") + "-" + uuid.uuid4().hex[:6]
PG_BIN = os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin")

log = []          # (kind, t0, t1, status, retry_after, code, lead_id)
log_lock = threading.Lock()
stop = threading.Event()
seq = [0]
marker_emails = []


IDEM = os.environ.get("IDEM") == "1"
TL = threading.local()


def call(method, path, token=None, body=None, timeout=15, key=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(BASE + path, data=data, method=method)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    if data is not None:
        req.add_header("content-type", "application/json")
    if key:
        req.add_header("Idempotency-Key", key)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read()
            TL.replayed = r.headers.get("Idempotent-Replayed")
            return r.status, r.headers.get("Retry-After"), None, raw
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            code = json.loads(raw)["error"]["code"]
        except Exception:
            code = raw[:40].decode("utf-8", "replace") or None
        return e.code, e.headers.get("Retry-After"), code, raw
    except Exception as e:
        return 0, None, type(e).__name__, b""


def lead_body(email, origin="headless_intake"):
    return {"partnerId": "demo-clinic", "firstName": "Ann", "lastName": "Lee", "email": email,
            "emailConsent": True, "phone": "+1 555 0100", "smsConsent": True,
            "origin": origin, "location": "Austin, TX"}


def one(kind, origin="headless_intake"):
    if kind == "partner":
        return call("GET", "/api/v1/leads?limit=5", TOKEN) + (None,)
    if kind == "catalog":
        return call("GET", "/api/all-products?partner_id=demo-clinic") + (None,)
    if kind == "readyz":
        return call("GET", "/readyz") + (None,)
    with log_lock:
        seq[0] += 1
        n = seq[0]
    email = f"{TAG}-{n}@example.com"
    s, ra, code, raw = call("POST", "/internal/v1/leads", ITOKEN, lead_body(email, origin),
                                 key=email if IDEM else None)
    lid = None
    if s == 201:
        try:
            lid = json.loads(raw)["data"]["id"]
        except Exception:
            lid = "?"
    return s, ra, code, raw, (lid, email)


FREEZE_AT = []  # (freeze, resumed)
RN_THREADS = []
retry_log = []   # (label, email, first_status_at_cut, final_status, last409_after_resume, final_after_resume, final_id)
def retry_now(em, resumed, label):
    last409 = None
    st, raw = None, b""
    while time.monotonic() - resumed < 90:
        TL.replayed = None
        st, ra, code, raw = call("POST", "/internal/v1/leads", ITOKEN, lead_body(em), key=em)
        if st == 409:
            last409 = time.monotonic() - resumed
        if st not in (503, 409):
            break
        time.sleep(0.2)
    lid = None
    try:
        lid = json.loads(raw)["data"]["id"]
    except Exception:
        pass
    with log_lock:
        retry_log.append((label, em, st, last409, time.monotonic() - resumed, lid, TL.replayed))


def loop(kind):
    while not stop.is_set():
        t0 = time.monotonic()
        s, ra, code, _raw, extra = one(kind)
        t1 = time.monotonic()
        with log_lock:
            log.append((kind, t0, t1, s, ra, code, extra))
        if s == 0:
            time.sleep(0.01)


def cluster():
    pm = int(open(PGDATA + "/postmaster.pid").readline())
    kids = subprocess.run(["pgrep", "-P", str(pm)], capture_output=True, text=True).stdout.split()
    return [pm] + [int(k) for k in kids]


def recv_times():
    out = {}
    try:
        for line in open(RECV_LOG):
            r = json.loads(line)
            try:
                b = json.loads(r["body"])
                if b.get("event") == "lead.created":
                    out[b["data"]["lead"]["id"]] = r["t"]
            except Exception:
                pass
    except FileNotFoundError:
        pass
    return out


def ingest_marker(label):
    t = time.time()
    s, ra, code, raw, (lid, email) = one("operator", "managed-website")
    if s == 201:
        marker_emails.append(email)
    return label, t, s, lid


def wait_delivery(markers, limit=15):
    end = time.time() + limit
    res = {}
    while time.time() < end:
        got = recv_times()
        for label, t, s, lid in markers:
            if lid and lid in got and label not in res:
                res[label] = got[lid] - t
        if len(res) == len([m for m in markers if m[3]]):
            break
        time.sleep(0.05)
    return res


def fmt(x):
    return "-" if x is None else f"{x * 1000:.0f}"


threads = [threading.Thread(target=loop, args=(k,), daemon=True)
           for k in os.environ.get("KINDS", "partner operator catalog readyz").split() for _ in range(LOOPS)]
[t.start() for t in threads]
time.sleep(2)
bad_total = []
print(f"== {TAG}: loops {LOOPS}/kind, load {open('/proc/loadavg').read().split()[:3]}")
for fr in FREEZES:
    time.sleep(1.5)
    with log_lock:
        pre = [e for e in log if e[2] > time.monotonic() - 1.5]
    pre_bad = [e for e in pre if not (200 <= e[3] < 300)]
    if fr.startswith("idle"):
        secs = float(fr[4:])
        t0 = time.monotonic()
        time.sleep(secs)
        with log_lock:
            ev = [e for e in log if e[1] >= t0]
        n503 = [e for e in ev if e[3] == 503]
        lat = sorted(e[2] - e[1] for e in ev)
        print(f"-- idle {secs}s under whatever load runs: {len(ev)} calls, {len(n503)} 503 "
              f"({set((e[0], e[5]) for e in n503)}), non-2xx {sum(1 for e in ev if not 200 <= e[3] < 300)}, "
              f"latency p50 {fmt(lat[len(lat)//2])} p99 {fmt(lat[int(len(lat)*0.99)])} max {fmt(lat[-1])} ms, "
              f"load {open('/proc/loadavg').read().split()[:3]}")
        if n503:
            bad_total += n503
            print("   503 at (s from start): " + ", ".join(f"{e[0]} {e[2]-t0:.2f}" for e in n503[:20]))
        continue
    if fr == "restart":
        freeze = time.monotonic()
        p = subprocess.run(["runuser", "-u", "postgres", "--", PG_BIN + "/pg_ctl", "-D", PGDATA,
                            "-l", os.path.dirname(PGDATA) + "/log",
                            "-m", "fast", "-w", "restart", "-o",
                            f"-p {PG_PORT} -c listen_addresses=127.0.0.1 -k {os.path.dirname(PGDATA)}"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        # the restart's own time: from the command to "accepting connections" (-w)
        # pg_ctl -w returns once the server accepts connections
        resumed = time.monotonic()
        label = f"restart (down {resumed - freeze:.2f}s)"
    else:
        # "pm3": the postmaster alone (new connections hang, old ones work); "kids3": every child
        # but not the postmaster (old connections hang, new ones work); "3": all
        part = "pm" if fr.startswith("pm") else "kids" if fr.startswith("kids") else ""
        secs = float(fr[len(part):])
        pids = cluster()
        pids = pids[:1] if part == "pm" else pids[1:] if part == "kids" else pids
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        freeze = time.monotonic()
        time.sleep(secs)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        resumed = time.monotonic()
        label = f"SIGSTOP {part or 'all'} {secs}s"
    FREEZE_AT.append((freeze, resumed))
    if IDEM and os.environ.get("RETRY_NOW") == "1":
        with log_lock:
            cut = [e for e in log if e[0] == "operator" and e[3] != 201 and e[6] and e[2] > freeze - 0.01]
        for e in cut:
            t = threading.Thread(target=retry_now, args=(e[6][1], resumed, label), daemon=True)
            t.start()
            RN_THREADS.append(t)
    time.sleep(0.2)
    m1 = ingest_marker("0.2s after")
    time.sleep(2.3)
    with log_lock:
        ev = list(log)
    m2 = ingest_marker("2.5s after")
    deliv = wait_delivery([m1, m2])
    inflight = [e for e in ev if e[1] < freeze < e[2]]
    during = [e for e in ev if freeze <= e[1] < resumed]
    after = [e for e in ev if e[1] >= resumed]
    ok = lambda e: 200 <= e[3] < 300
    bad = [e for e in ev if e[2] > freeze - 0.01 and e[1] < resumed + 2.5 and (
        e[3] == 0 or e[3] >= 500 and e[3] != 503 or e[3] == 503 and (e[5] != "unavailable" or (e[0] != "readyz" and e[4] != "1"))
        or 400 <= e[3] < 500)]
    inflight_503 = [e for e in inflight if e[3] == 503]
    print(f"-- {label}: calls in flight at the freeze {len(inflight)} "
          f"({sum(ok(e) for e in inflight)} 2xx, {len(inflight_503)} 503)"
          + (f", answered by {fmt(max(e[2] for e in inflight) - freeze)} ms after the freeze" if inflight else "")
          + (f"; 503s of them at {fmt(min(e[2] for e in inflight_503) - freeze)}-{fmt(max(e[2] for e in inflight_503) - freeze)} ms" if inflight_503 else ""))
    if during:
        d503 = [e for e in during if e[3] == 503]
        print(f"   started during: {len(during)} ({sum(ok(e) for e in during)} 2xx, {len(d503)} 503), "
              f"max latency {fmt(max(e[2] - e[1] for e in during))} ms; "
              f"started >= 1s into the freeze: max latency "
              f"{fmt(max([e[2] - e[1] for e in during if e[1] >= freeze + 1.0] or [0]))} ms")
        slow = sorted([e for e in during if e[2] - e[1] > 0.2], key=lambda e: e[1])
        if slow:
            print("   slow during the freeze (kind start-after-freeze/latency ms status): " + ", ".join(
                f"{e[0]} {fmt(e[1] - freeze)}/{fmt(e[2] - e[1])} {e[3]}" for e in slow[:12]))
        first503 = min([e[2] for e in ev if e[3] == 503 and e[2] > freeze] or [None] or [0]) if any(e[3] == 503 and e[2] > freeze for e in ev) else None
        if first503:
            print(f"   first 503 answered {fmt(first503 - freeze)} ms after the freeze")
    nonok_after = [e for e in ev if e[2] >= resumed and not ok(e)]
    last_bad = max([e[2] for e in nonok_after] or [None] or [0]) if nonok_after else None
    firsts = {}
    for k in ("partner", "operator", "catalog", "readyz"):
        xs = [e[2] for e in after if e[0] == k and ok(e)]
        firsts[k] = min(xs) - resumed if xs else None
    print(f"   after resume: last non-2xx answered at {fmt(None if last_bad is None else last_bad - resumed)} ms "
          f"({len(nonok_after)} non-2xx answered after resume); every call started >= "
          f"{fmt(None if not nonok_after else max(e[1] for e in nonok_after) - resumed)} ms after resume is 2xx; "
          f"first 2xx started after resume: " + " ".join(f"{k}={fmt(v)}" for k, v in firsts.items()))
    print(f"   marker leads: " + " ".join(f"{l}: {s} delivered in {fmt(deliv.get(l))} ms" for l, t, s, lid in (m1, m2)))
    if bad:
        kinds = {}
        for e in bad:
            kinds[(e[0], e[3], e[4], e[5])] = kinds.get((e[0], e[3], e[4], e[5]), 0) + 1
        print(f"   BAD answers: {kinds}")
        bad_total += bad
    if pre_bad:
        print(f"   (before the freeze {len(pre_bad)} non-2xx: {set((e[0], e[3], e[5]) for e in pre_bad)})")
stop.set()
[t.join(timeout=20) for t in threads]
with log_lock:
    ev = list(log)
time.sleep(3)
_end = time.monotonic() + 80   # every RETRY_NOW thread ends: 201, or its 90 s from SIGCONT
for t in RN_THREADS:
    t.join(timeout=max(0.1, _end - time.monotonic()))
print(f"== RETRY_NOW threads still running after the wait: {sum(t.is_alive() for t in RN_THREADS)}")
if retry_log:
    q = f"SELECT email, id, created_at FROM leads WHERE email LIKE '{TAG}-%'"
    rows = subprocess.run(["psql", "-h", "127.0.0.1", "-p", PG_PORT, "-U", "postgres", "-d", DB, "-AF|", "-Atc", q],
                          capture_output=True, text=True).stdout.split("\n")
    bymail = {}
    for r in rows:
        if r:
            em, lid, ca = r.split("|")
            bymail.setdefault(em, []).append(lid)
    with log_lock:
        rl = list(retry_log)
        ev0 = list(log)
    n409 = [r for r in rl if r[3] is not None]
    print(f"== RETRY_NOW: {len(rl)} keyed writes cut by a freeze, retried from SIGCONT every 0.2 s: final "
          f"{sorted((s, sum(1 for r in rl if r[2] == s)) for s in set(r[2] for r in rl))}; "
          f"{len(n409)} saw 409, last 409 at {fmt(max([r[3] for r in n409] or [None]) if n409 else None)} ms after SIGCONT; "
          f"final answer at most {fmt(max(r[4] for r in rl))} ms after SIGCONT")
    for r in n409:
        orig = [e for e in ev0 if e[0] == "operator" and e[6] and e[6][1] == r[1]]
        o = (f" (first try started {fmt(orig[0][1] - orig[0][1])} .. answered {fmt(orig[0][2] - orig[0][1])} ms, {orig[0][3]})" if orig else "")
        print(f"   {r[0]} {r[1]}: last 409 {fmt(r[3])} ms, final {r[2]} at {fmt(r[4])} ms after SIGCONT{o}")
    mism = [r for r in rl if r[2] == 201 and bymail.get(r[1]) != [r[5]]]
    print(f"== RETRY_NOW replay: {sum(1 for r in rl if r[2] == 201)} final 201, whose id is the only lead of its key: "
          f"{sum(1 for r in rl if r[2] == 201) - len(mism)} (replays 'Idempotent-Replayed: true': {sum(1 for r in rl if r[6] == 'true')}); mismatches {[(r[1], r[5], bymail.get(r[1])) for r in mism][:5]}")
created = [e[6] for e in ev if e[0] == "operator" and e[3] == 201]
emails = [c[1] for c in created] + marker_emails
if IDEM:
    # every write not answered 201 retried (same key, same body) as a client would after its 503;
    # then no email may have two leads
    failed = [e[6][1] for e in ev if e[0] == "operator" and e[3] != 201 and e[6]]
    retried = {}
    stuck = []
    for em in failed:
        t0 = time.monotonic()
        seen409 = False
        while time.monotonic() - t0 < 90:
            st, ra, code, raw = call("POST", "/internal/v1/leads", ITOKEN, lead_body(em), key=em)
            if st == 409:
                seen409 = True
            if st not in (503, 409):
                break
            time.sleep(0.5)
        if seen409:
            stuck.append((em, st, time.monotonic() - t0))
        retried[st] = retried.get(st, 0) + 1
        if st == 201:
            emails.append(em)
    dq = f"SELECT count(*) FROM (SELECT email FROM leads WHERE email LIKE '{TAG}-%' GROUP BY email HAVING count(*) > 1) d"
    dup = subprocess.run(["psql", "-h", "127.0.0.1", "-p", PG_PORT, "-U", "postgres", "-d", DB, "-Atc", dq],
                         capture_output=True, text=True).stdout.strip()
    print(f"== Idempotency-Key: {len(failed)} writes not answered 201 retried with their key: {retried}; "
          f"emails with more than one lead: {dup}")
    fz = FREEZE_AT
    for em, st, d in stuck:
        orig = [e for e in ev if e[0] == "operator" and e[6] and e[6][1] == em]
        where = ""
        if orig:
            e = orig[0]
            f = max([x for x in fz if x[0] <= e[2]] or [(0, 0)])
            where = (f" (first try: {e[3]} {e[5]}, started {fmt(e[1] - f[0])} ms / answered {fmt(e[2] - f[0])} ms after the freeze,"
                     f" {fmt(e[2] - f[1])} ms after SIGCONT; retries began {time.monotonic() - d - f[1]:.1f} s after SIGCONT)")
        print(f"   key {em}: 409 idempotency_key_in_use on retry, then {st} after {d:.1f} s of retries{where}")
if os.environ.get("EMAILS_OUT"):
    open(os.environ["EMAILS_OUT"], "w").write("\n".join(emails) + "\n")
q = f"SELECT email FROM leads WHERE email LIKE '{TAG}-%'"
out = subprocess.run(["psql", "-h", "127.0.0.1", "-p", PG_PORT, "-U", "postgres", "-d", DB, "-Atc", q],
                     capture_output=True, text=True)
indb = set(out.stdout.split())
lost = [e for e in emails if e not in indb]
unk = [e for e in ev if e[0] == "operator" and e[3] != 201]
extra = len(indb) - len(set(emails))
status_counts = {}
for e in ev:
    status_counts[(e[0], e[3])] = status_counts.get((e[0], e[3]), 0) + 1
print(f"== writes: {len(emails)} answered 201 (markers included), {len(indb)} in the database with the tag "
      f"(psql rc {out.returncode}), lost: {len(lost)} {lost[:5]}; non-201 writes {len(unk)}, of which "
      f"in the database anyway {extra}")
print(f"== all answers: {sorted(status_counts.items())}")
print(f"== 500s: {sum(1 for e in ev if e[3] == 500)}, transport errors/timeouts: {sum(1 for e in ev if e[3] == 0)}")
sys.exit(1 if lost else 0)
