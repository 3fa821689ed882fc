#!/usr/bin/env bash
# The cost of an Idempotency-Key (issue 25: an idempotent POST costs at most 1.3 x the same POST
# without a key): POST /internal/v1/leads from 32 wrk connections, three ways, one server:
#   plain:  no key (the ingest of bench/ingest.sh);
#   keyed:  a new key on every request (the key's lock and row read in one statement pipelined
#           behind the write's BEGIN, the answer's INSERT before its COMMIT: no round trip more);
#   replay: one key for every request after the first (the kept answer replayed).
# BENCH_ROUNDS (default 3) alternating rounds of plain and keyed; the cost is the median of the
# rounds' ratios (req/s, and CPU per request). BENCH_COMPARE=/path/to/an/older/partner-server
# measures that binary's plain and keyed too, in the same rounds. BENCH_SQL=1 adds pgbench of the
# statements alone, alternating: the ingest transaction; the keyed sequence now (BEGIN and the
# claim pipelined; the ingest; the answer's INSERT and COMMIT pipelined); and the one before
# 2026-11-27 evening (a claim statement; the ingest with an UPDATE of the claim before COMMIT).
# Each measured run also prints CPU per request: the server's and its database backends'
# (/proc/<pid>/stat).
# Loopback only; stops by itself.
set -euo pipefail
cd "$(dirname "$0")/.."
export PGHOST=127.0.0.1 PGPORT=5432 PGUSER=postgres
DB=${BENCH_DB:-pp_bench_idempotency}
PORT=${BENCH_PORT:-18094}
DURATION=${BENCH_DURATION:-15s}
CONNS=${BENCH_CONNS:-32}
export DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB"
export PARTNER_BIND="127.0.0.1:$PORT" PARTNER_TOKEN_PEPPER=bench-pepper
export PARTNER_INTERNAL_TOKEN=bench-internal-token-0123456789abcdef RUST_LOG=warn
export PARTNER_RATE_LIMIT=1000000000/1s PARTNER_DB_POOL_SIZE=${BENCH_POOL:-32}
[ "$CONNS" -ge 2 ] || { echo "BENCH_CONNS must be at least 2 (wrk -t2)" >&2; exit 1; }
command -v wrk >/dev/null || { apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }; }
[ -n "${BENCH_BIN:-}" ] || cargo build --release -q -p partner-server
BIN=${BENCH_BIN:-${CARGO_TARGET_DIR:-target}/release/partner-server}

psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres
$BIN migrate
psql -q "$DB" -c "
  INSERT INTO partners (partner_id, name, email, active, dna_access, headless_links, default_lang, enabled_langs,
    cs_subscription_active, cs_manual_override, cs_yearly_bundle, cs_services, created_at, updated_at)
  VALUES ('ingest', 'Ingest', 'ops@ingest.test', true, false, true, 'en', '{en}', false, false, false, '{}', now(), now())"

SERVER=
start_server() { "$1" serve --no-migrate --role api & SERVER=$!
  for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.2; done; }
stop_server() { kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; SERVER=; }
work=$(mktemp -d)
trap 'stop_server; rm -rf "$work"; psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres' EXIT
BODY='{"partnerId":"ingest","firstName":"Ann","lastName":"Lee","email":"ann@example.com","emailConsent":true,"phone":"+1 555 0100","smsConsent":true,"origin":"managed-website","location":"Austin, TX"}'

