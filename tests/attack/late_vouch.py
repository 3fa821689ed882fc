#!/usr/bin/env python3
"""attack6: late_vouch.py SERVER_LOG... -- from a JSON server log with
RUST_LOG=...,partner_webhooks::checks=trace, how many endpoint-row checks vouched (answered in
time by the code's test) although more than 50 ms passed between their ask and the moment the
answer was taken (the `us` field of "a webhook endpoint's row check answered"), and the largest."""
import json, sys
for path in sys.argv[1:]:
    n = late = 0; worst = 0
    for line in open(path, errors="replace"):
        if "row check answered\"" not in line:
            continue
        try:
            r = json.loads(line)
        except ValueError:
            continue
        us = int(r.get("us", r.get("fields", {}).get("us", 0)))
        n += 1; late += us > 50000; worst = max(worst, us)
    print(f"{path.rsplit('/', 1)[-1]}: {n} checks vouched, {late} of them taken >50 ms after asked, worst {worst / 1000:.1f} ms")
