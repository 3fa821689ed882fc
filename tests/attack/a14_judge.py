#!/usr/bin/env python3
"""Judges one a14_marker.sh run (its out directory): stuck deliveries, the monitor's invariant
violations, duplicates among 200 receipts, and late attempts (first attempt after its due time,
retries after their 1 s backoff), with the excused ones (resent, on an endpoint disabled during
the run, in flight at the worker's kill) counted apart."""
import collections, json, sys, statistics

out = sys.argv[1]
recv = collections.defaultdict(list)
for line in open(f"{out}/recv.log"):
    p = line.split()
    if len(p) >= 3:
        recv[p[2]].append((float(p[0]), int(p[1])))
dels = {}
for line in open(f"{out}/deliveries.txt"):
    i, st, ep, cr, nx, att, _ = line.rstrip("\n").split(" ")
    dels[i] = (st, ep, float(cr), att)
drive = json.load(open(f"{out}/drive.json"))
kill = [float(line.split()[1]) for line in open(f"{out}/kill") if line.startswith("kill")]
kill = kill[0] if kill else None
resent = {d for _, d in drive["resends"]}
disabled_eps = {e for _, _, e, *_ in drive["disables"]}
mon = [line.split(" ", 4) for line in open(f"{out}/monitor.log") if line[:1].isdigit()]
final = open(f"{out}/final_monitor").read().split(" ", 4)


def uuid7_s(i):
    h = i.replace("-", "")
    return int(h[:12], 16) / 1000.0


def excused(i):
    if i in resent:
        return "resent"
    if i in dels and dels[i][1] in disabled_eps:
        return "disabled"
    if kill and any(kill - 3 <= t <= kill + 0.5 for t, _ in recv.get(i, [])):
        return "kill"
    return None


st = collections.Counter(v[0] for v in dels.values())
print(f"deliveries {len(dels)}: {dict(st)}; receipts {sum(len(v) for v in recv.values())} "
      f"(200: {sum(1 for v in recv.values() for _, s in v if s == 200)})")
viol = [m for m in mon if int(m[1]) or int(m[2])]
print(f"monitor: {len(mon)} snapshots, max pending {max((int(m[3]) for m in mon), default=0)}, "
      f"with a violation {len(viol)} (no marker max {max((int(m[1]) for m in mon), default=0)}, "
      f"below its marker max {max((int(m[2]) for m in mon), default=0)}); final {' '.join(final[:4])}")
for m in viol[:5]:
    print("  VIOLATION", " ".join(m)[:400])
stuck = [i for i, v in dels.items() if v[0] == "pending"]
print(f"stuck (pending at the end): {len(stuck)} {stuck[:5]}")
never = [i for i, v in dels.items() if v[0] == "delivered" and not any(s == 200 for _, s in recv.get(i, []))]
print(f"delivered but no 200 receipt: {len(never)}")
dups = collections.Counter()
dup_ids = []
for i, v in recv.items():
    if sum(1 for _, s in v if s == 200) > 1:
        e = excused(i) or "UNEXCUSED"
        dups[e] += 1
        if e == "UNEXCUSED":
            dup_ids.append(i)
print(f"duplicate 200 receipts: {dict(dups)} {dup_ids[:5]}")
first, gaps = [], []
late = collections.Counter()
worst = []
for i, v in recv.items():
    if i not in dels or excused(i):
        continue
    v.sort()
    due = max(dels[i][2], uuid7_s(i))
    f = v[0][0] - due
    first.append(f)
    if f > 1.5:
        worst.append((f, "first", i))
    for (t1, s1), (t2, _) in zip(v, v[1:]):
        if s1 == 500:
            g = t2 - t1
            gaps.append(g)
            if g > 1.1 + 1.0 + 0.1:
                worst.append((g, "retry", i))


def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else 0


print(f"first attempt after due: n {len(first)} p50 {q(first, .5):.3f} p99 {q(first, .99):.3f} "
      f"max {max(first, default=0):.3f} s; >1.5 s {sum(f > 1.5 for f in first)}")
print(f"retry gap after a 500 (schedule 1 s +-10%): n {len(gaps)} p50 {q(gaps, .5):.3f} "
      f"p99 {q(gaps, .99):.3f} max {max(gaps, default=0):.3f} s; >2.2 s {sum(g > 2.2 for g in gaps)}")
for w in sorted(worst, reverse=True)[:5]:
    print("  LATE", f"{w[0]:.3f}", w[1], w[2], dels[w[2]][:2])
print("drive:", {k: (len(v) if isinstance(v, list) else v) for k, v in drive.items()}, "errors:", drive["errors"][:3])
