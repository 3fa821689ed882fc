#!/usr/bin/env bash
# Soak (issue 22, item 4): mixed load at about half the machine's capacity on a database of
# bench/dataset.sh, for SOAK_MINUTES (default 30), reported minute by minute.
# Load (wrk, each connection paced by a delay, so the rates hold whatever the latency):
#   leads       the big partner's leads: first page, pages 10, 100 and 1,000 in turn (SOAK_LEADS_RPS, 500)
#   deliveries  its delivery log: first page and page 100 in turn                 (SOAK_LOG_RPS, 250)
#   orders      the orders of a small partner (ds-2, ~150 orders)                  (SOAK_ORDERS_RPS, 100)
#   ingest      operator lead ingest for the big partner, each lead fanned out to its 10
#               endpoints                                                          (SOAK_INGEST_RPS, 60)
# Receiver: nginx (bench/webhooks-lib.sh); of the big partner's 10 endpoints, /hook/ds-big/9
# answers 500 to a fifth of the attempts (split_clients) and /hook/ds-big/10 goes through nginx to
# a Python backend that answers after SOAK_SLOW_MS (default 50 ms). Retries: 1s,2s,4s,8s,16s,32s.
# Retention: SOAK_RETENTION (default: the cutoff starts three days into the dataset's 30 days of
# history, so the worker's maintenance prunes from the first minute on).
# Processes: SOAK_API API processes (`--role api`) and SOAK_WORKERS worker processes
# (`--role worker`); with both 0 (the default), one `--role all` process. With several API
# processes the load groups are spread over them.
# Per minute: req/s, p50, p99 and non-2xx per group (wrk); server RSS (summed over processes) and
# pool connections in use (max of 5 s samples, /metrics); CPU busy % of the machine; delivery lag
# (event → arrival at nginx) p50/p99 for the 8 healthy endpoints, the failing one and the slow one;
# deliveries arrived; sizes (heap + indexes) and dead rows of the hot tables, each index of
# webhook_deliveries with its live rows (statistics, not counted); load average; the
# server's anonymous/file RSS, threads and PostgreSQL connections, and the cluster's checkpoints,
# buffers written and WAL in the minute ("server:"); with SOAK_WAITS=on, the server's sessions'
# most frequent wait events ("waits:"); each vacuum of the stand-in below with its times.
# At the end: load stops, pending deliveries are waited for (120 s), then every lead ingested has
# its 10 deliveries delivered, duplicates received (the same delivery id arriving twice with a
# 200), and per healthy endpoint the count and lag p99 (fairness).
# Usage: BENCH_DATASET=pp_dataset SOAK_MINUTES=10 bash bench/soak.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export BENCH_DB=${BENCH_DATASET:?BENCH_DATASET=<database made by bench/dataset.sh>}
export BENCH_NGINX_PORT=$(psql -h 127.0.0.1 -U postgres -Atq "$BENCH_DB" -c "SELECT value FROM dataset_info WHERE key = 'receiver_port'")
MINUTES=${SOAK_MINUTES:-30}
SLOW_MS=${SOAK_SLOW_MS:-50}
SLOW_PORT=${SOAK_SLOW_PORT:-18445}
NAPI=${SOAK_API:-0}
NWORK=${SOAK_WORKERS:-0}
BASEPORT=${SOAK_PORT:-18200}
METRICSPORT=${SOAK_METRICS_PORT:-$((BASEPORT + 100))} # process i: metrics on METRICSPORT + i
export WH_NGINX_HTTP="split_clients \"\${request_id}\" \$soak_fail { 20% 1; * \"\"; }"
export WH_NGINX_SERVER="location = /hook/ds-big/9 { if (\$soak_fail) { return 500 \"no\"; } return 200 \"ok\"; }
    location = /hook/ds-big/10 { proxy_pass http://127.0.0.1:$SLOW_PORT; }"
source bench/webhooks-lib.sh
[ -n "${BENCH_BIN:-}" ] || wh_install
BIN=${BENCH_BIN:-$BIN}
DB=$WH_DB
info() { psql -Atq "$DB" -c "SELECT value FROM dataset_info WHERE key = '$1'"; }
BIG=$(info big_partner)
TOKEN=$(info token)
T0=$(info t0)
# Retention: the cutoff three days into the history (which starts 30 days before T0).
RET=${SOAK_RETENTION:-$(( ($(date +%s) - $(date -d "$T0" +%s)) / 60 + 27 * 1440 ))m}
export PARTNER_WEBHOOK_RETENTION=$RET PARTNER_EVENT_RETENTION=$RET PARTNER_RATE_LIMIT=1000000000/1s
export PARTNER_WEBHOOK_RETRY_SCHEDULE=1s,2s,4s,8s,16s,32s
unset PARTNER_BIND
PIDS=()
SLOW=
VACPID=
WAITPID=
cleanup() {
  [ -z "$VACPID" ] || kill "$VACPID" 2>/dev/null || true
  [ -z "$WAITPID" ] || kill "$WAITPID" 2>/dev/null || true
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  [ -z "$SLOW" ] || kill "$SLOW" 2>/dev/null || true
  jobs -p | xargs -r kill 2>/dev/null || true
  # SOAK_KEEP=<dir>: keep the servers' logs (e.g. MIMALLOC_SHOW_STATS=1's statistics at exit).
  [ -z "${SOAK_KEEP:-}" ] || cp "$WH_WORK"/server-*.log "$SOAK_KEEP"/ 2>/dev/null || true
  wh_cleanup
}
trap cleanup EXIT

python3 - "$SLOW_PORT" "$SLOW_MS" <<'PY' &
import http.server, socketserver, sys, time
port, ms = int(sys.argv[1]), int(sys.argv[2])
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        time.sleep(ms / 1000)
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *a): pass
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True; request_queue_size = 1024
S(("127.0.0.1", port), H).serve_forever()
PY
SLOW=$!
wh_start_receiver
psql -q "$DB" -c "CREATE TABLE IF NOT EXISTS soak_arrivals (ms numeric, id text)"

