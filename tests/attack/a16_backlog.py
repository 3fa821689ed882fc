#!/usr/bin/env python3
"""attack16: endpoint changes against a BACKLOG (issue 23, N9b'', with fe92e2b's shared check
answers: an attempt that asks within 2.5 ms of the start of its endpoint's last row read takes
that read's answer, and is sent only if its slot comes within 5 ms of that start).

K endpoints of the demo partner, each with a backlog seeded straight into the outbox (N leads,
events and deliveries per endpoint and round, one SQL statement, then a NOTIFY), drained by the
server under test to a receiver that answers at once. While each backlog flows, every endpoint
gets CHANGES changes GAP s apart (jittered), from one thread per endpoint:
  rotate  {secret:true}
  header  {secret:true, customHeader:{X-A16: h<i>}}
  move    {url: next version, secret:true, expirePrevious:true}
then `disable` {enabled:false} (its pending deliveries end failed), a pause, and `enable`
{enabled:true, secret:true}. After the last round one more backlog, then `delete`.
Before the rounds, a plain drain of DRAIN deliveries per endpoint (no change) for the rate.

Every change except disable and delete returns a new secret, so a16_judge.py can tell the state
of the endpoint each delivery was made with (the highest-numbered returned secret that signs it)
and how long after the answer of the next change (the one it missed) it arrived.
Env: BASE TOKEN ITOKEN RECV_LOG RECV_PORT RECV_MODE, DB (its database), K, ROUNDS, N, CHANGES,
GAP, DRAIN, FLOW (s between seeding and the first change), PAUSE (s disabled)."""
import json, os, random, subprocess, sys, threading, time, uuid
sys.path.insert(0, os.path.dirname(__file__))
import s05  # noqa: E402

K, ROUNDS, N = int(os.environ.get("K", "2")), int(os.environ.get("ROUNDS", "6")), int(os.environ.get("N", "1500"))
CHANGES, GAP = int(os.environ.get("CHANGES", "8")), float(os.environ.get("GAP", "0.05"))
DRAIN, FLOW, PAUSE = int(os.environ.get("DRAIN", "3000")), float(os.environ.get("FLOW", "0.4")), float(os.environ.get("PAUSE", "0.4"))
DB = os.environ["DB"]
RECV_PORT = s05.RECV_PORT
open(os.environ["RECV_MODE"], "w").write("200")
run = uuid.uuid4().hex[:6]
KINDS = ["rotate", "rotate", "header", "move"]


def psql(sql):
    subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", DB, "-qAt", "-v", "ON_ERROR_STOP=1", "-c", sql],
                   check=True, stdout=subprocess.DEVNULL)


def seed(ids, n):
    """n deliveries for each endpoint of `ids` (enabled ones), as the outbox writes them."""
    arr = "{" + ",".join(ids) + "}"
    psql(f"""
WITH l AS (
  INSERT INTO leads (id, partner_id, first_name, last_name, email, email_consent, phone, sms_consent,
    origin, location, is_test, created_at, updated_at)
  SELECT gen_random_uuid(), 'demo-clinic', 'Ann', 'Lee', 'ann@example.com', true, '+1 555 0100', true,
    'managed-website', 'Austin, TX', false, clock_timestamp(), clock_timestamp()
  FROM generate_series(1, {n}) g
  RETURNING id, partner_id, created_at),
ev AS (
  INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at)
  SELECT uuid_v7(), partner_id, 'lead.created', id::text, '{{}}', created_at FROM l
  RETURNING id, partner_id, created_at)
INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, attempts, next_attempt_at, created_at)
SELECT uuid_v7(), w.id, w.partner_id, ev.id, 'lead.created', 'pending', 0, ev.created_at, ev.created_at
FROM ev JOIN webhook_endpoints w ON w.id = ANY('{arr}'::uuid[]) AND w.disabled_at IS NULL;
SELECT pg_notify('webhook_deliveries', '');""")


