#!/usr/bin/env python3
"""The statements a request sent, from the lines of PostgreSQL's log (log_statement = all) on
stdin: those of database argv[1], with their parameters filled in, one a line, each ending in
`;`, ready for pgbench -f. Used by bench/reads.sh and bench/coupons.sh."""
import re, sys
db = sys.argv[1]
head = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \w+ \[(\d+)\] (?:(\S*)@(\S*) )?([A-Z]+):  (.*)$")
entries = []
for line in sys.stdin.read().split("\n"):
    m = head.match(line)
    if m:
        entries.append([m.group(3), m.group(4), m.group(5)])
    elif entries and line:
        entries[-1][2] += "\n" + line
out, last = [], None
for dbname, kind, text in entries:
    if dbname != db:
        continue
    if kind == "LOG":
        m = re.match(r"(?:execute [^:]+|statement): (.*)$", text, re.S)
        if m:
            last = m.group(1); out.append([last, {}])
    elif kind == "DETAIL" and out and text.startswith("parameters:"):
        for n, v in re.findall(r"\$(\d+) = (NULL|\x27(?:[^\x27]|\x27\x27)*\x27)", text):
            out[-1][1][n] = v
for sql, params in out:
    if re.match(r"SET (TIME ZONE|CLIENT_ENCODING|application_name)", sql):
        continue  # the setup of a new pool connection, not the request
    def fill(m):
        v = params.get(m.group(1), m.group(0))
        # A quoted integer in arithmetic ($1 + $2) would be `unknown + unknown`, which PostgreSQL
        # cannot resolve without the types the server bound: write it bare there.
        arith = re.match(r"\s*[-+*/]", sql[m.end():]) or re.search(r"[-+*/]\s*$", sql[:m.start()])
        if arith and re.fullmatch(r"'-?\d+'", v):
            return v.strip("'")
        return v
    sql = re.sub(r"\$(\d+)\b", fill, sql)
    print(sql.rstrip().rstrip(";") + ";")
