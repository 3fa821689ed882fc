#!/usr/bin/env bash
# Summarises what bench/webhooks-ab.sh kept with BENCH_AB_KEEP (and BENCH_AB_WAITS=1): for each
# case's server log taken with RUST_LOG=partner_webhooks=debug,partner_postgres=debug, where an
# attempt's time went (the per-attempt stamps: woke, claim, claimed, built, slot, checked, send,
# answered; p50/p90 in ms), the claim statement's time and rows, the share of the run the
# endpoints had 0-4 attempts in flight; and for each wait sample file, the share of samples per
# statement and wait event (`CPU`: active, waiting for nothing PostgreSQL reports).
# Usage: bash bench/webhooks-waits.sh DIR
set -euo pipefail
DIR=${1:?usage: webhooks-waits.sh DIR}
python3 - "$DIR" <<'PY'
import collections, glob, os, re, sys

d = sys.argv[1]
# Text logs (`key=123`) or JSON ones (`"key":123` or `"key":"123"`).
kv = re.compile(r'"?(\w+)"?[=:]"?(-?\d+)"?[,} ]')

def pct(xs, p):
    if not xs:
        return float('nan')
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]

for log in sorted(glob.glob(os.path.join(d, '*.server.log'))):
    name = os.path.basename(log)[:-len('.server.log')]
    attempts, claims = [], []
    for line in open(log, errors='replace'):
        if 'webhook attempt timings' in line:
            attempts.append({k: int(v) for k, v in kv.findall(line)})
        elif 'webhook claim statement' in line:
            f = {k: int(v) for k, v in kv.findall(line)}
            if 'claim_us' in f:
                claims.append(f)
    if not attempts:
        continue
    print(f'== {name}: {len(attempts)} attempts, {len(claims)} claims')
    stages = [('woke', 'claim'), ('claim', 'claimed'), ('claimed', 'built'), ('built', 'slot'),
              ('slot', 'send'), ('send', 'answered')]
    for a, b in stages:
        xs = [(x[b] - x[a]) / 1000 for x in attempts if a in x and b in x and x[a] > 0 and x[b] > 0]
        if xs:
            print(f'  {a:>8} -> {b:<8} p50 {pct(xs, .5):8.2f} ms  p90 {pct(xs, .9):8.2f} ms  n {len(xs)}')
    if claims:
        us = [c['claim_us'] / 1000 for c in claims]
        rows = [c.get('rows', 0) for c in claims]
        print(f'  claim statement p50 {pct(us, .5):.2f} ms p90 {pct(us, .9):.2f} ms; rows p50 {pct(rows, .5)}; '
              f'empty {sum(1 for r in rows if r == 0)}')
    # How many attempts were in flight (send..answered), as a share of the run.
    ev = []
    for x in attempts:
        if x.get('send') and x.get('answered'):
            ev.append((x['send'], 1))
            ev.append((x['answered'], -1))
    ev.sort()
    if ev:
        share = collections.Counter()
        n, t0 = 0, ev[0][0]
        for t, dlt in ev:
            share[min(n, 4)] += t - t0
            n += dlt
            t0 = t
        total = sum(share.values()) or 1
        print('  in flight: ' + ', '.join(f'{k}: {100 * share[k] / total:.0f} %' for k in range(5)))
        span = (ev[-1][0] - ev[0][0]) / 1e6
        print(f'  span {span:.2f} s, {len(attempts) / max(span, 1e-9):.0f} attempts/s')

for w in sorted(glob.glob(os.path.join(d, '*.waits'))):
    name = os.path.basename(w)[:-len('.waits')]
    c = collections.Counter()
    ticks = set()
    for line in open(w, errors='replace'):
        p = line.rstrip('\n').split('|')
        if len(p) < 7:
            continue
        ticks.add(int(float(p[0]) * 100))
        q = p[6]
        q = re.sub(r'^WITH busy.*', 'CLAIM', q)
        q = re.sub(r'^SELECT EXISTS \(SELECT 1 FROM webhook_endpoints.*', 'CHECK', q)
        q = re.sub(r'^WITH l AS.*', 'EVENT (pgbench)', q)
        c[(q[:40], p[3], p[4] + ':' + p[5])] += 1
    if not c:
        continue
    n = max(len(ticks), 1)
    print(f'== waits {name}: {n} samples (per sample: backends in each state)')
    for (q, st, ev), k in c.most_common(14):
        print(f'  {k / n:6.2f}  {st:<20} {ev:<28} {q}')
PY
