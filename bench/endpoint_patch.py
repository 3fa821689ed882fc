#!/usr/bin/env python3
"""Driver of bench/endpoint-patch.sh: the latency of `PATCH /api/v1/webhook-endpoints/{id}`, alone
and six at a time, against a cheap write (`POST /internal/v1/leads`) measured the same way.

  endpoint_patch.py setup BASE          creates 6 partners' users and tokens and 11 endpoints
                                        (6 of partner ep-1, one of each of ep-2…ep-6); prints JSON
  endpoint_patch.py run BASE SETUP LABEL ROUNDS
                                        one measurement of every case, ROUNDS requests per thread

Cases (each thread keeps one HTTP/1.1 connection, requests of a round start together):
  patch1     one PATCH at a time (the body of tests/attack/a13_race.py: a new URL, a new secret,
             expirePrevious)
  patch6_1p  six at once: six endpoints of one partner
  patch6_6p  six at once: one endpoint of each of six partners
  ingest1    one lead ingest at a time (partner ep-1, six endpoints: six deliveries)
  ingest6    six ingests at once
Prints one line per case: LABEL case n mean p50 p90 p99 max (ms)."""
import http.client
import json
import os
import sys
import threading
import time
import uuid

INTERNAL = os.environ["PARTNER_INTERNAL_TOKEN"]


class Client:
    def __init__(self, base):
        host, port = base.split(":")
        self.conn = http.client.HTTPConnection(host, int(port), timeout=30)

    def call(self, method, path, body, token):
        data = json.dumps(body) if body is not None else None
        self.conn.request(method, path, body=data, headers={
            "Authorization": "Bearer " + token, "Content-Type": "application/json"})
        r = self.conn.getresponse()
        raw = r.read()
        return r.status, (json.loads(raw) if raw else None)


def setup(base):
    c = Client(base)
    out = {"partners": []}
    for p in range(1, 7):
        pid = f"ep-{p}"
        st, _ = c.call("PUT", f"/internal/v1/partners/{pid}", {
            "name": f"Bench {p}", "email": f"ops{p}@bench.test", "active": True, "dnaAccess": True,
            "headlessLinks": True, "defaultLang": "en", "enabledLangs": ["en"],
            "careServices": {"subscriptionActive": True, "manualOverride": False,
                             "yearlyBundle": True, "services": ["primary-care"]}}, INTERNAL)
        assert st in (200, 201), st
        st, j = c.call("POST", "/internal/v1/users",
                       {"email": f"u{p}@bench.test", "partnerId": pid, "admin": False}, INTERNAL)
        assert st == 201, (st, j)
        st, j = c.call("POST", f"/internal/v1/users/{j['data']['id']}/tokens", None, INTERNAL)
        assert st == 201, (st, j)
        token = j["data"]["token"]
        eps = []
        for k in range(6 if p == 1 else 1):
            st, j = c.call("POST", "/api/v1/webhook-endpoints", {
                "url": f"https://127.0.0.1:9/hook-{p}-{k}", "events": ["lead.created"],
                "secret": True}, token)
            assert st == 201, (st, j)
            eps.append(j["data"]["id"])
        out["partners"].append({"id": pid, "token": token, "endpoints": eps})
    print(json.dumps(out))


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def run_case(base, jobs, rounds):
    """jobs: one callable(client, round) per thread; all threads start each round together."""
    lat = [[] for _ in jobs]
    bar = threading.Barrier(len(jobs))

    def body(i):
        c = Client(base)
        jobs[i](c, 0)  # warm the connection
        for r in range(1, rounds + 1):
            bar.wait()
            t0 = time.perf_counter()
            jobs[i](c, r)
            lat[i].append(1000 * (time.perf_counter() - t0))

    ts = [threading.Thread(target=body, args=(i,)) for i in range(len(jobs))]
    [t.start() for t in ts]
    [t.join() for t in ts]
    return [x for xs in lat for x in xs]


def patch_job(partner, ep, tag):
    def f(c, r):
        st, j = c.call("PATCH", f"/api/v1/webhook-endpoints/{ep}", {
            "url": f"https://127.0.0.1:9/hook-{tag}-v{r}-{uuid.uuid4().hex[:4]}",
            "secret": True, "expirePrevious": True}, partner["token"])
        assert st == 200, (st, j)
    return f


def ingest_job(partner):
    def f(c, r):
        tag = uuid.uuid4().hex[:8]
        st, j = c.call("POST", "/internal/v1/leads", {
            "partnerId": partner["id"], "firstName": "Ann", "lastName": tag,
            "email": f"{tag}@bench.test", "emailConsent": True, "phone": "+1 555 0100",
            "smsConsent": True, "origin": "managed-website", "location": "Austin, TX"}, INTERNAL)
        assert st == 201, (st, j)
    return f


def run(base, setup_file, label, rounds):
    s = json.load(open(setup_file))
    ps = s["partners"]
    cases = [
        ("patch1", [patch_job(ps[0], ps[0]["endpoints"][0], "s")]),
        ("patch6_1p", [patch_job(ps[0], ps[0]["endpoints"][k], f"a{k}") for k in range(6)]),
        ("patch6_6p", [patch_job(ps[k], ps[k]["endpoints"][0], f"b{k}") for k in range(6)]),
        ("ingest1", [ingest_job(ps[0])]),
        ("ingest6", [ingest_job(ps[0]) for _ in range(6)]),
    ]
    for name, jobs in cases:
        n = rounds * (3 if len(jobs) == 1 else 1)
        xs = run_case(base, jobs, n)
        print(f"{label} {name} {len(xs)} {sum(xs) / len(xs):.2f} {pct(xs, 0.5):.2f} "
              f"{pct(xs, 0.9):.2f} {pct(xs, 0.99):.2f} {max(xs):.2f}", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "setup":
        setup(sys.argv[2])
    else:
        run(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
