#!/usr/bin/env python3
"""attack6: late_vouch.py SERVER_LOG... -- from a JSON server log with
RUST_LOG=...,partner_webhooks::checks=trace, how many endpoint-row checks vouched (answered in
time by the code's test) although more than 50 ms passed (the `us` field of "a webhook endpoint's
row check answered"), and the largest. Up to e5ecfe4 `us` is ask -> answer taken; from lead2
(fd244a4) it is the answer's age: its read's start -> taken (attack7), so >50 ms there would mean
the code's own test let it through. attack7 adds the 99th percentile and the count above 40 ms."""
import json, sys
for path in sys.argv[1:]:
    ages = []
    for line in open(path, errors="replace"):
        if "row check answered\"" not in line:
            continue
        try:
            r = json.loads(line)
        except ValueError:
            continue
        ages.append(int(r.get("us", r.get("fields", {}).get("us", 0))))
    ages.sort(); n = len(ages)
    late = sum(a > 50000 for a in ages); worst = ages[-1] if ages else 0
    p99 = ages[min(n - 1, int(n * 0.99))] if ages else 0
    print(f"{path.rsplit('/', 1)[-1]}: {n} checks vouched, {late} of them taken >50 ms after asked, worst {worst / 1000:.1f} ms, p99 {p99 / 1000:.1f} ms, {sum(a > 40000 for a in ages)} above 40 ms")