# Processes: ports BASEPORT+i, metrics on METRICSPORT+i (SOAK_METRICS_PORT, default BASEPORT+100).
APIS=()
start_proc() { # role index
  PARTNER_BIND="127.0.0.1:$((BASEPORT + $2))" PARTNER_METRICS_BIND="127.0.0.1:$((METRICSPORT + $2))" \
    "$BIN" serve --no-migrate --role "$1" >>"$WH_WORK/server-$2.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$((BASEPORT + $2))/healthz" >/dev/null && return; sleep 0.1; done
  echo "process $2 ($1) did not start" >&2; tail "$WH_WORK/server-$2.log" >&2; exit 1
}
if [ "$NAPI" = 0 ] && [ "$NWORK" = 0 ]; then
  start_proc all 0; APIS=(0)
else
  for i in $(seq 1 "$NAPI"); do start_proc api "$i"; APIS+=("$i"); done
  for i in $(seq 1 "$NWORK"); do start_proc worker $((NAPI + i)); done
fi
api() { echo "http://127.0.0.1:$((BASEPORT + ${APIS[$(($1 % ${#APIS[@]}))]}))"; }
A="Authorization: Bearer $TOKEN"
I="Authorization: Bearer $PARTNER_INTERNAL_TOKEN"
cursor_of() { sed -nE 's/.*"nextCursor":"([^"]+)".*/\1/p'; }
after_pages() { # path pages
  local c="" n=0 next
  while [ $n -lt "$2" ]; do
    next=$(curl -sf "$(api 0)$1${c:+?cursor=$c}" -H "$A" | cursor_of); [ -n "$next" ] || break; c=$next; n=$((n + 1))
  done
  echo "$c"
}
L10=$(after_pages /api/v1/leads 9); L100=$(after_pages /api/v1/leads 99); L1000=$(after_pages /api/v1/leads 999)
D100=$(after_pages /api/v1/webhook-deliveries 99)
USER2=$(curl -sf -X POST "$(api 0)/internal/v1/users" -H "$I" -d '{"email":"soak@dataset.test","partnerId":"ds-2","admin":false}' | sed -E 's/.*"id":"([^"]+)".*/\1/')
TOKEN2=$(curl -sf -X POST "$(api 0)/internal/v1/users/$USER2/tokens" -H "$I" | sed -E 's/.*"token":"([^"]+)".*/\1/')

