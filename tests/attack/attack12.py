#!/usr/bin/env python3
"""attack12: Idempotency-Key claimed by an advisory lock in the request's first transaction
(branch `lead`, 07b8110) against main (3d21eed). Subcommands (env: BASE, BASE2, TOKEN, ITOKEN,
PG_PORT, DB; see attack12.sh):

  race  ROUNDS CLIENTS   exactly-once: CLIENTS clients fire one keyed request at once (a barrier),
                         alternating between BASE and BASE2; kinds alternate: operator POST
                         /internal/v1/leads, partner POST /api/v1/sub-accounts. Exactly one runs;
                         every other answer is 409 idempotency_key_in_use or the replay, byte for
                         byte; the database holds one lead / one sub-account per key.
  kill9 B_PID            a keyed lead held on `LOCK TABLE leads` on BASE2, whose process is then
                         SIGKILLed; its retry on BASE every 0.1 s: 409 while the table lock is held
                         (the dead client's backend still waits and holds the key), then the time
                         from the lock's release to the retry's 201; one lead.
  pool  SECS THREADS     THREADS loops of keyed requests of several kinds (lead, sub-account,
                         operator webhook endpoint create (DNS when the server resolves),
                         coupon bulk order, PATCH of an unknown lead = 404), 1 in 4 re-sending
                         the thread's previous key and body; plus 2 unkeyed partner reads. Then
                         every key once more: none may answer 409 (stuck).
  sem                    semantics (§8.3): other body while the first runs = 409, after = 422;
                         4xx kept; 5xx not kept (a CHECK constraint makes the insert fail); a
                         key after an error; sealed webhook secret only to the same token; an
                         unknown partner's user (the guarded FK violation) kept as 404.
"""
import json, os, random, subprocess, sys, threading, time, uuid, urllib.request, urllib.error
import http.client

BASE = os.environ.get("BASE", "")
BASE2 = os.environ.get("BASE2", BASE)
TOKEN, ITOKEN = os.environ.get("TOKEN", ""), os.environ.get("ITOKEN", "")
PG_PORT, DB = os.environ.get("PG_PORT", "18540"), os.environ.get("DB", "")


def psql(sql):
    r = subprocess.run(["psql", "-h", "127.0.0.1", "-p", PG_PORT, "-U", "postgres", "-qAt", "-d", DB,
                        "-c", sql], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr)
    return r.stdout.strip()


def call(base, method, path, token, body=None, key=None, timeout=20):
    """(status, headers, raw body, elapsed s); status 0 = transport error / timeout."""
    if body is not None and not isinstance(body, (bytes, str)):
        body = json.dumps(body)
    if isinstance(body, str):
        body = body.encode()
    req = urllib.request.Request(base + path, data=body, method=method)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    if body is not None:
        req.add_header("content-type", "application/json")
    if key:
        req.add_header("Idempotency-Key", key)
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read(), time.monotonic() - t0
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read(), time.monotonic() - t0
    except Exception as e:  # noqa: BLE001
        return 0, {}, type(e).__name__.encode(), time.monotonic() - t0


def code(raw):
    try:
        return json.loads(raw)["error"]["code"]
    except Exception:  # noqa: BLE001
        return None


def replayed(h):
    return (h.get("Idempotent-Replayed") or h.get("idempotent-replayed")) == "true"


def lead_body(email, first="Ann"):
    return {"partnerId": "demo-clinic", "firstName": first, "lastName": "Lee", "email": email,
            "emailConsent": True, "phone": "+1 555 0100", "smsConsent": True,
            "origin": "headless_intake", "location": "Austin, TX"}


FAILS = []


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + ("  " + detail if detail else ""), flush=True)
    if not ok:
        FAILS.append(name)


