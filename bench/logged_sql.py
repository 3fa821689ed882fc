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
    sql = re.sub(r"\$(\d+)\b", lambda m: params.get(m.group(1), m.group(0)), sql)
    print(sql.rstrip().rstrip(";") + ";")