# wrk scripts: paths in turn, each connection waiting CONNS*1000/RATE ms between requests.
lua() { # file conns rate token method body paths...
  local f=$1 conns=$2 rate=$3 tok=$4 method=$5 body=$6; shift 6
  {
    echo "local paths = {"; for p in "$@"; do echo "  \"$p\","; done; echo "}"
    echo "local i = 0"
    echo "request = function() i = i % #paths + 1"
    echo "  return wrk.format(\"$method\", paths[i], {[\"Authorization\"] = \"Bearer $tok\", [\"Content-Type\"] = \"application/json\"}, $body) end"
    echo "delay = function() return $(awk -v c="$conns" -v r="$rate" 'BEGIN {printf "%d", c * 1000 / r}') end"
  } >"$f"
}
LEADS_RPS=${SOAK_LEADS_RPS:-500}; LOG_RPS=${SOAK_LOG_RPS:-250}; ORDERS_RPS=${SOAK_ORDERS_RPS:-100}; INGEST_RPS=${SOAK_INGEST_RPS:-60}
lua "$WH_WORK/leads.lua" 16 "$LEADS_RPS" "$TOKEN" GET nil "/api/v1/leads" "/api/v1/leads?cursor=$L10" "/api/v1/leads?cursor=$L100" "/api/v1/leads?cursor=$L1000"
lua "$WH_WORK/deliveries.lua" 8 "$LOG_RPS" "$TOKEN" GET nil "/api/v1/webhook-deliveries" "/api/v1/webhook-deliveries?cursor=$D100"
lua "$WH_WORK/orders.lua" 4 "$ORDERS_RPS" "$TOKEN2" GET nil "/api/v1/orders"
lua "$WH_WORK/ingest.lua" 4 "$INGEST_RPS" "$PARTNER_INTERNAL_TOKEN" POST \
  "'{\"partnerId\":\"$BIG\",\"firstName\":\"Soak\",\"lastName\":\"Lee\",\"email\":\"soak@example.com\",\"emailConsent\":true,\"phone\":\"+1 555 0100\",\"smsConsent\":true,\"origin\":\"managed-website\",\"location\":\"Austin, TX\"}'" \
  "/internal/v1/leads"
declare -A CONNS=([leads]=16 [deliveries]=8 [orders]=4 [ingest]=4)
GROUPS_=(leads deliveries orders ingest)

in_ms() { awk -v v="$1" 'BEGIN {n = v + 0; if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) n += 0; else if (v ~ /s$/) n *= 1000; printf "%.1f", n}'; }
cpu_busy() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8}' /proc/stat; }
rss_mib() { local t=0 p; for p in "${PIDS[@]}"; do t=$((t + $(awk '/VmRSS/ {print $2}' "/proc/$p/status"))); done; echo $((t / 1024)); }
pool_in_use() { local t=0 i v; for i in "${!PIDS[@]}"; do
    v=$(curl -sf "http://127.0.0.1:$((METRICSPORT + (${#APIS[@]} == 1 && ${APIS[0]} == 0 ? 0 : i + 1)))/metrics" 2>/dev/null | awk '/^db_pool_connections\{state="in_use"\}/ {print $2}' || true)
    t=$(awk -v a="$t" -v b="${v:-0}" 'BEGIN {print a + b}'); done; echo "$t"; }
# Per minute, "server:" the processes' RSS split into anonymous and file-backed memory, their
# threads and PostgreSQL connections, and what the whole cluster did in the minute: checkpoints
# (timed / requested), buffers written by them and by backends, WAL written (pg_stat_wal: every
# database of the server, the other sessions' included).
proc_mem() { local a=0 f=0 th=0 p; for p in "${PIDS[@]}"; do
    read -r x y z <<<"$(awk '/^RssAnon/ {a = $2} /^RssFile/ {f = $2} /^Threads/ {t = $2} END {print a, f, t}' "/proc/$p/status")"
    a=$((a + x)); f=$((f + y)); th=$((th + z)); done; echo "anon $((a / 1024)) MB file $((f / 1024)) MB threads $th"; }
