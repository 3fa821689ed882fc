#!/usr/bin/env python3
"""attack13: how late each delivery of n9e_many.py is, exactly. a13_judge.py RECV_LOG [MS...]
Every change of n9e_many.py returns a new secret (s_0 at the creation, s_i at change i), and a
delivery made with the endpoint at state j is signed with s_j (and s_{j-1} during a rotation's
overlap). Its state is the highest j whose secret signs it (its URL version is checked to agree);
when change j+1 was answered (the PATCH returned) at A before the delivery arrived at t, the
delivery is late by t - A: it left with the endpoint as it was before a change answered t - A
earlier (n9e_judge.py measures from the latest change instead, which understates this when
changes come faster than the deliveries). Prints the count late, the worst, and the count past
each MS threshold (default 5 10 20 50)."""
import json, os, re, sys
sys.path.insert(0, os.path.dirname(__file__))
for k in ("BASE", "TOKEN", "ITOKEN", "RECV_PORT"):
    os.environ.setdefault(k, "0" if k == "RECV_PORT" else "")
os.environ.setdefault("RECV_LOG", sys.argv[1])
import s05  # noqa: E402

log = sys.argv[1]
marks = [float(x) for x in sys.argv[2:]] or [5, 10, 20, 50]
tls = json.load(open(log + ".timeline.json"))
recs = [json.loads(l) for l in open(log)]
ver = lambda u: int(re.search(r"-v(\d+)$", u).group(1))
late, n, unmatched, mismatched = [], 0, 0, 0
for k, tl in enumerate(tls):
    tl = sorted(tl)
    run = re.search(r"/many-(\w+)-", tl[0][2]).group(1)
    pre = f"/many-{run}-{k}-v"
    for rec in recs:
        if not rec["path"].startswith(pre):
            continue
        n += 1
        j = max((i for i, c in enumerate(tl) if s05.signs(rec, c[3])[0]), default=None)
        if j is None:
            unmatched += 1
            continue
        if ver(rec["path"]) != ver(tl[j][2]):
            mismatched += 1
        if j + 1 < len(tl) and tl[j + 1][0] < rec["t"]:
            did = [v for h, v in rec["headers"] if h.lower() == "x-partner-delivery"]
            late.append((1000 * (rec["t"] - tl[j + 1][0]), k, tl[j + 1][1], rec["path"], did[0] if did else None, tl[j + 1][0]))
late.sort(reverse=True)
print(f"a13_judge: {n} deliveries; {len(late)} late (left as the endpoint was before an answered change); "
      f"worst {late[0][0]:.1f} ms" if late else f"a13_judge: {n} deliveries; 0 late", end="")
print("; " + ", ".join(f"> {m:g} ms: {sum(1 for x in late if x[0] > m)}" for m in marks)
      + f"; {unmatched} signed by no returned secret, {mismatched} URL not the signing state's")
# With the worker's log at debug (SERVER_LOG, RUST_LOG=...,partner_webhooks::worker=debug), each
# late delivery's time is split: the claim statement's ask (`claim`, unix us; the claim's read is
# at most this old), the slot and the send, and the receiver's arrival, relative to the missed
# change's answer (negative: before the answer).
timings = {}
if os.environ.get("SERVER_LOG"):
    for line in open(os.environ["SERVER_LOG"], errors="replace"):
        if "webhook attempt timings" in line:
            j = json.loads(line)
            timings[j["delivery"]] = j
for x in late[:int(os.environ.get("SHOW", "5"))]:
    print(f"    +{x[0]:.1f} ms after {x[2]} of endpoint {x[1]} ({x[3]})")
    t = timings.get(x[4])
    if t:
        ans = x[5]
        f = lambda k: (int(t[k]) / 1e6 - ans) * 1000
        print(f"      relative to that answer (ms): claim asked {f('claim'):+.1f}, claimed {f('claimed'):+.1f}, "
              f"slot {f('slot'):+.1f}, send {f('send'):+.1f}, arrival {x[0]:+.1f}")