# mode: plain (no key), keyed (a fresh key per request), replay (one key throughout).
write_script() { # mode file
  cat > "$2" <<LUA
local mode = "$1"
local counter = 0
id = 0
local threads = {}
function setup(thread) thread:set("id", #threads + 1); table.insert(threads, thread) end
wrk.method = "POST"
wrk.body = '$BODY'
wrk.headers["Authorization"] = "Bearer $PARTNER_INTERNAL_TOKEN"
wrk.headers["Content-Type"] = "application/json"
function request()
  if mode == "keyed" then
    counter = counter + 1
    wrk.headers["Idempotency-Key"] = string.format("bench-%d-%d-%d", os.time(), id, counter)
  elseif mode == "replay" then
    wrk.headers["Idempotency-Key"] = "bench-replay"
  end
  return wrk.format()
end
LUA
}

echo "== machine: $(nproc) cores, $(uname -r); load average $(cut -d' ' -f1-3 /proc/loadavg); $CONNS connections, $DURATION each"
declare -A RATE CPU
# CPU seconds (user + system) of the server and of the database's client backends, by pid.
HZ=$(getconf CLK_TCK)
cpu_ticks() { # -> "pid ticks" lines
  { echo "$SERVER"; psql -qAt "$DB" -c "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()"; } |
    while read -r p; do [ -r "/proc/$p/stat" ] && awk -v p="$p" '{print p, $14 + $15}' "/proc/$p/stat"; done
}
measure() { # label binary mode
  write_script "$3" "$work/$3.lua"
  start_server "$2"
  wrk -t2 -c"$CONNS" -d3s -s "$work/$3.lua" "http://127.0.0.1:$PORT/internal/v1/leads" >/dev/null
  cpu_ticks > "$work/cpu.before"
  local out; out=$(wrk -t2 -c"$CONNS" -d"$DURATION" --latency -s "$work/$3.lua" "http://127.0.0.1:$PORT/internal/v1/leads")
  cpu_ticks > "$work/cpu.after"
  RATE[$1]=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  local n; n=$(echo "$out" | awk '/requests in/ {print $1}')
  # Server (its pid first) and backends, microseconds of CPU per request.
  CPU[$1]=$(awk -v hz="$HZ" -v n="$n" -v srv="$SERVER" 'NR == FNR {b[$1] = $2; next}
    {d = $2 - b[$1]; if ($1 == srv) s += d; else pg += d}
    END {printf "%.0f %.0f", s / hz / n * 1e6, pg / hz / n * 1e6}' "$work/cpu.before" "$work/cpu.after")
  local non2xx; non2xx=$(echo "$out" | awk '/Non-2xx/ {print $5}')
  printf '%-24s %10s req/s   p50 %8s   p99 %8s   non-2xx %s   CPU/req server %s us, postgres %s us\n' "$1" "${RATE[$1]}" \
    "$(echo "$out" | awk '$1 == "50%" {print $2}')" "$(echo "$out" | awk '$1 == "99%" {print $2}')" "${non2xx:-0}" \
    ${CPU[$1]}
  stop_server
}
median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
# CPU (server + postgres) per request of a label, microseconds.
cpu_sum() { echo "${CPU[$1]}" | awk '{print $1 + $2}'; }
# Alternated, so load on a shared machine falls on both.
RATIOS= CRATIOS= CPURATIOS= CCPURATIOS=
for round in $(seq 1 "${BENCH_ROUNDS:-3}"); do
  echo "-- round $round, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  measure plain "$BIN" plain
  measure keyed "$BIN" keyed
  RATIOS="$RATIOS $(ratio "${RATE[plain]}" "${RATE[keyed]}")"
  CPURATIOS="$CPURATIOS $(ratio "$(cpu_sum keyed)" "$(cpu_sum plain)")"
  if [ -n "${BENCH_COMPARE:-}" ]; then
    # Both of BENCH_COMPARE's, so its cost of a key is its own keyed against its own plain.
    measure "plain (compare)" "$BENCH_COMPARE" plain
    measure "keyed (compare)" "$BENCH_COMPARE" keyed
    CRATIOS="$CRATIOS $(ratio "${RATE[plain (compare)]}" "${RATE[keyed (compare)]}")"
    CCPURATIOS="$CCPURATIOS $(ratio "$(cpu_sum 'keyed (compare)')" "$(cpu_sum 'plain (compare)')")"
  fi
done
measure replay "$BIN" replay
echo "keyed rows kept: $(psql -qAt "$DB" -c 'SELECT count(*) FROM idempotency_keys')"
echo "cost of a key (plain / keyed req/s), rounds:$RATIOS; median $(echo "$RATIOS" | median) (target <= 1.3); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "cost of a key (keyed / plain CPU per request, server + postgres), rounds:$CPURATIOS; median $(echo "$CPURATIOS" | median)"
[ -z "$CRATIOS" ] || echo "the same for BENCH_COMPARE (its keyed against its plain), req/s rounds:$CRATIOS; median $(echo "$CRATIOS" | median); CPU rounds:$CCPURATIOS; median $(echo "$CCPURATIOS" | median)"

[ -n "${BENCH_SQL:-}" ] || exit 0
# The statements alone (as the server sends them, literals for parameters; the answer a 420-byte
# body): what the database spends, without the server.
OUTBOX_ID=$(psql -Atq "$DB" -c "SELECT CASE WHEN to_regproc('uuid_v7') IS NULL THEN 'gen_random_uuid()' ELSE 'uuid_v7()' END")
# bench/ingest.sh's statements, its shell variables filled in.
ING=$(sed -n '/^INSERT INTO leads/p; /^WITH ev AS/p' bench/ingest.sh |
  sed "s/\\\$1/$OUTBOX_ID/; s/\\\$PARTNER/ingest/g; s/\\\$OUTBOX_ID/$OUTBOX_ID/g")
H='\set k random(1, 1000000000000)'
KEYV=":client_id || '-' || :k"
CLAIM="WITH claimed AS ( INSERT INTO idempotency_keys AS k (caller, key, fingerprint, created_at, lease_until, expires_at) VALUES ('operator', $KEYV, sha256('x'), now(), now() + interval '60 s', now() + interval '24 h') ON CONFLICT (caller, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, created_at = EXCLUDED.created_at, lease_until = EXCLUDED.lease_until, expires_at = EXCLUDED.expires_at, status = NULL, content_type = NULL, body = NULL WHERE k.expires_at <= EXCLUDED.created_at OR (k.status IS NULL AND k.lease_until <= EXCLUDED.created_at) RETURNING 1 ) SELECT set_config('synchronous_commit', 'off', true) IS NOT NULL AS async_commit, EXISTS (SELECT 1 FROM claimed) AS claimed, k.fingerprint, k.status, k.content_type, k.body FROM (SELECT 1) AS one LEFT JOIN idempotency_keys k ON k.caller = 'operator' AND k.key = $KEYV AND NOT EXISTS (SELECT 1 FROM claimed);"
KEEP="UPDATE idempotency_keys SET status = 201, content_type = 'application/json', body = convert_to(repeat('x', 420), 'UTF8') WHERE caller = 'operator' AND key = $KEYV AND status IS NULL;"
CLAIM_NOW="SELECT l.locked, k.fingerprint, k.status, k.content_type, k.body, k.lease_until, k.expires_at FROM (SELECT pg_try_advisory_xact_lock(hashtextextended('operator' || chr(10) || $KEYV, 0)) AS locked) AS l LEFT JOIN idempotency_keys k ON k.caller = 'operator' AND k.key = $KEYV;"
INS="INSERT INTO idempotency_keys (caller, key, fingerprint, created_at, lease_until, expires_at, status, content_type, body) VALUES ('operator', $KEYV, sha256('x'), now(), now(), now() + interval '24 h', 201, 'application/json', convert_to(repeat('x', 420), 'UTF8'));"
printf '%s\nBEGIN;\n%s\nCOMMIT;\n' "$H" "$ING" > "$work/plain.sql"
printf '%s\n%s\nBEGIN;\n%s\n%s\nCOMMIT;\n' "$H" "$CLAIM" "$ING" "$KEEP" > "$work/before.sql"
printf '%s\n\\startpipeline\nBEGIN;\n%s\n\\endpipeline\n%s\n\\startpipeline\n%s\nCOMMIT;\n\\endpipeline\n' \
  "$H" "$CLAIM_NOW" "$ING" "$INS" > "$work/now.sql"
declare -A TPS
for round in $(seq 1 "${BENCH_ROUNDS:-3}"); do
  line="pgbench round $round (load $(cut -d' ' -f1 /proc/loadavg)):"
  for f in plain before now; do
    t=$(pgbench -n -M prepared -c "$CONNS" -j 2 -T "${DURATION%s}" -f "$work/$f.sql" "$DB" 2>/dev/null | awk '/^tps/ {print $3}')
    TPS[$f]="${TPS[$f]:-} $t"; line="$line $f $t"
  done
  echo "$line tps"
done
p=$(echo "${TPS[plain]}" | median); b=$(echo "${TPS[before]}" | median); n=$(echo "${TPS[now]}" | median)
echo "pgbench medians: plain $p, before $b ($(ratio "$p" "$b") x), now $n ($(ratio "$p" "$n") x) tps"
