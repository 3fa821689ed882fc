#!/usr/bin/env python3
"""S-12 re-tried: the public surfaces under a flood from one client address.
Env: HOST PORT TOKEN RATE [TRUSTED] [DUR] [THREADS]. Sources are loopback addresses 127.0.0.x."""
import http.client, json, os, random, statistics, threading, time

HOST, PORT, TOKEN = "127.0.0.1", int(os.environ["PORT"]), os.environ["TOKEN"]
RATE = int(os.environ.get("RATE", "50"))
DUR = float(os.environ.get("DUR", "8"))
THREADS = int(os.environ.get("THREADS", "64"))
TRUSTED = os.environ.get("TRUSTED", "")
PID = os.environ.get("PARTNER_ID", "demo-clinic")
GETS = [f"/api/all-products?partner_id={PID}", f"/api/weight-loss?partner_id={PID}",
        f"/embed/care-services?partner_id={PID}", "/portal", "/portal/app.js"]


def req(src, method, path, headers=None, body=None, conn=None):
    c = conn or http.client.HTTPConnection(HOST, PORT, timeout=30, source_address=(src, 0))
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    if not conn:
        c.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, data


def flood(src, label, xff=None, post=False, new_conn=True, dur=DUR, threads=THREADS):
    """`threads` clients from `src` for `dur` s; returns status counts and Retry-After values."""
    counts, retry, lock, stop = {}, set(), threading.Lock(), time.time() + dur
    bodies = set()

    def worker(i):
        conn = None if new_conn else http.client.HTTPConnection(HOST, PORT, timeout=30, source_address=(src, 0))
        n = 0
        while time.time() < stop:
            h = {}
            if xff:
                h["X-Forwarded-For"] = xff()
            try:
                if post:
                    h["content-type"] = "application/json"
                    st, hd, b = req(src, "POST", "/portal/v1/sessions", h,
                                    json.dumps({"code": "%032x" % random.getrandbits(128)}), conn)
                else:
                    st, hd, b = req(src, "GET", GETS[(i + n) % len(GETS)], h, None, conn)
            except Exception as e:  # noqa
                st, hd, b = type(e).__name__, {}, b""
                conn = None if new_conn else http.client.HTTPConnection(HOST, PORT, timeout=30, source_address=(src, 0))
            n += 1
            with lock:
                counts[st] = counts.get(st, 0) + 1
                if st == 429:
                    retry.add(hd.get("retry-after"))
                    bodies.add(b[:80])
    ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    ok = counts.get(200, 0) + counts.get(400, 0)
    print(f"  {label}: {sum(counts.values())} requests in {dur:.0f}s, statuses {counts}; admitted/s {ok / dur:.1f} "
          f"(limit {RATE}/s, burst {2 * RATE}); Retry-After {sorted(x for x in retry)[:3]}; 429 body {list(bodies)[:1]}")
    return counts


def partner_p(label, dur, during=None):
    """Partner API latency from 127.0.0.1 (its own address) for `dur` s, optionally during a flood."""
    lat, codes = [], {}
    th = None
    if during:
        th = threading.Thread(target=during)
        th.start()
        time.sleep(1.5)
    conn = http.client.HTTPConnection(HOST, PORT, timeout=30)
    stop = time.time() + dur
    while time.time() < stop:
        t = time.perf_counter()
        st, _, _ = req("127.0.0.1", "GET", "/api/v1/leads?limit=10", {"Authorization": "Bearer " + TOKEN}, None, conn)
        lat.append((time.perf_counter() - t) * 1000)
        codes[st] = codes.get(st, 0) + 1
        time.sleep(0.01)
    if th:
        th.join()
    lat.sort()
    p99 = lat[int(len(lat) * 0.99) - 1]
    print(f"  partner reads {label}: {len(lat)} GETs {codes}, p50 {statistics.median(lat):.1f} ms, p99 {p99:.1f} ms")
    return p99


mode = os.environ.get("MODE", "untrusted")
rnd = lambda: "%d.%d.%d.%d" % (random.randint(1, 223), random.randint(0, 255), random.randint(0, 255), random.randint(1, 254))
if mode == "untrusted":
    print(f"== S-12 public limiter, PARTNER_PUBLIC_RATE={RATE}, no trusted proxies")
    for p in GETS:
        st, h, b = req("127.0.0.30", "GET", p)
        print(f"  first GET {p} from a fresh address: {st}")
    flood("127.0.0.5", "GETs over the 5 public GET paths, 1 address, new connection each")
    flood("127.0.0.6", "same, keep-alive connections", new_conn=False)
    flood("127.0.0.7", "POST /portal/v1/sessions with random codes (code guessing)", post=True)
    flood("127.0.0.8", "GETs with a random X-Forwarded-For each (spoofing, untrusted peer)", xff=rnd)
    flood("127.0.0.9", "GETs with X-Forwarded-For 'a, b' chains random", xff=lambda: rnd() + ", " + rnd())
    st, h, b = req("127.0.0.10", "GET", GETS[0])
    print(f"  another address meanwhile: {st}")
    idle = partner_p("idle", 6)
    busy = partner_p("during a 256-thread flood from 127.0.0.11", 6,
                     during=lambda: flood("127.0.0.11", "flood (new connections)", dur=9, threads=256))
    print(f"  partner p99 idle {idle:.1f} ms, under flood {busy:.1f} ms, ratio {busy / idle:.2f} (ruling: ≤ 2)")
else:
    print(f"== S-12 with PARTNER_TRUSTED_PROXIES={TRUSTED}")
    flood("127.0.0.20", "trusted proxy 127.0.0.20, random client per request (should be admitted)", xff=rnd)
    flood("127.0.0.20", "trusted proxy, one client 198.51.100.7 (should be limited)", xff=lambda: "198.51.100.7")
    flood("127.0.0.20", "trusted proxy, client spoofs a left hop: 'rnd, 198.51.100.8' (right-most counts: limited)",
          xff=lambda: rnd() + ", 198.51.100.8")
    flood("127.0.0.21", "untrusted 127.0.0.21 with random XFF (limited)", xff=rnd)
    flood("127.0.0.20", "trusted proxy, XFF naming only trusted hops '127.0.0.20' (falls back to?)",
          xff=lambda: "127.0.0.20")
    flood("127.0.0.20", "trusted proxy, junk XFF 'unknown' / garbage", xff=lambda: random.choice(["unknown", "", "::1%eth0", "999.1.1.1", rnd() + ":80"]))