def received():
    with open(s05.RECV_LOG) as f:
        return sum(1 for _ in f)


eps = []  # (id, timeline: [[sent, answered, kind, url, secret|None, header|None]], url version)
for k in range(K):
    url = f"https://127.0.0.1:{RECV_PORT}/bl-{run}-{k}-v0"
    t0 = time.time()
    st, j = s05.api("POST", "/api/v1/webhook-endpoints", {"url": url, "events": ["lead.created"], "secret": True,
                                                          "customHeader": {"name": "X-A16", "value": "h0"}})
    assert st == 201, (st, j)
    eps.append([j["data"]["id"], [[t0, time.time(), "create", url, j["data"]["secret"], "h0"]], 0])
ids = [e[0] for e in eps]

# The plain drain: its rate, and the reads the checks made for it.
t = time.time()
seed(ids, DRAIN)
seeded = time.time() - t
end = time.time() + 120
while received() < K * DRAIN and time.time() < end:
    time.sleep(0.2)
recs = [json.loads(l) for l in open(s05.RECV_LOG)]
ts = sorted(r["t"] for r in recs)
if len(ts) > 1:
    print(f"   drain: {len(ts)} of {K * DRAIN} delivered in {ts[-1] - ts[0]:.2f} s (first to last): "
          f"{(len(ts) - 1) / (ts[-1] - ts[0]):.0f}/s (seeding took {seeded:.2f} s)")
json.dump({"drain_end": time.time()}, open(s05.RECV_LOG + ".drain.json", "w"))


def change(e, kind, i):
    body = {"rotate": {"secret": True},
            "header": {"secret": True, "customHeader": {"name": "X-A16", "value": f"h{i}"}},
            "move": {"secret": True, "expirePrevious": True},
            "disable": {"enabled": False},
            "enable": {"enabled": True, "secret": True}}.get(kind)
    if kind == "move":
        e[2] += 1
        body["url"] = f"https://127.0.0.1:{RECV_PORT}/bl-{run}-{ids.index(e[0])}-v{e[2]}"
    sent = time.time()
    if kind == "delete":
        st, j = s05.api("DELETE", f"/api/v1/webhook-endpoints/{e[0]}")
        answered = time.time()
        assert st == 200, (st, j)
        e[1].append([sent, answered, kind, e[1][-1][3], None, e[1][-1][5]])
        return
    st, j = s05.api("PATCH", f"/api/v1/webhook-endpoints/{e[0]}", body)
    answered = time.time()
    assert st == 200, (kind, st, j)
    header = body.get("customHeader", {}).get("value", e[1][-1][5])
    e[1].append([sent, answered, kind, j["data"]["url"], j["data"].get("secret"), header])


def sequence(e, r):
    for c in range(CHANGES):
        time.sleep(GAP * random.uniform(0.5, 1.5))
        change(e, KINDS[(c + r) % len(KINDS)], 100 * r + c)
    time.sleep(GAP * random.uniform(0.5, 1.5))
    change(e, "disable", 0)


def all_at_once(fn, *args):
    th = [threading.Thread(target=fn, args=(e,) + args) for e in eps]
    [x.start() for x in th]; [x.join() for x in th]


changes = 0
for r in range(1, ROUNDS + 1):
    seed(ids, N)
    time.sleep(FLOW)
    all_at_once(sequence, r)
    changes += K * (CHANGES + 1)
    time.sleep(PAUSE)
    all_at_once(lambda e: change(e, "enable", 0))
    changes += K
    time.sleep(0.3)
seed(ids, N)
time.sleep(FLOW)
all_at_once(lambda e: change(e, "delete", 0))
changes += K
time.sleep(3)
json.dump([tl for _, tl, _ in eps], open(s05.RECV_LOG + ".timeline.json", "w"))
print(f"   {changes} changes on {K} endpoints in {ROUNDS} rounds (+ the delete); {received()} deliveries received")