cluster_delta() { # "checkpoints timed+req, buffers checkpoint/backend, WAL MB" since the previous call
  local now prev; prev=$(cat "$WH_WORK/cluster.prev" 2>/dev/null || true); now=$(psql -Atq -F' ' "$DB" -c "SELECT b.checkpoints_timed, b.checkpoints_req, b.buffers_checkpoint, b.buffers_backend, w.wal_bytes, w.wal_fpi
    FROM pg_stat_bgwriter b, pg_stat_wal w")
  [ -z "$prev" ] || awk -v a="$prev" -v b="$now" 'BEGIN {split(a, p, " "); split(b, n, " ");
    printf "checkpoints %d timed + %d requested, buffers written by checkpoints %d, by backends %d, WAL %d MB (%d full-page images)",
      n[1] - p[1], n[2] - p[2], n[3] - p[3], n[4] - p[4], (n[5] - p[5]) / 1048576, n[6] - p[6]}'
  echo "$now" >"$WH_WORK/cluster.prev"
}
server_conns() { psql -Atq "$DB" -c "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend' AND application_name <> 'psql'"; }
# SOAK_WAITS=on: the server's sessions sampled 4 times a second (pg_stat_activity: active, not
# psql), printed per minute as the most frequent "wait event @ statement" pairs ("-" = on CPU).
waits_start() {
  printf '%s\n\\watch 0.25\n' "SELECT clock_timestamp()::time(1), COALESCE(wait_event_type || ':' || wait_event, '-'), left(regexp_replace(query, '\s+', ' ', 'g'), 28)
    FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' AND backend_type = 'client backend'
    AND application_name <> 'psql' AND pid <> pg_backend_pid()" | psql -Atq -F'|' "$DB" -o "$WH_WORK/waits.log" >/dev/null 2>&1 &
  WAITPID=$!
}
waits_minute() { # the samples since the previous call (psql keeps its file open: read on from a line count)
  local n seen; n=$(wc -l <"$WH_WORK/waits.log"); seen=$(cat "$WH_WORK/waits.seen" 2>/dev/null || echo 0)
  tail -n +"$((seen + 1))" "$WH_WORK/waits.log" | head -n "$((n - seen))" |
    awk -F'|' '{n[$2 " @ " $3]++} END {for (k in n) printf "%d %s\n", n[k], k}' | sort -rn | head -6 | paste -sd';' | sed 's/;/; /g'
  echo "$n" >"$WH_WORK/waits.seen"
}
HOT="'webhook_deliveries','webhook_attempts','domain_events','leads','webhook_endpoint_queue'"
sizes() {
  psql -Atq "$DB" -c "SELECT string_agg(format('%s %s+%s MB dead %s%s', replace(replace(c.relname, 'webhook_', 'w_'), 'domain_', 'd_'),
      pg_table_size(c.oid) / 1048576, pg_indexes_size(c.oid) / 1048576, s.n_dead_tup,
      CASE WHEN s.autovacuum_count + s.vacuum_count > 0 THEN ' vacuumed ' || (s.autovacuum_count + s.vacuum_count) ELSE '' END), '; ' ORDER BY c.relname)
    FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE c.relname IN ($HOT)"
}
# Each index of webhook_deliveries in MB (issue 22: which of them grow while retention deletes).
index_sizes() {
  psql -Atq "$DB" -c "SELECT string_agg(replace(c.relname, 'webhook_deliveries_', '') || ' ' || pg_relation_size(c.oid) / 1048576, ', ' ORDER BY c.relname)
    FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid WHERE x.indrelid = 'webhook_deliveries'::regclass"
}
# Lag of the arrivals logged since the last rotation: "healthy_p50 healthy_p99 fail_p99 slow_p99 arrived".
lag() {
  mv "$WH_WORK/access.log" "$WH_WORK/access.min" 2>/dev/null || : >"$WH_WORK/access.min"
  nginx -p "$WH_WORK" -c "$WH_WORK/nginx.conf" -s reopen; sleep 0.5
  cat "$WH_WORK/access.min" >>"$WH_WORK/access.all"
  psql -q "$DB" -c "TRUNCATE soak_arrivals" -c "\\copy soak_arrivals FROM '$WH_WORK/access.min' WITH (FORMAT text, DELIMITER ' ')"
  psql -Atq -F' ' "$DB" -c "
    WITH a AS (SELECT to_timestamp(b.ms) - d.created_at AS lag, right(w.url, 3) AS tail
      FROM (SELECT ms, id::uuid AS id FROM soak_arrivals WHERE id ~ '^[0-9a-f-]{36}$' OFFSET 0) b
      CROSS JOIN LATERAL (SELECT * FROM webhook_deliveries d WHERE d.id = b.id OFFSET 0) d JOIN webhook_endpoints w ON w.id = d.endpoint_id)
    SELECT COALESCE(round(1000 * extract(epoch FROM percentile_cont(0.5) WITHIN GROUP (ORDER BY lag) FILTER (WHERE tail NOT IN ('g/9', '/10')))::numeric, 0), -1),
      COALESCE(round(1000 * extract(epoch FROM percentile_cont(0.99) WITHIN GROUP (ORDER BY lag) FILTER (WHERE tail NOT IN ('g/9', '/10')))::numeric, 0), -1),
      COALESCE(round(1000 * extract(epoch FROM percentile_cont(0.99) WITHIN GROUP (ORDER BY lag) FILTER (WHERE tail = 'g/9'))::numeric, 0), -1),
      COALESCE(round(1000 * extract(epoch FROM percentile_cont(0.99) WITHIN GROUP (ORDER BY lag) FILTER (WHERE tail = '/10'))::numeric, 0), -1),
      count(*) FROM a"
}

