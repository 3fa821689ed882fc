#!/usr/bin/env python3
"""attack16: judges a16_backlog.py's deliveries. a16_judge.py RECV_LOG [MS...]
Change i of an endpoint (i = 0 its creation) returns secret s_i, except disable and delete
(None). A delivery's state is the highest i whose s_i signs it (X-Partner-Signature and, for
whsec_, webhook-signature); its URL version and X-A16 header must be those of that state. When
the next change after that state (i+1, of any kind) was answered at A before the delivery arrived
at t, the delivery is LATE by t - A: it left with the endpoint as it was before a change whose
answer the client had t - A earlier (an old secret or URL or header, or sent after a disable or a
delete). Prints the count late, the worst, the count past each MS (default 5 10 20 50), by the
kind of the missed change, and (with SERVER_LOG at partner_webhooks::worker=debug) each of the
SHOW worst split into the claim's ask, the slot and the send stamp relative to that answer."""
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
late, n, unmatched, bad_url, bad_header = [], 0, 0, 0, 0
kinds = {}
for k, tl in enumerate(tls):
    run = re.search(r"/bl-(\w+)-", tl[0][3]).group(1)
    pre = f"/bl-{run}-{k}-v"
    secrets = [(i, c[4]) for i, c in enumerate(tl) if c[4]]
    for rec in recs:
        if not rec["path"].startswith(pre):
            continue
        n += 1
        j = None
        for i, s in reversed(secrets):
            if s05.signs(rec, s)[0]:
                j = i
                break
        if j is None:
            unmatched += 1
            continue
        if ver(rec["path"]) != ver(tl[j][3]):
            bad_url += 1
        h = [v for hh, v in rec["headers"] if hh.lower() == "x-a16"]
        if h != [tl[j][5]]:
            bad_header += 1
        if j + 1 < len(tl) and tl[j + 1][1] < rec["t"]:
            did = [v for hh, v in rec["headers"] if hh.lower() == "x-partner-delivery"]
            late.append((1000 * (rec["t"] - tl[j + 1][1]), k, tl[j + 1][2], rec["path"], did[0] if did else None, tl[j + 1][1]))
            kinds[tl[j + 1][2]] = kinds.get(tl[j + 1][2], 0) + 1
late.sort(reverse=True)
changes = sum(len(tl) - 1 for tl in tls)
print(f"a16_judge: {changes} changes, {n} deliveries; {len(late)} late"
      + (f", worst {late[0][0]:.1f} ms; " + ", ".join(f"> {m:g} ms: {sum(1 for x in late if x[0] > m)}" for m in marks)
         + "; missed: " + ", ".join(f"{a} {b}" for a, b in sorted(kinds.items())) if late else "")
      + f"; {unmatched} signed by no returned secret, {bad_url} URL not the state's, {bad_header} header not the state's")
if os.environ.get("ALL"):
    print("   late (ms): " + " ".join(f"{x[0]:.1f}" for x in late))
timings = {}
if os.environ.get("SERVER_LOG"):
    for line in open(os.environ["SERVER_LOG"], errors="replace"):
        if "webhook attempt timings" in line:
            try:
                j = json.loads(line)
            except ValueError:
                continue
            timings[j.get("delivery") or j.get("fields", {}).get("delivery")] = j.get("fields", j)
# The worker's send stamp (taken after the gate, just before the request is built and written)
# relative to the missed change's answer: > 0 means the worker decided to send after the client
# had the answer; the rest of the lateness is the way to the receiver (and its logging).
rel = [(int(timings[x[4]]["send"]) / 1e6 - x[5]) * 1000 for x in late if x[4] in timings]
if rel:
    rel.sort()
    print(f"   send stamps of the {len(rel)} late with timings, relative to the missed answer: max {rel[-1]:+.1f} ms, "
          f"median {rel[len(rel) // 2]:+.1f} ms; after the answer: {sum(1 for r in rel if r > 0)}, "
          f"> +2 ms: {sum(1 for r in rel if r > 2)}, > +5 ms: {sum(1 for r in rel if r > 5)}")
for x in late[:int(os.environ.get("SHOW", "5"))]:
    print(f"    +{x[0]:.1f} ms after {x[2]} of endpoint {x[1]} ({x[3]})")
    t = timings.get(x[4])
    if t:
        f = lambda key: (int(t[key]) / 1e6 - x[5]) * 1000
        print(f"      relative to that answer (ms): claim asked {f('claim'):+.1f}, claimed {f('claimed'):+.1f}, "
              f"slot {f('slot'):+.1f}, send {f('send'):+.1f}, arrival {x[0]:+.1f}")
