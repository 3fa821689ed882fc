#!/usr/bin/env python3
"""Judges n9e_many.py's deliveries: n9e_judge.py RECV_LOG [SLACK]. Reads RECV_LOG.timeline.json
(per endpoint k: [answered, kind, url, secret] per change, the first being the creation) and
every delivery whose path is /many-<run>-<k>-v<n>. A delivery arriving at t is judged against the
changes answered before t - SLACK ("answered"); a change answered later may already have
committed, so a delivery as the endpoint is after one of those is fine:
  - old URL: its version n is below the latest answered URL's;
  - erased secret: a secret returned before the latest answered expirePrevious signs it;
  - unsigned: it is not signed with every secret the latest answered state has (the latest
    returned, and the one before it when the latest was a plain rotation), nor with any secret
    returned by a change answered after t - SLACK."""
import json, os, re, sys
sys.path.insert(0, os.path.dirname(__file__))
os.environ.setdefault("BASE", ""); os.environ.setdefault("TOKEN", ""); os.environ.setdefault("ITOKEN", "")
os.environ.setdefault("RECV_LOG", sys.argv[1]); os.environ.setdefault("RECV_PORT", "0")
import s05  # noqa: E402

log, slack = sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 0.05
tls = json.load(open(log + ".timeline.json"))
recs = [json.loads(l) for l in open(log)]
ver = lambda u: int(re.search(r"-v(\d+)$", u).group(1))
n = old_url = unsigned = erased = 0
leaked = set()
for k, tl in enumerate(tls):
    tl = sorted(tl)
    run = re.search(r"/many-(\w+)-", tl[0][2]).group(1)
    for rec in recs:
        if not rec["path"].startswith(f"/many-{run}-{k}-v"):
            continue
        before = [c for c in tl if c[0] < rec["t"] - slack]
        later = [c for c in tl if c[0] >= rec["t"] - slack]
        if len(before) < 2:
            continue
        n += 1
        last, why = before[-1], []
        if ver(rec["path"]) < ver(last[2]):
            old_url += 1; why.append("old URL")
        exp = [i for i, c in enumerate(before) if c[1] == "move+expire"]
        if exp and any(s05.signs(rec, c[3])[0] for c in before[:exp[-1]]):
            erased += 1; why.append("an erased secret signs")
        must = [last[3]] + ([before[-2][3]] if last[1] == "rotate" else [])
        if not all(s05.signs(rec, s)[0] for s in must) and not any(s05.signs(rec, c[3])[0] for c in later):
            unsigned += 1; why.append("a returned secret does not sign")
        if why:
            leaked.add((k, last[0]))
            print(f"    endpoint {k}: +{rec['t'] - last[0]:.3f}s after {last[1]} answered: {', '.join(why)} ({rec['path']}, latest {last[2].rsplit('/', 1)[1]})")
changes = sum(len(tl) - 1 for tl in tls)
print(f"TOTAL {changes} changes on {len(tls)} endpoints, {n} deliveries after a change: {len(leaked)} changes leaked; "
      f"{old_url} to an old URL, {unsigned} not signed with a returned secret, {erased} signed with an erased one")
