#!/usr/bin/env python3
"""S-01 re-tried: a GET over its rate budget must read no partner data.

For every partner read (listings, reads by id, events feed, by-hour chart, link builders):
  1. control: the budget's admitted requests, with the tuple counters of pg_stat_user_tables
     before/after (shows the measure sees reads);
  2. a burst of BURST over-budget GETs per path (all must be 429), counters before/after;
  3. an idle window of the same length, to subtract the worker's own polling.
Env: BASE TOKEN DB LIMIT BURST [LABEL]. Counters flush from idle backends within ~10 s (PG15),
so each snapshot waits FLUSH seconds first."""
import json, os, subprocess, sys, time, urllib.request, urllib.error
from concurrent.futures import ThreadPoolExecutor

BASE, TOKEN, DB = os.environ["BASE"], os.environ["TOKEN"], os.environ["DB"]
LIMIT, BURST = int(os.environ.get("LIMIT", "3")), int(os.environ.get("BURST", "30"))
FLUSH = float(os.environ.get("FLUSH", "12"))
LABEL = os.environ.get("LABEL", "")
# Tables the token check itself may read (allowed by the ruling: "after the token check alone").
AUTH_TABLES = {"api_tokens", "partners", "portal_users", "portal_sessions", "__diesel_schema_migrations"}


def psql(sql):
    return subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", DB, "-Atc", sql],
                          capture_output=True, text=True, check=True).stdout.strip()


def snap():
    time.sleep(FLUSH)
    rows = psql("select relname, coalesce(seq_tup_read,0)+coalesce(idx_tup_fetch,0), "
                "coalesce(seq_scan,0)+coalesce(idx_scan,0) from pg_stat_user_tables")
    out = {}
    for line in rows.splitlines():
        name, tup, scans = line.split("|")
        out[name] = (int(tup), int(scans))
    return out


def delta(a, b):
    return {k: (b[k][0] - a.get(k, (0, 0))[0], b[k][1] - a.get(k, (0, 0))[1])
            for k in b if b[k] != a.get(k, (0, 0))}


def get(path, token=TOKEN):
    req = urllib.request.Request(BASE + path, headers={"Authorization": "Bearer " + token})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers)


def one(q):
    return psql(q)


ids = {
    "lead": one("select id from leads order by created_at desc limit 1"),
    "order": one("select order_id from orders where order_id not like 'TEST-SIM-%' limit 1") or "PTEST-1013",
    "payout": one("select record_id from payouts limit 1") if psql("select 1 from information_schema.columns where table_name='payouts' and column_name='record_id'") else one("select id from payouts limit 1"),
    "sub": one("select id from sub_accounts limit 1"),
    "coupon": one("select code from coupons limit 1"),
    "event": one("select id from domain_events order by created_at limit 1"),
}
PATHS = [
    "/api/v1/sub-accounts", f"/api/v1/sub-accounts/{ids['sub']}",
    "/api/v1/leads", f"/api/v1/leads/{ids['lead']}", "/api/v1/leads?includeTest=true&limit=200",
    "/api/v1/orders", f"/api/v1/orders/{ids['order']}", "/api/v1/orders/TEST-SIM-demo-run-0",
    "/api/v1/payouts", f"/api/v1/payouts/{ids['payout']}",
    "/api/v1/dna-links", "/api/v1/medical-intake-links?sub=1", "/api/v1/care-service-links?sub=1",
    "/api/v1/care-services-coupons", f"/api/v1/care-services-coupons/{ids['coupon']}",
    "/api/v1/care-services-coupons?format=csv",
    "/api/v1/webhook-endpoints", "/api/v1/webhook-deliveries", "/api/v1/webhook-deliveries/by-hour",
    "/api/v1/webhook-deliveries/00000000-0000-4000-8000-000000000000",
    "/api/v1/events", f"/api/v1/events/{ids['event']}", "/api/v1/events?limit=200",
]


def run_all(n):
    """n requests per path, concurrently per path; returns {path: [status…]}."""
    res = {}
    with ThreadPoolExecutor(16) as ex:
        futs = {p: [ex.submit(get, p) for _ in range(n)] for p in PATHS}
        for p, fs in futs.items():
            res[p] = [f.result() for f in fs]
    return res


def show(title, d):
    tot = sum(v[0] for k, v in d.items() if k not in AUTH_TABLES)
    print(f"  {title}: partner-data tuples read {tot}; per table (tuples, scans): "
          + ", ".join(f"{k}={v}" for k, v in sorted(d.items())))
    return tot


time.sleep(float(os.environ.get("WARMUP", "60")))  # the demo's start-up work reads domain_events for ~30 s
print(f"== S-01 {LABEL} limit {LIMIT}/window, burst {BURST} per path, {len(PATHS)} paths")
# Groups share budgets, so the control request count per path is not LIMIT each: we spend
# until every path answers 429 and record how many were admitted.
s0 = snap()
admitted = 0
for _ in range(LIMIT * 4):
    r = run_all(1)
    codes = [c for v in r.values() for c, _ in v]
    admitted += sum(1 for c in codes if c == 200)
    if all(c == 429 for c in codes):
        break
s1 = snap()
control = show(f"control ({admitted} admitted requests, then 429s)", delta(s0, s1))

t = time.time()
r = run_all(BURST)
burst_secs = time.time() - t
codes = {}
retry = set()
for p, v in r.items():
    for c, h in v:
        codes[c] = codes.get(c, 0) + 1
        retry.add({k.lower(): v for k, v in h.items()}.get("retry-after"))
s2 = snap()
print(f"  burst: {sum(codes.values())} GETs in {burst_secs:.1f}s, statuses {codes}, Retry-After {sorted(x for x in retry if x)[:3]}")
burst = show("burst window", delta(s1, s2))
time.sleep(burst_secs)
s3 = snap()
idle = show("idle window (same length, no requests)", delta(s2, s3))
if os.environ.get("PER_PATH"):
    # Which path reads: one burst per path, counters around each.
    allp = PATHS
    last = s3
    for p in allp:
        if os.environ["PER_PATH"] != "all" and not any(w in p for w in os.environ["PER_PATH"].split(",")):
            continue
        a = last
        PATHS = [p]
        rr = run_all(BURST)
        last = snap()
        d = delta(a, last)
        show(f"{p} x{BURST} ({sorted(set(c for c, _ in rr[p]))})", d)
    PATHS = allp
bad = [p for p, v in r.items() if any(c != 429 for c, _ in v)]
if bad:
    print("  NOT 429:", bad)
# The worker's maintenance tick (every ~30 s: domain_events 81 tuples / 2 scans, webhook_deliveries
# 4 scans) and its claim polling (webhook_endpoints ~2 scans/s) land in any window; a read per
# 429 would add scans in proportion to the burst (here 690 requests).
bd, idd = delta(s1, s2), delta(s2, s3)
extra = {k: bd[k][1] - idd.get(k, (0, 0))[1] for k in bd if k not in AUTH_TABLES}
per_req = max(extra.values() or [0]) / max(1, sum(codes.values()))
verdict = "HOLDS" if per_req < 0.02 and not bad and control > 0 else "CHECK"
print(f"  verdict {LABEL}: {verdict} (partner-table scans beyond the idle window: {extra}; "
      f"{per_req:.3f} per over-budget request; control {control} tuples)")
