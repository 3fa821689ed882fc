#!/usr/bin/env python3
"""N9c: the endpoint-row check is made before the connection, not before the request. The old
URL's owner (slowtls.py: every TLS handshake held HOLD s, one answer per connection) stretches the
time between the check and the request's arrival; a change answered meanwhile is too late.
For each kind (move, disable, rotation with expirePrevious) TRIALS times: a fresh endpoint on the
hostile receiver, 4 leads, LEAD s later the change; then counts the deliveries that reached the
old URL after the change's answer (+SLACK), and for the rotation those signed with the erased
secret / not with the returned one.
attack6: KINDS may hold "none" (a control: no change; every delivery should reach the old URL),
LEAD_JITTER=<s> adds a random 0-s to LEAD (a change timed around the held handshake's end),
SLACK may be 0 or negative; each late delivery's offset is printed; for a move, the deliveries
that reached the new URL within the wait are counted (availability).
Env: BASE TOKEN ITOKEN, OLD_PORT (slowtls.py), NEW_PORT (receiver.py), OLD_LOG, RECV_LOG."""
import json, os, random, sys, time, uuid
sys.path.insert(0, os.path.dirname(__file__))
import s05  # noqa: E402

OLD_PORT, NEW_PORT, OLD_LOG = int(os.environ["OLD_PORT"]), int(os.environ["NEW_PORT"]), os.environ["OLD_LOG"]
TRIALS, LEAD = int(os.environ.get("TRIALS", "3")), float(os.environ.get("LEAD", "1.0"))
HOLD, SLACK = float(os.environ.get("HOLD", "3")), float(os.environ.get("SLACK", "0.05"))
total = {}
for kind in os.environ.get("KINDS", "move disable expire").split():
    for trial in range(TRIALS):
        tag = f"{kind}{trial}-{uuid.uuid4().hex[:6]}"
        st, j = s05.api("POST", "/api/v1/webhook-endpoints",
                        {"url": f"https://127.0.0.1:{OLD_PORT}/old-{tag}", "events": ["lead.created"], "secret": True})
        ep, s0 = j["data"]["id"], j["data"]["secret"]
        for i in range(4):
            s05.ingest(f"tls{i}-{tag}")
        time.sleep(LEAD + random.uniform(0, float(os.environ.get("LEAD_JITTER", "0"))))
        if kind == "none":
            answered, st, s1 = time.time(), "-", None
            time.sleep(HOLD + 3)
            got = sum(1 for line in open(OLD_LOG) if f"/old-{tag}" in json.loads(line)["path"])
            print(f"none trial {trial}: no change; {got} of 4 deliveries reached the (slow) URL within {HOLD + 3:.0f}s")
            t = total.setdefault(kind, [0, 0, 0]); t[0] += 1; t[2] += got
            s05.api("DELETE", f"/api/v1/webhook-endpoints/{ep}")
            continue
        body = {"url": f"https://127.0.0.1:{NEW_PORT}/new-{tag}"} if kind == "move" else \
            {"enabled": False} if kind == "disable" else {"secret": True, "expirePrevious": True}
        st, j = s05.api("PATCH", f"/api/v1/webhook-endpoints/{ep}", body)
        answered = time.time()
        s1 = j["data"].get("secret") if isinstance(j, dict) and "data" in j else None
        time.sleep(HOLD + 3)
        late = bad = 0
        for line in open(OLD_LOG):
            rec = json.loads(line)
            if f"/old-{tag}" not in rec["path"] or rec["t"] < answered + SLACK:
                continue
            late += 1
            note = f"accepted {rec['accepted'] - answered:+.2f}s"
            if kind == "expire":
                if s05.signs(rec, s0)[0] or not s05.signs(rec, s1)[0]:
                    bad += 1
                    note += f", erased secret signs: {s05.signs(rec, s0)[0]}, returned signs: {s05.signs(rec, s1)[0]}"
            print(f"    {tag}: +{rec['t'] - answered:.2f}s after the answer ({note})")
        leak = bad if kind == "expire" else late
        extra = ""
        if kind == "move":
            extra = f"; {sum(1 for line in open(os.environ['RECV_LOG']) if f'/new-{tag}' in json.loads(line)['path'])} of 4 reached the new URL"
        if kind == "expire":
            extra = f"; {sum(1 for line in open(OLD_LOG) if f'/old-{tag}' in json.loads(line)['path'])} deliveries in all"
        print(f"{kind} trial {trial}: PATCH {st}; {late} deliveries reached the old URL after the answer; leaks {leak}{extra}")
        t = total.setdefault(kind, [0, 0, 0]); t[0] += 1; t[1] += leak > 0; t[2] += leak
        s05.api("DELETE", f"/api/v1/webhook-endpoints/{ep}")
for k, (n, c, d) in total.items():
    if k == "none":
        print(f"TOTAL none (control): {d} of {4 * n} deliveries reached the slow URL")
    else:
        print(f"TOTAL {k}: {c} of {n} changes leaked, {d} deliveries")
