#!/usr/bin/env python3
"""Judges one a15_trickle.sh run (its out directory): for each delivery, its first receipt minus
max(due = created_at, write time from its uuid_v7), by phase (warm trickle; burst deliveries;
trickle written while the burst drained; trickle written 0-5 s after it drained; later trickle;
quiet single deliveries); stuck and duplicate receipts; the monitor's early markers and
invariant violations."""
import collections, sys

out = sys.argv[1]
ph = {}
for line in open(f"{out}/phases"):
    k, t = line.split()
    ph[k] = float(t)
recv = collections.defaultdict(list)
for line in open(f"{out}/recv.log"):
    p = line.split()
    if len(p) >= 3:
        recv[p[2]].append(float(p[0]))
dels = {}
for line in open(f"{out}/deliveries.txt"):
    i, st, ep, cr, att, burst = line.split()
    dels[i] = (st, float(cr), int(att), burst == "t")


def written(i):
    return int(i.replace("-", "")[:12], 16) / 1000.0


def phase(i, v):
    w = written(i)
    if v[3]:
        return "2 burst"
    if w < ph["burst"]:
        return "1 warm trickle"
    if w >= ph.get("quiet", 1e18):
        return "6 quiet singles"
    dr = ph.get("burst_drained")
    if dr is None:
        return "3 trickle"
    if w < dr:
        return "3 trickle during the burst's drain"
    if w < dr + 5:
        return "4 trickle 0-5 s after the drain"
    return "5 trickle later"


def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else 0


groups = collections.defaultdict(list)
missing = []
for i, v in dels.items():
    r = recv.get(i)
    if not r:
        missing.append(i)
        continue
    groups[phase(i, v)].append(min(r) - max(v[1], written(i)))
st = collections.Counter(v[0] for v in dels.values())
dup = sum(1 for i, r in recv.items() if len(r) > 1)
print(f"deliveries {len(dels)} {dict(st)}; never received {len(missing)}; received more than once {dup}")
if "burst_drained" in ph:
    print(f"burst drained {ph['burst_drained'] - ph['burst']:.2f} s after it was written")
for g in sorted(groups):
    xs = groups[g]
    print(f"  {g}: n {len(xs)} p50 {q(xs, .5)*1000:.1f} p90 {q(xs, .9)*1000:.1f} p99 {q(xs, .99)*1000:.1f} "
          f"max {max(xs)*1000:.1f} ms; > 0.1 s {sum(x > 0.1 for x in xs)}, > 0.5 s {sum(x > 0.5 for x in xs)}")
mon = []
for line in open(f"{out}/monitor.log"):
    p = line.split()
    if len(p) == 5 and p[0][0].isdigit():
        mon.append((float(p[0]), int(p[1]), int(p[2]), int(p[3]), int(p[4])))
viol = [m for m in mon if m[3]]
print(f"monitor: {len(mon)} snapshots, invariant violations {len(viol)}; markers max {max((m[1] for m in mon), default=0)}; "
      f"early markers (due, nothing due behind) max {max((m[2] for m in mon), default=0)}")
for k in ("burst_drained", "quiet"):
    if k in ph:
        after = [m for m in mon if ph[k] <= m[0] < ph[k] + 3]
        print(f"  early markers in the 3 s after {k}: " + " ".join(str(m[2]) for m in after[:30]))
