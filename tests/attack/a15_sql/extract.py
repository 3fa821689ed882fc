#!/usr/bin/env python3
"""attack15: prints a Rust `const NAME: &str = "...";` string of claim.rs as SQL.

  extract.py FILE NAME [--pgbench] [--instr] [--nap SECONDS]

--pgbench (CLAIM_SQL only): the statement for a pgbench worker turn, as the server runs it
(prepared, `-M prepared`): $1 :now, $2 :lu (set by the turn's first command), $3/$4 empty
(no busy endpoints), $5 :room, $6 :batch, $7 1000; the final SELECT wrapped in a CTE `res`
that logs every claimed row (a15_claims) and sums the result in one row for \\gset (ids, toks,
stale, trailing, n). --instr also logs `picked` (a15_picked: id, tid): that references picked a
second time (materialized, as main's `ANY(ARRAY(SELECT id FROM picked))` did). --nap S sleeps S
seconds after the statement's snapshot, before any row is locked (a MATERIALIZED CTE `ep`
depends on): for the deterministic race of a15_skip.sh.
"""
import re, sys

path, name = sys.argv[1], sys.argv[2]
src = open(path).read()
m = re.search(r'const ' + name + r': &str = "((?:[^"\\]|\\.)*)";', src, re.S)
if not m:
    sys.exit(f"{name} not found in {path}")
s = re.sub(r'\\\n\s*', '', m.group(1)).replace('\\"', '"')
if "--pgbench" not in sys.argv:
    print(s)
    sys.exit()
nap = None
if "--nap" in sys.argv:
    nap = sys.argv[sys.argv.index("--nap") + 1]
subst = {"$1": ":now", "$2": ":lu", "$3": "'{}'", "$4": "'{}'", "$5": ":room", "$6": ":batch", "$7": "1000"}
s = re.sub(r'\$[1-7](?![0-9])', lambda x: subst[x.group(0)], s)
# the final SELECT (after the last CTE, `visits`) becomes the CTE `res`
cut = s.index("FROM ep LEFT JOIN got ON got.endpoint_id = ep.id) ") + len("FROM ep LEFT JOIN got ON got.endpoint_id = ep.id)")
head, final = s[:cut], s[cut:].strip()
if nap:
    head = head.replace("ep AS MATERIALIZED ( ", f"nap AS MATERIALIZED (SELECT pg_sleep({nap}) AS z), ep AS MATERIALIZED ( ", 1)
    head = head.replace("WHERE q.due_at <= :now AND", "WHERE (SELECT z FROM nap) IS NOT NULL AND q.due_at <= :now AND", 1)
    assert "nap)" in head
extra = ""
if "--instr" in sys.argv:
    tid = "tid::text" if "p.tid" in s else "NULL"
    extra += (", pk AS (INSERT INTO a15_picked (id, tid, at, pid, xid) SELECT id, @TID@, clock_timestamp(), pg_backend_pid(), txid_current() FROM picked)").replace("@TID@", tid)
out = (head + ", res AS (" + final + ")" + extra +
       ", lg AS (INSERT INTO a15_claims (id, endpoint_id, lease, attempts, now, lu, at, pid, xid) "
       "SELECT id, endpoint_id, lease_token, attempts, :now, :lu, clock_timestamp(), pg_backend_pid(), txid_current() FROM res WHERE id IS NOT NULL) "
       "SELECT COALESCE((SELECT array_agg(id) FROM res WHERE id IS NOT NULL), '{}') AS ids, "
       "COALESCE((SELECT array_agg(lease_token) FROM res WHERE id IS NOT NULL), '{}') AS toks, "
       "(SELECT stale FROM res WHERE stale IS NOT NULL) AS stale, "
       "(SELECT r.\"trailing\" FROM res r WHERE r.stale IS NOT NULL) AS \"trailing\", "
       "(SELECT count(*) FROM res WHERE id IS NOT NULL) AS n")
print(out)