# ---------------------------------------------------------------- race
def race(rounds, clients):
    psql("DELETE FROM sub_accounts WHERE partner_id = 'demo-clinic'")
    tag = uuid.uuid4().hex[:6]
    tally = {"runs": 0, "409": 0, "replay": 0, "other": 0, "dups": 0, "bad_replay": 0}
    worst = []
    for rnd in range(rounds):
        kind = "lead" if rnd % 2 == 0 else "sub"
        key = f"a12-{tag}-{rnd}"
        if kind == "lead":
            email = f"a12-{tag}-{rnd}@example.com"
            args = ("POST", "/internal/v1/leads", ITOKEN, lead_body(email))
        else:
            sub = (rnd // 2) % 250 + 1
            if sub == 1 and rnd > 1:
                psql("DELETE FROM sub_accounts WHERE partner_id = 'demo-clinic'")
            args = ("POST", "/api/v1/sub-accounts", TOKEN, {"subId": str(sub), "nickname": f"n{rnd}"})
        bar = threading.Barrier(clients)
        out = [None] * clients

        def go(i):
            bar.wait()
            base = BASE if i % 2 == 0 else BASE2
            out[i] = call(base, *args, key=key)
        ts = [threading.Thread(target=go, args=(i,)) for i in range(clients)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        ran = [o for o in out if o[0] in (200, 201) and not replayed(o[1])]
        # A second run would show as a 409 with another code (subId exists) or a second 201.
        others = [o for o in out if not (o[0] in (200, 201) and not replayed(o[1]))]
        tally["runs"] += len(ran)
        for o in others:
            if o[0] == 409 and code(o[2]) == "idempotency_key_in_use":
                tally["409"] += 1
            elif replayed(o[1]):
                tally["replay"] += 1
                if not ran or o[2] != ran[0][2] or o[0] != ran[0][0]:
                    tally["bad_replay"] += 1
            else:
                tally["other"] += 1
                worst.append((rnd, kind, o[0], o[2][:120]))
        if kind == "lead":
            n = int(psql(f"SELECT count(*) FROM leads WHERE email = '{email}'"))
        else:
            n = int(psql(f"SELECT count(*) FROM sub_accounts WHERE partner_id = 'demo-clinic' AND sub_id = {sub}"))
        if n != 1 or len(ran) != 1:
            tally["dups"] += 1
            worst.append((rnd, kind, "rows", n, "ran", len(ran), [(o[0], code(o[2])) for o in out]))
        # Afterwards, on each instance: the replay, byte for byte.
        for base in (BASE, BASE2):
            s, h, raw, _ = call(base, *args, key=key)
            if not (replayed(h) and ran and raw == ran[0][2] and s == ran[0][0]):
                tally["bad_replay"] += 1
                worst.append((rnd, kind, "late replay", s, raw[:100]))
    print(json.dumps(tally))
    for w in worst[:20]:
        print("  ", w)
    check("race: exactly one run per key, 0 duplicates", tally["dups"] == 0 and tally["runs"] == rounds)
    check("race: others 409 in_use or an exact replay", tally["other"] == 0 and tally["bad_replay"] == 0)


# ---------------------------------------------------------------- kill9
def kill9_dns(b_pid, limit=75.0):
    """B SIGKILLed while its keyed request waits for a name server (its key claimed by the
    partner read before the DNS lookup, the transaction idle): the retry on A."""
    key = f"k9d-{uuid.uuid4().hex[:8]}"
    host = f"k9.{os.environ.get('DNS_HOST', 'slow.attack12.test')}"
    body = {"url": f"https://{host}/{key}", "events": ["lead.created"]}
    path = "/internal/v1/partners/demo-clinic/webhook-endpoints"
    th = threading.Thread(target=lambda: call(BASE2, "POST", path, ITOKEN, body, key=key, timeout=10))
    th.start()
    time.sleep(1.0)
    idle = psql("SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction' AND datname = current_database()")
    os.kill(b_pid, 9)
    t_kill = time.monotonic()
    th.join()
    seen = []
    while time.monotonic() - t_kill < limit:
        t0 = time.monotonic() - t_kill
        s, h, raw, el = call(BASE, "POST", path, ITOKEN, body, key=key)
        seen.append((round(t0, 2), s, code(raw)))
        if s != 409:
            break
        time.sleep(0.1)
    n409 = [x for x in seen if x[1] == 409]
    print(f"idle-in-transaction backends at the kill: {idle}; retries on A: {len(seen)}, 409: {len(n409)} "
          f"(last sent {n409[-1][0] if n409 else '-'} s after the kill); final {seen[-1]}")
    n = int(psql(f"SELECT count(*) FROM webhook_endpoints WHERE url = 'https://{host}/{key}'"))
    check("kill9 (idle in transaction): one endpoint", n == 1, str(n))
    check("kill9 (idle in transaction): the first retry on A runs (no 409)", not n409 and seen[-1][1] == 201, str(seen[:3]))


def kill9(b_pid, hold=3.0, limit=75.0):
    if os.environ.get("K9_MODE") == "dns":
        return kill9_dns(b_pid, limit)
    email = f"a12-k9-{uuid.uuid4().hex[:8]}@example.com"
    key = "k9-" + email
    body = lead_body(email)
    locker = subprocess.Popen(["psql", "-h", "127.0.0.1", "-p", PG_PORT, "-U", "postgres", "-qAt", "-d", DB],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    locker.stdin.write("BEGIN; LOCK TABLE leads IN ACCESS EXCLUSIVE MODE; SELECT 'locked';\n")
    locker.stdin.flush()
    assert locker.stdout.readline().strip() == "locked"
    first = {}
    th = threading.Thread(target=lambda: first.setdefault("r", call(BASE2, "POST", "/internal/v1/leads", ITOKEN, body, key=key, timeout=10)))
    th.start()
    time.sleep(0.8)
    waiting = psql("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()")
    os.kill(b_pid, 9)
    t_kill = time.monotonic()
    th.join()
    print(f"first request on B (killed): {first['r'][0]} {first['r'][2][:40]!r}; backends waiting on the lock at the kill: {waiting}")
    statuses = []
    released = None
    t_first_ok = None
    while time.monotonic() - t_kill < limit:
        if released is None and time.monotonic() - t_kill >= hold:
            locker.stdin.write("COMMIT;\n")
            locker.stdin.flush()
            released = time.monotonic()
        s, h, raw, _ = call(BASE, "POST", "/internal/v1/leads", ITOKEN, body, key=key)
        statuses.append((round(time.monotonic() - t_kill, 2), s, code(raw), replayed(h)))
        if s not in (409, 503):
            t_first_ok = time.monotonic()
            break
        time.sleep(0.1)
    locker.stdin.close()
    locker.wait()
    n409_locked = sum(1 for t, s, c, r in statuses if s == 409 and t < hold)
    n409_after = [t for t, s, c, r in statuses if s == 409 and t >= hold]
    last = statuses[-1]
    print(f"retries on A: {len(statuses)}; 409 while the lock was held: {n409_locked}; "
          f"409 after its release: {len(n409_after)} (last at {max(n409_after) - hold if n409_after else 0:.2f} s after the release); "
          f"final {last}; time release → final: {t_first_ok - released if t_first_ok and released else None}")
    n = int(psql(f"SELECT count(*) FROM leads WHERE email = '{email}'"))
    check("kill9: one lead for the key", n == 1, f"{n} leads")
    check("kill9: the retry ran within 1 s of the lock's release", bool(t_first_ok and released and t_first_ok - released < 1.0 and last[1] == 201))


# ---------------------------------------------------------------- pool
def pool(secs, threads):
    tag = uuid.uuid4().hex[:6]
    stop = threading.Event()
    lock = threading.Lock()
    res = []      # (kind, status, code, elapsed, replayed)
    keys = {}     # key -> (args, last status)
    seq = [0]
    dns = os.environ.get("DNS_HOST")  # e.g. slow.attack12.test: the create resolves it

    def mk(kind, n):
        if kind == "lead":
            return ("POST", "/internal/v1/leads", ITOKEN, lead_body(f"a12p-{tag}-{n}@example.com"))
        if kind == "sub":
            return ("POST", "/api/v1/sub-accounts", TOKEN, {"subId": str(random.randint(1, 250)), "nickname": f"p{n}"})
        if kind == "whc":
            host = f"h{n}.{dns}" if dns else "127.0.0.1:9"
            return ("POST", "/internal/v1/partners/demo-clinic/webhook-endpoints", ITOKEN,
                    {"url": f"https://{host}/hook{n}", "events": ["lead.created"], "secret": True})
        if kind == "coupon":
            return ("POST", "/internal/v1/care-services-coupons/bulk-orders", ITOKEN,
                    {"partnerId": "demo-clinic", "productSlug": "primary", "months": 12, "quantity": 2,
                     "unitPriceCents": 100, "purchaserEmail": "buyer@example.com", "purchaserSource": "a12"})
        if kind == "patch404":
            return ("PATCH", f"/internal/v1/leads/{uuid.uuid4()}", ITOKEN, {"firstName": "Bo"})
        raise ValueError(kind)

    kinds = os.environ.get("KINDS", "lead sub whc coupon patch404").split()

    def worker(i):
        kind = kinds[i % len(kinds)]
        prev = None
        base = BASE if i % 2 == 0 else BASE2
        while not stop.is_set():
            if prev and random.random() < 0.25:
                key, args = prev
            else:
                with lock:
                    seq[0] += 1
                    n = seq[0]
                key, args = f"a12p-{tag}-{n}", mk(kind, n)
            s, h, raw, el = call(base, *args, key=key, timeout=15)
            with lock:
                res.append((kind, s, code(raw), el, replayed(h)))
                keys[key] = (args, s)
            prev = (key, args)

    def reader(i):
        while not stop.is_set():
            s, h, raw, el = call(BASE, "GET", "/api/v1/leads?limit=5", TOKEN, timeout=15)
            with lock:
                res.append(("read", s, code(raw), el, False))

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    ts += [threading.Thread(target=reader, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    time.sleep(secs)
    stop.set()
    for t in ts:
        t.join()
    by = {}
    for kind, s, c, el, rp in res:
        d = by.setdefault(kind, {"n": 0, "st": {}, "max": 0.0, "lat": []})
        d["n"] += 1
        k = f"{s}{'/' + c if c else ''}{'/replay' if rp else ''}"
        d["st"][k] = d["st"].get(k, 0) + 1
        d["lat"].append(el)
    for kind, d in sorted(by.items()):
        lat = sorted(d["lat"])
        p99 = lat[int(len(lat) * 0.99) - 1] if lat else 0
        print(f"  {kind:9s} n={d['n']:5d} p50={lat[len(lat)//2]*1000:6.0f}ms p99={p99*1000:6.0f}ms max={lat[-1]*1000:6.0f}ms  {dict(sorted(d['st'].items()))}")
    n503 = sum(1 for r in res if r[1] == 503)
    n500 = sum(1 for r in res if r[1] == 500)
    n0 = sum(1 for r in res if r[1] == 0)
    # Every key once more, one at a time: none is stuck at 409.
    stuck = []

    def again(item):
        key, (args, last) = item
        s, h, raw, _ = call(BASE, *args, key=key)
        if s == 409 and code(raw) == "idempotency_key_in_use":
            with lock:
                stuck.append((key, args[1], last))
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(int(os.environ.get("AGAIN_THREADS", "4"))) as ex:
        list(ex.map(again, list(keys.items())))
    print(f"pool: {len(res)} calls, 503: {n503}, 500: {n500}, transport/timeouts: {n0}, keys {len(keys)}, stuck at 409 afterwards: {len(stuck)}")
    for s in stuck[:10]:
        print("   stuck", s)
    check("pool: no 500, no hang", n500 == 0 and n0 == 0)
    check("pool: no key stuck at 409", not stuck)
    print(f"POOLSUM 503={n503} 500={n500} hang={n0} stuck={len(stuck)} calls={len(res)}")


# ---------------------------------------------------------------- sem
def sem():
    tag = uuid.uuid4().hex[:6]
    # 1. Another body while the first runs: 409; the same body: 409; after: 422 / replay.
    locker = subprocess.Popen(["psql", "-h", "127.0.0.1", "-p", PG_PORT, "-U", "postgres", "-qAt", "-d", DB],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    locker.stdin.write("BEGIN; LOCK TABLE leads IN ACCESS EXCLUSIVE MODE; SELECT 'locked';\n")
    locker.stdin.flush()
    assert locker.stdout.readline().strip() == "locked"
    key = f"sem1-{tag}"
    b1, b2 = lead_body(f"s1-{tag}@example.com"), lead_body(f"s2-{tag}@example.com")
    first = {}
    th = threading.Thread(target=lambda: first.setdefault("r", call(BASE, "POST", "/internal/v1/leads", ITOKEN, b1, key=key)))
    th.start()
    time.sleep(0.5)
    r_other = call(BASE2, "POST", "/internal/v1/leads", ITOKEN, b2, key=key)
    r_same = call(BASE2, "POST", "/internal/v1/leads", ITOKEN, b1, key=key)
    r_bad = call(BASE, "POST", "/internal/v1/leads", ITOKEN, {"partnerId": "demo-clinic"}, key=key)  # 400 before any statement
    locker.stdin.write("COMMIT;\n")
    locker.stdin.flush()
    locker.stdin.close()
    locker.wait()
    th.join()
    check("other body while the first runs: 409 in_use", r_other[0] == 409 and code(r_other[2]) == "idempotency_key_in_use", f"{r_other[0]} {code(r_other[2])} {r_other[3]*1000:.0f} ms")
    check("same body while the first runs: 409 in_use", r_same[0] == 409 and code(r_same[2]) == "idempotency_key_in_use", f"{r_same[0]} {code(r_same[2])}")
    check("an invalid body (400, no statement) while the first runs: 409", r_bad[0] == 409, f"{r_bad[0]} {code(r_bad[2])}")
    check("the first: 201", first["r"][0] == 201, str(first["r"][0]))
    r = call(BASE2, "POST", "/internal/v1/leads", ITOKEN, b2, key=key)
    check("other body after: 422 reused", r[0] == 422 and code(r[2]) == "idempotency_key_reused", f"{r[0]} {code(r[2])}")
    r = call(BASE2, "POST", "/internal/v1/leads", ITOKEN, b1, key=key)
    check("same body after: replay byte for byte", r[0] == 201 and replayed(r[1]) and r[2] == first["r"][2])
    r = call(BASE2, "POST", "/internal/v1/leads", ITOKEN, json.dumps(b1, indent=1), key=key)
    check("same JSON, other whitespace: 422", r[0] == 422, str(r[0]))
    # 2. 4xx kept: PATCH of an unknown lead (404, the uow rolled back to the claim), a 400.
    lid = str(uuid.uuid4())
    k = f"sem2-{tag}"
    r1 = call(BASE, "PATCH", f"/internal/v1/leads/{lid}", ITOKEN, {"firstName": "Bo"}, key=k)
    r2 = call(BASE2, "PATCH", f"/internal/v1/leads/{lid}", ITOKEN, {"firstName": "Bo"}, key=k)
    check("PATCH unknown lead 404, kept and replayed", r1[0] == 404 and r2[0] == 404 and replayed(r2[1]) and r1[2] == r2[2], f"{r1[0]} {r2[0]} {replayed(r2[1])}")
    k = f"sem3-{tag}"
    r1 = call(BASE, "POST", "/internal/v1/leads", ITOKEN, {"partnerId": "demo-clinic", "email": "x"}, key=k)
    r2 = call(BASE, "POST", "/internal/v1/leads", ITOKEN, {"partnerId": "demo-clinic", "email": "x"}, key=k)
    check("400 kept and replayed", r1[0] == 400 and r2[0] == 400 and replayed(r2[1]), f"{r1[0]} {r2[0]} {replayed(r2[1])}")
    # Unknown partner for a lead: insert_lead answers false (404 or 422), kept.
    k = f"sem3b-{tag}"
    bb = lead_body(f"s3b-{tag}@example.com"); bb["partnerId"] = "no-such-partner"
    r1 = call(BASE, "POST", "/internal/v1/leads", ITOKEN, bb, key=k)
    r2 = call(BASE2, "POST", "/internal/v1/leads", ITOKEN, bb, key=k)
    check("lead of an unknown partner: 4xx, kept", 400 <= r1[0] < 500 and r2[0] == r1[0] and replayed(r2[1]), f"{r1[0]} {code(r1[2])} {r2[0]} {replayed(r2[1])}")
    # A user of an unknown partner: the FK violation inside the held transaction (guarded).
    k = f"sem4-{tag}"
    ub = {"email": f"u-{tag}@demo.test", "partnerId": "no-such-partner", "admin": False}
    r1 = call(BASE, "POST", "/internal/v1/users", ITOKEN, ub, key=k)
    r2 = call(BASE2, "POST", "/internal/v1/users", ITOKEN, ub, key=k)
    check("user of an unknown partner: 404 kept (not 500)", r1[0] == 404 and r2[0] == 404 and replayed(r2[1]), f"{r1[0]} {code(r1[2])} {r2[0]} {replayed(r2[1])}")
    # A user whose email exists already (a unique violation, if any, in the guarded statement).
    k = f"sem4b-{tag}"
    ub = {"email": f"dup-{tag}@demo.test", "partnerId": "demo-clinic", "admin": False}
    r0 = call(BASE, "POST", "/internal/v1/users", ITOKEN, ub)
    r1 = call(BASE, "POST", "/internal/v1/users", ITOKEN, ub, key=k)
    r1u = call(BASE, "POST", "/internal/v1/users", ITOKEN, ub)
    print(f"     (user twice: unkeyed {r0[0]}, keyed {r1[0]} {code(r1[2])}, unkeyed again {r1u[0]} {code(r1u[2])})")
    check("user created twice: keyed answer = unkeyed answer", r1[0] == r1u[0], f"{r1[0]} vs {r1u[0]}")
    # 3. 5xx not kept, and the key free after the error: a CHECK constraint fails the insert.
    psql("ALTER TABLE leads ADD CONSTRAINT a12_boom CHECK (first_name <> 'Boom') NOT VALID")
    try:
        k = f"sem5-{tag}"
        b = lead_body(f"s5-{tag}@example.com", first="Boom")
        r1 = call(BASE, "POST", "/internal/v1/leads", ITOKEN, b, key=k)
        r2 = call(BASE2, "POST", "/internal/v1/leads", ITOKEN, b, key=k)
        check("5xx not kept: the retry runs again (5xx, not a replay, not 409)", r1[0] >= 500 and r2[0] >= 500 and not replayed(r2[1]), f"{r1[0]} {code(r1[2])} / {r2[0]} {code(r2[2])} replay={replayed(r2[1])}")
    finally:
        psql("ALTER TABLE leads DROP CONSTRAINT a12_boom")
    r3 = call(BASE2, "POST", "/internal/v1/leads", ITOKEN, b, key=k)
    check("after the 5xx's cause is gone: the key runs (201)", r3[0] == 201 and not replayed(r3[1]), f"{r3[0]}")
    n = int(psql(f"SELECT count(*) FROM leads WHERE email = 's5-{tag}@example.com'"))
    check("one lead after the 5xx retries", n == 1, str(n))
    # 4. Sealed answers: an endpoint created with its secret, replayed to the same token only.
    u = json.loads(call(BASE, "POST", "/internal/v1/users", ITOKEN, {"email": f"t-{tag}@demo.test", "partnerId": "demo-clinic", "admin": True})[2])["data"]
    t2 = json.loads(call(BASE, "POST", f"/internal/v1/users/{u['id']}/tokens", ITOKEN, {})[2])["data"]["token"]
    for e in json.loads(call(BASE, "GET", "/api/v1/webhook-endpoints", TOKEN)[2])["data"]:
        call(BASE, "DELETE", f"/api/v1/webhook-endpoints/{e['id']}", TOKEN)
    k = f"sem6-{tag}"
    eb = {"url": "https://127.0.0.1:9/sealed", "events": ["lead.created"], "secret": True}
    r1 = call(BASE, "POST", "/api/v1/webhook-endpoints", TOKEN, eb, key=k)
    r2 = call(BASE2, "POST", "/api/v1/webhook-endpoints", TOKEN, eb, key=k)
    r3 = call(BASE2, "POST", "/api/v1/webhook-endpoints", t2, eb, key=k)
    secret = json.loads(r1[2])["data"].get("secret") if r1[0] == 201 else None
    check("sealed: same token gets the replay with the secret", r1[0] == 201 and r2[0] == 201 and replayed(r2[1]) and r2[2] == r1[2] and bool(secret))
    check("sealed: another token of the partner gets 422, no secret", r3[0] == 422 and (secret or "x").encode() not in r3[2], f"{r3[0]} {code(r3[2])}")
    row = psql(f"SELECT encode(body, 'escape') FROM idempotency_keys WHERE key = '{k}'")
    check("sealed: no secret in clear in idempotency_keys", bool(secret) and secret not in row)
    n = int(psql("SELECT count(*) FROM webhook_endpoints WHERE url = 'https://127.0.0.1:9/sealed'"))
    check("sealed: one endpoint", n == 1, str(n))
    # 5. The key is per caller: the operator and the partner may use the same key.
    k = f"sem7-{tag}"
    r1 = call(BASE, "POST", "/api/v1/sub-accounts", TOKEN, {"subId": "250", "nickname": "x"}, key=k)
    r2 = call(BASE, "POST", "/internal/v1/leads", ITOKEN, lead_body(f"s7-{tag}@example.com"), key=k)
    check("same key, partner then operator: both run", r1[0] in (201, 409) and not replayed(r1[1]) and r2[0] == 201 and not replayed(r2[1]), f"{r1[0]} {r2[0]}")
    # 6b. Expiry (the clock is not ours in a release build: the row's expires_at is moved back).
    k = f"sem8-{tag}"
    b = lead_body(f"s8-{tag}@example.com")
    r1 = call(BASE, "POST", "/internal/v1/leads", ITOKEN, b, key=k)
    caller = psql(f"SELECT caller FROM idempotency_keys WHERE key = '{k}'")
    psql(f"UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE key = '{k}'")
    bar = threading.Barrier(6)
    outs = [None] * 6

    def go(i):
        bar.wait()
        outs[i] = call(BASE if i % 2 else BASE2, "POST", "/internal/v1/leads", ITOKEN, b, key=k)
    ts = [threading.Thread(target=go, args=(i,)) for i in range(6)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    ran = [o for o in outs if o[0] == 201 and not replayed(o[1])]
    rest = sorted((o[0], code(o[2]), replayed(o[1])) for o in outs if not (o[0] == 201 and not replayed(o[1])))
    n = int(psql(f"SELECT count(*) FROM leads WHERE email = 's8-{tag}@example.com'"))
    check("expired key, 6 retries at once: exactly one runs again (2 leads in all)", r1[0] == 201 and len(ran) == 1 and n == 2, f"ran {len(ran)}, others {rest}, leads {n}")
    r3 = call(BASE, "POST", "/internal/v1/leads", ITOKEN, b, key=k)
    check("after the expired key ran again: its new answer replayed", bool(ran) and replayed(r3[1]) and r3[2] == ran[0][2])
    # A claim row of the previous version (no answer, lease running): 409 until its lease ends.
    k = f"sem9-{tag}"
    psql(f"INSERT INTO idempotency_keys (caller, key, fingerprint, created_at, lease_until, expires_at) "
         f"VALUES ('{caller}', '{k}', '\\x00', now(), now() + interval '2 seconds', now() + interval '1 day')")
    b = lead_body(f"s9-{tag}@example.com")
    r1 = call(BASE, "POST", "/internal/v1/leads", ITOKEN, b, key=k)
    time.sleep(2.2)
    r2 = call(BASE, "POST", "/internal/v1/leads", ITOKEN, b, key=k)
    check("an old version's claim row: 409 during its lease, runs after", r1[0] == 409 and r2[0] == 201, f"{r1[0]} {r2[0]}")
    # 6. No idempotency row, no advisory lock left: pg_locks shows no advisory lock at rest.
    time.sleep(0.3)
    n = int(psql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"))
    check("no advisory lock held at rest", n == 0, str(n))


def ratelimit(base_rl):
    """A keyed replay is charged as a request: BASE_RL runs with a budget of a few a minute."""
    tag = uuid.uuid4().hex[:6]
    k = f"rl-{tag}"
    b = {"subId": "249", "nickname": "rl"}
    seen = []
    for i in range(8):
        s, h, raw, _ = call(base_rl, "POST", "/api/v1/sub-accounts", TOKEN, b, key=k)
        seen.append((s, h.get("X-RateLimit-Remaining") or h.get("x-ratelimit-remaining"), replayed(h)))
    print("   ", seen)
    check("replays are charged: 429 once the budget is spent", any(s == 429 for s, _, _ in seen) and seen[1][2])
    rem = [int(r) for s, r, _ in seen if r is not None and s != 429]
    check("X-RateLimit-Remaining falls with each replay", rem == sorted(rem, reverse=True) and len(set(rem)) == len(rem), str(rem))


def diff():
    """Differential: each odd request sent without a key, then with a fresh key (then that key
    again): the keyed answer must be the unkeyed one's status and code (a statement failing in
    the held transaction must not turn a 4xx into a 500), and the replay the same bytes (4xx) or
    a run again (5xx)."""
    tag = uuid.uuid4().hex[:6]
    lead = json.loads(call(BASE, "POST", "/internal/v1/leads", ITOKEN, lead_body(f"d-{tag}@example.com"))[2])["data"]["id"]
    user = json.loads(call(BASE, "POST", "/internal/v1/users", ITOKEN, {"email": f"d-{tag}@demo.test", "partnerId": "demo-clinic", "admin": False})[2])["data"]["id"]
    Z = "\u0000"
    def order(n, **kw):
        b = {"orderId": f"o-{tag}-{n}", "partnerId": "demo-clinic", "createdDate": "2026-11-01T00:00:00Z",
             "product": "primary", "amount": 10.0, "commission": 1.0, "status": "paid", "isTest": False,
             "source": "a12"}
        b.update(kw)
        return b
    def coupon(**kw):
        b = {"partnerId": "demo-clinic", "productSlug": "primary", "months": 12, "quantity": 1,
             "unitPriceCents": 100, "purchaserEmail": "b@example.com", "purchaserSource": "a12"}
        b.update(kw)
        return b
    def payout(**kw):
        b = {"partnerId": "demo-clinic", "payoutDate": "2026-11-01", "payoutAmount": 10.0, "status": "paid"}
        b.update(kw)
        return b
    def event(**kw):
        b = {"runId": f"r-{uuid.uuid4().hex[:8]}", "partnerId": "demo-clinic", "event": "page_view",
             "occurredAt": "2026-11-01T00:00:00Z", "testSource": "a12"}
        b.update(kw)
        return b
    call(BASE, "POST", "/internal/v1/orders", ITOKEN, order("dup"))
    cases = [
        ("order dup orderId", lambda n: ("POST", "/internal/v1/orders", ITOKEN, order("dup"))),
        ("order amount 1e300", lambda n: ("POST", "/internal/v1/orders", ITOKEN, order(n, amount=1e300))),
        ("order commission 1e18", lambda n: ("POST", "/internal/v1/orders", ITOKEN, order(n, commission=1e18))),
        ("order unknown partner", lambda n: ("POST", "/internal/v1/orders", ITOKEN, order(n, partnerId="nope"))),
        ("order unknown subId", lambda n: ("POST", "/internal/v1/orders", ITOKEN, order(n, subId="249"))),
        ("order NUL name", lambda n: ("POST", "/internal/v1/orders", ITOKEN, json.dumps(order(n, customerName="a")).replace('"a"', '"a' + Z + '"'))),
        ("order year 9999", lambda n: ("POST", "/internal/v1/orders", ITOKEN, order(n, createdDate="9999-12-31T23:59:59Z"))),
        ("payout 1e20", lambda n: ("POST", "/internal/v1/payouts", ITOKEN, payout(payoutAmount=1e20))),
        ("payout NUL note", lambda n: ("POST", "/internal/v1/payouts", ITOKEN, json.dumps(payout(note="a")).replace('"a"', '"a' + Z + '"'))),
        ("payout unknown partner", lambda n: ("POST", "/internal/v1/payouts", ITOKEN, payout(partnerId="nope"))),
        ("event amount 1e300", lambda n: ("POST", "/internal/v1/analytics-events", ITOKEN, event(amount=1e300))),
        ("event year 0001", lambda n: ("POST", "/internal/v1/analytics-events", ITOKEN, event(occurredAt="0001-01-01T00:00:00Z"))),
        ("event unknown sub", lambda n: ("POST", "/internal/v1/analytics-events", ITOKEN, event(subId="248"))),
        ("coupon price 2^40", lambda n: ("POST", "/internal/v1/care-services-coupons/bulk-orders", ITOKEN, coupon(unitPriceCents=2**40))),
        ("coupon price 2^62", lambda n: ("POST", "/internal/v1/care-services-coupons/bulk-orders", ITOKEN, coupon(unitPriceCents=2**62))),
        ("coupon NUL notes", lambda n: ("POST", "/internal/v1/care-services-coupons/bulk-orders", ITOKEN, json.dumps(coupon(notes="a")).replace('"a"', '"a' + Z + '"'))),
        ("coupon expires 9999", lambda n: ("POST", "/internal/v1/care-services-coupons/bulk-orders", ITOKEN, coupon(expiresAt="9999-12-31T23:59:59Z"))),
        ("coupon unknown sub", lambda n: ("POST", "/internal/v1/care-services-coupons/bulk-orders", ITOKEN, coupon(subAccountId="247"))),
        ("coupon redeem unknown", lambda n: ("POST", "/internal/v1/care-services-coupons/redeem", ITOKEN, {"code": "ABCD-EFGH-JKLM", "productSlug": "primary", "months": 12, "email": "p@example.com", "providerPrimaryExternalId": "x"})),
        ("coupon void unknown", lambda n: ("POST", f"/internal/v1/care-services-coupons/{uuid.uuid4()}/void", ITOKEN, None)),
        ("lead NUL name", lambda n: ("POST", "/internal/v1/leads", ITOKEN, json.dumps(lead_body(f"d{n}-{tag}@example.com", first="a")).replace('"a"', '"a' + Z + '"'))),
        ("lead 100k location", lambda n: ("POST", "/internal/v1/leads", ITOKEN, dict(lead_body(f"d{n}-{tag}@example.com"), location="x" * 100000))),
        ("lead unknown sub", lambda n: ("POST", "/internal/v1/leads", ITOKEN, dict(lead_body(f"d{n}-{tag}@example.com"), subId="246"))),
        ("PATCH lead NUL name", lambda n: ("PATCH", f"/internal/v1/leads/{lead}", ITOKEN, '{"firstName":"a' + Z + '"}')),
        ("PATCH lead email x", lambda n: ("PATCH", f"/internal/v1/leads/{lead}", ITOKEN, {"email": "not-an-email"})),
        ("sub NUL nickname", lambda n: ("POST", "/api/v1/sub-accounts", TOKEN, '{"subId":"245","nickname":"a' + Z + '"}')),
        ("user NUL email", lambda n: ("POST", "/internal/v1/users", ITOKEN, '{"email":"a' + Z + '@x.test","partnerId":"demo-clinic","admin":false}')),
        ("user dup email", lambda n: ("POST", "/internal/v1/users", ITOKEN, {"email": f"d-{tag}@demo.test", "partnerId": "demo-clinic", "admin": False})),
        ("token expires +10000y", lambda n: ("POST", f"/internal/v1/users/{user}/tokens", ITOKEN, {"expiresAt": "9999-12-31T23:59:59Z"})),
        ("token unknown user", lambda n: ("POST", f"/internal/v1/users/{uuid.uuid4()}/tokens", ITOKEN, {})),
        ("rotate unknown token", lambda n: ("POST", f"/internal/v1/tokens/{uuid.uuid4()}/rotate", ITOKEN, None)),
        ("webhook NUL header", lambda n: ("POST", "/internal/v1/partners/demo-clinic/webhook-endpoints", ITOKEN, '{"url":"https://127.0.0.1:9/x","events":["lead.created"],"customHeader":{"name":"X-A","value":"a' + Z + '"}}')),
        ("webhook unknown partner", lambda n: ("POST", "/internal/v1/partners/nope/webhook-endpoints", ITOKEN, {"url": "https://127.0.0.1:9/x", "events": ["lead.created"]})),
        ("resend unknown delivery", lambda n: ("POST", f"/api/v1/webhook-deliveries/{uuid.uuid4()}/resend", TOKEN, None)),
        ("portal mint (sealed, 201 twice)", lambda n: ("POST", "/api/v1/portal-sessions", TOKEN, {})),
    ]
    bad = 0
    for i, (name, mk) in enumerate(cases):
        u = call(BASE, *mk(f"u{i}"))
        k = f"diff-{tag}-{i}"
        a = mk(f"k{i}")
        kd = call(BASE, *a, key=k)
        again = call(BASE2, *a, key=k)
        same = (u[0], code(u[2])) == (kd[0], code(kd[2]))
        kept_ok = (again[0] == kd[0] and (replayed(again[1]) and again[2] == kd[2])) if kd[0] < 500 else (not replayed(again[1]))
        flag = "" if same and kept_ok else "   <-- DIFFERS"
        if flag:
            bad += 1
        print(f"  {name:26s} unkeyed {u[0]} {code(u[2])}; keyed {kd[0]} {code(kd[2])}; again {again[0]} replay={replayed(again[1])}{flag}")
    check("diff: keyed answers = unkeyed answers; 4xx replayed, 5xx run again", bad == 0, f"{bad} differ")


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "race":
        race(int(sys.argv[2]), int(sys.argv[3]))
    elif cmd == "kill9":
        kill9(int(sys.argv[2]), hold=float(os.environ.get("HOLD", "3")), limit=float(os.environ.get("LIMIT", "75")))
    elif cmd == "pool":
        pool(float(sys.argv[2]), int(sys.argv[3]))
    elif cmd == "sem":
        sem()
    elif cmd == "diff":
        diff()
    elif cmd == "ratelimit":
        ratelimit(sys.argv[2])
    print(f"RESULT {cmd}: {len(FAILS)} failed: {FAILS}")
    sys.exit(1 if FAILS else 0)