# The shared benchmark server may run with autovacuum = off (it does on the machine of
# docs/performance.md). Then this script applies autovacuum's rule itself, once a minute as the
# launcher would: a hot table whose dead rows exceed its threshold + scale factor × rows (its
# reloptions, else the server's settings) is vacuumed and analyzed as an autovacuum worker would:
# the cost delay and limit in effect for that table (its autovacuum_vacuum_cost_delay/_limit
# reloptions, else the server's autovacuum_vacuum_cost_delay/_limit, -1 meaning vacuum_cost_*),
# and no parallel index vacuuming (a manual VACUUM vacuums a table's indexes with up to
# max_parallel_maintenance_workers extra processes; an autovacuum worker never does). Each run is
# logged with the cost settings it used. SOAK_VACUUM=off disables the stand-in.
AV=$(psql -Atq "$DB" -c "SHOW autovacuum")
VOPTS=${SOAK_VACUUM_OPTIONS:-ANALYZE, PARALLEL 0} # SOAK_VACUUM_OPTIONS=ANALYZE: the stand-in before 2026-11-27 07:30 (parallel index vacuuming)
vacuum_standin() {
  while sleep 60; do
    for t in $(psql -Atq "$DB" -c "
      SELECT c.relname FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid
      WHERE c.relname IN ($HOT) AND s.n_dead_tup > COALESCE((SELECT option_value::float8 FROM pg_options_to_table(c.reloptions)
          WHERE option_name = 'autovacuum_vacuum_threshold'), current_setting('autovacuum_vacuum_threshold')::float8)
        + COALESCE((SELECT option_value::float8 FROM pg_options_to_table(c.reloptions) WHERE option_name = 'autovacuum_vacuum_scale_factor'),
          current_setting('autovacuum_vacuum_scale_factor')::float8) * c.reltuples"); do
      local t0 dead delay limit; t0=$(date +%s.%N)
      read -r dead delay limit <<<"$(psql -Atq -F' ' "$DB" -c "
        WITH o AS (SELECT option_name, option_value FROM pg_class c, pg_options_to_table(c.reloptions) WHERE c.relname = '$t')
        SELECT (SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = '$t'),
          COALESCE((SELECT option_value FROM o WHERE option_name = 'autovacuum_vacuum_cost_delay')::float8,
            NULLIF((SELECT setting::float8 FROM pg_settings WHERE name = 'autovacuum_vacuum_cost_delay'), -1),
            (SELECT setting::float8 FROM pg_settings WHERE name = 'vacuum_cost_delay')),
          COALESCE((SELECT option_value FROM o WHERE option_name = 'autovacuum_vacuum_cost_limit')::int,
            NULLIF(current_setting('autovacuum_vacuum_cost_limit')::int, -1), current_setting('vacuum_cost_limit')::int)")"
      psql -q -v ON_ERROR_STOP=1 "$DB" -c "SET vacuum_cost_delay = '${delay}ms'" -c "SET vacuum_cost_limit = $limit" -c "VACUUM ($VOPTS) $t" 2>>"$WH_WORK/vacuum.log" || true
      echo "$(date -u -d "@${t0%.*}" +%T)-$(date -u +%T) VACUUM ($VOPTS) $t (cost delay ${delay} ms, limit $limit): $dead dead rows, $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s" >>"$WH_WORK/vacuum.log"
    done
  done
}
: >"$WH_WORK/vacuum.log"
if [ "$AV" = off ] && [ "${SOAK_VACUUM:-on}" != off ]; then vacuum_standin & VACPID=$!; fi
echo "== soak on $DB: $MINUTES min; autovacuum $AV$([ "$AV" = off ] && [ "${SOAK_VACUUM:-on}" != off ] && echo " (this script applies its rule once a minute)"); processes: $([ "$NAPI$NWORK" = 00 ] && echo "one --role all" || echo "$NAPI --role api, $NWORK --role worker"); retention $RET (T0 $T0); slow endpoint ${SLOW_MS} ms"
echo "== target rates: leads $LEADS_RPS/s, delivery log $LOG_RPS/s, orders $ORDERS_RPS/s, ingest $INGEST_RPS leads/s (x10 deliveries); machine $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== sizes at the start: $(sizes)"
echo "== w_deliveries indexes MB at the start: $(index_sizes)"
START=$(psql -Atq "$DB" -c "SELECT now()")
cluster_delta >/dev/null
[ "${SOAK_WAITS:-off}" = off ] || waits_start
wh_rotate_log; : >"$WH_WORK/access.all"
printf '%-3s | %-24s | %-24s | %-24s | %-24s | %4s | %6s | %4s | %5s | %-22s | %6s | %s\n' min "leads req/s p50 p99" "log req/s p50 p99" "orders req/s p50 p99" "ingest req/s p50 p99" non2 "RSS MB" pool "cpu%" "lag p50/p99 ok,fail,slow" arrived "load"
for m in $(seq 1 "$MINUTES"); do
  k=0; WRKS=()
  for g in "${GROUPS_[@]}"; do
    wrk -t1 -c"${CONNS[$g]}" -d60s --latency -s "$WH_WORK/$g.lua" "$(api $k)" >"$WH_WORK/$g.out" 2>&1 &
    WRKS+=($!); k=$((k + 1))
  done
  read -r b0 t0 <<<"$(cpu_busy)"; poolmax=0
  for _ in $(seq 1 11); do sleep 5; p=$(pool_in_use); poolmax=$(awk -v a="$poolmax" -v b="$p" 'BEGIN {print (b > a) ? b : a}'); done
  for w in "${WRKS[@]}"; do wait "$w" || true; done
  read -r b1 t1 <<<"$(cpu_busy)"
  row=""; non2=0
  for g in "${GROUPS_[@]}"; do
    o="$WH_WORK/$g.out"
    row+=$(printf '%6.0f %7s %8s | ' "$(awk '/Requests\/sec/ {v = $2} END {print v + 0}' "$o")" "$(in_ms "$(awk '$1 == "50%" {print $2}' "$o")")" "$(in_ms "$(awk '$1 == "99%" {print $2}' "$o")")")
    non2=$((non2 + $(awk '/Non-2xx/ {n = $5} END {print n + 0}' "$o")))
  done
  read -r hp50 hp99 fp99 sp99 arrived <<<"$(lag)"
  printf '%-3s | %s%4s | %6s | %4s | %5.0f | %-22s | %6s | %s\n' "$m" "$row" "$non2" "$(rss_mib)" "$poolmax" \
    "$(awk -v a="$b0" -v b="$t0" -v c="$b1" -v d="$t1" 'BEGIN {print 100 * (c - a) / (d - b)}')" "$hp50/$hp99 $fp99 $sp99" "$arrived" "$(cut -d' ' -f1-3 /proc/loadavg)"
  echo "    sizes: $(sizes)"
  echo "    w_deliveries indexes MB: $(index_sizes); live rows $(psql -Atq "$DB" -c "SELECT n_live_tup FROM pg_stat_user_tables WHERE relname = 'webhook_deliveries'")"
  echo "    server: $(proc_mem), $(server_conns) PostgreSQL connections; cluster: $(cluster_delta)"
  [ -z "$WAITPID" ] || echo "    waits: $(waits_minute)"
  [ ! -s "$WH_WORK/vacuum.log" ] || { sed 's/^/    vacuum: /' "$WH_WORK/vacuum.log"; : >"$WH_WORK/vacuum.log"; }
done

echo "== load stopped; waiting for pending deliveries (120 s at most)"
for _ in $(seq 1 120); do
  left=$(psql -Atq "$DB" -c "SELECT count(*) FROM webhook_deliveries WHERE status = 'pending' AND created_at >= '$START'")
  [ "$left" = 0 ] && break; sleep 1
done
lag >/dev/null
echo "pending after the wait: $left"
psql -q "$DB" -c "TRUNCATE soak_arrivals" -c "\\copy soak_arrivals FROM '$WH_WORK/access.all' WITH (FORMAT text, DELIMITER ' ')"
psql -P pager=off "$DB" -c "
  SELECT count(*) AS leads_ingested, count(*) * 10 AS deliveries_expected FROM domain_events WHERE partner_id = '$BIG' AND kind = 'lead.created' AND created_at >= '$START'" -c "
  SELECT d.status, count(*) FROM webhook_deliveries d WHERE d.partner_id = '$BIG' AND d.created_at >= '$START' GROUP BY 1" -c "
  WITH ok AS (SELECT b.id, count(*) AS n FROM (SELECT id::uuid AS id FROM soak_arrivals WHERE id ~ '^[0-9a-f-]{36}$' OFFSET 0) b
      CROSS JOIN LATERAL (SELECT * FROM webhook_deliveries d WHERE d.id = b.id OFFSET 0) d JOIN webhook_endpoints w ON w.id = d.endpoint_id WHERE right(w.url, 3) <> 'g/9' GROUP BY 1)
  SELECT count(*) AS distinct_received_healthy_and_slow, sum(n) - count(*) AS duplicate_receipts FROM ok" -c "
  SELECT right(w.url, 12) AS endpoint, count(*) AS received, count(DISTINCT b.id) AS distinct_ids,
    round(1000 * extract(epoch FROM percentile_cont(0.5) WITHIN GROUP (ORDER BY to_timestamp(b.ms) - d.created_at))::numeric, 0) AS lag_p50_ms,
    round(1000 * extract(epoch FROM percentile_cont(0.99) WITHIN GROUP (ORDER BY to_timestamp(b.ms) - d.created_at))::numeric, 0) AS lag_p99_ms
  FROM (SELECT ms, id::uuid AS id FROM soak_arrivals WHERE id ~ '^[0-9a-f-]{36}$' OFFSET 0) b
    CROSS JOIN LATERAL (SELECT * FROM webhook_deliveries d WHERE d.id = b.id OFFSET 0) d JOIN webhook_endpoints w ON w.id = d.endpoint_id GROUP BY w.url ORDER BY w.url"
for i in "${!PIDS[@]}"; do
  port=$((METRICSPORT + (${#APIS[@]} == 1 && ${APIS[0]} == 0 ? 0 : i + 1)))
  echo "process $((i + 1)): 5xx answered $(curl -sf "http://127.0.0.1:$port/metrics" | awk '/^http_requests_total\{.*status="5/ {n += $2} END {print n + 0}'), RSS $(awk '/VmRSS/ {print int($2 / 1024)}' "/proc/${PIDS[$i]}/status") MiB"
done
echo "== sizes at the end: $(sizes)"
echo "== w_deliveries indexes MB at the end: $(index_sizes)"
grep -h -i "error\|panic" "$WH_WORK"/server-*.log | head -5 || true
