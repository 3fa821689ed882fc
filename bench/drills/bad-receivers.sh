#!/usr/bin/env bash
# Drill 6, long form (issue 24): do receivers that misbehave cost the other partners anything?
# One `--role worker` process (release build) delivers lead.created events pre-filled for nine
# partners to nginx over HTTPS (bench/webhooks-lib.sh's receiver), once alone and once while a
# tenth partner's six endpoints misbehave at the same time:
#   - trickle:    reads the request, then answers one byte a second;
#   - huge body:  answers 200 with a 100 MB body, streamed as fast as the client reads;
#   - bad cert:   a certificate of an issuer the server does not trust;
#   - reset:      reads part of the request, then resets the connection (RST);
#   - no DNS:     a name that does not resolve (`no-such-host.invalid`);
#   - no TLS:     a port that accepts TCP and never says a word.
# The tenth partner gets as many events as each healthy one (so six deliveries an event, pending
# all through the run). Alternating pairs (the machine is shared and noisy), medians: the nine's
# deliveries/s with the bad receivers over without, and the server's RSS growth in each run. The
# bad receivers run under `nice 19` (a Python process of their own) so that their own CPU takes
# less from the server than their misbehaviour does; their CPU time is printed.
#
# Loopback only; the shared PostgreSQL on 5432 with a database of the drill's own; bounded
# (a few minutes plus the build) and self-stopping. Exits non-zero when a bad endpoint never
# failed the way it should, or when a run with the bad receivers grew the server's RSS by 20 MB
# or more beyond the median growth of the runs without them (a fresh server grows by its working
# set in either case).
#
#   bench/drills/bad-receivers.sh                  # builds the release binary first
#   PARTNER_BIN=path/to/partner-server DRILL_PAIRS=5 DRILL_EVENTS=3000 bench/drills/bad-receivers.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
export BENCH_DB=${BENCH_DB:-pp_drill_bad_receivers}
export BENCH_PORT=${BENCH_PORT:-18291} BENCH_NGINX_PORT=${BENCH_NGINX_PORT:-18643} BENCH_HANG_PORT=${BENCH_HANG_PORT:-18644}
source bench/webhooks-lib.sh
PAIRS=${DRILL_PAIRS:-5}
# Events per partner and run (the nine healthy partners, and the tenth).
PER=${DRILL_EVENTS:-3000}
BAD_PORT=$((WH_HANG_PORT + 1)) # trickle, huge, reset, bad cert: four ports from here
BAD=""
export PARTNER_WEBHOOK_TIMEOUT=${PARTNER_WEBHOOK_TIMEOUT:-5s}

cleanup() {
  [ -n "$BAD" ] && kill "$BAD" 2>/dev/null || true
  wh_cleanup
}
trap cleanup EXIT

command -v nginx >/dev/null || {
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light >/dev/null
  nginx -s stop 2>/dev/null || true
}
if [ -n "${PARTNER_BIN:-}" ]; then BIN=$PARTNER_BIN; else cargo build --release -q -p partner-server; fi

wh_start_receiver
wh_start_hanging
# The untrusted certificate (self-signed, not in PARTNER_WEBHOOK_CA_FILE; an end entity, so that
# the failure is not the "certificate is a CA" one). webpki's verdict on it was `tls error:
# invalid certificate` in a partial run; any `tls error` passes.
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
  -addext "subjectAltName=IP:127.0.0.1" -addext "basicConstraints=critical,CA:FALSE" -keyout "$WH_WORK/untrusted-key.pem" -out "$WH_WORK/untrusted.pem" 2>/dev/null
cat >"$WH_WORK/bad.py" <<'PY'
import asyncio, socket, ssl, struct, sys
work, port = sys.argv[1], int(sys.argv[2])

def tls(cert, key):
    c = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    c.load_cert_chain(work + "/" + cert, work + "/" + key)
    return c

async def read_request(r):
    head = await r.readuntil(b"\r\n\r\n")
    n = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            n = int(line.split(b":")[1])
    if n:
        await r.readexactly(n)

async def closing(w, job):
    try:
        await job
    except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError, OSError):
        pass
    finally:
        w.transport.abort()

async def trickle(r, w):
    async def job():
        await read_request(r)
        for b in b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok":
            w.write(bytes([b])); await w.drain(); await asyncio.sleep(1)
    await closing(w, job())

async def huge(r, w):
    async def job():
        await read_request(r)
        w.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n" % (100 << 20))
        chunk = b"x" * 65536
        for _ in range(1600):
            w.write(chunk); await w.drain()
    await closing(w, job())

async def reset(r, w):
    async def job():
        await r.read(64)
        # SO_LINGER 0: the close sends RST, not FIN.
        w.transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    await closing(w, job())

async def main():
    servers = [
        await asyncio.start_server(trickle, "127.0.0.1", port, ssl=tls("cert.pem", "key.pem"), backlog=1024),
        await asyncio.start_server(huge, "127.0.0.1", port + 1, ssl=tls("cert.pem", "key.pem"), backlog=1024),
        await asyncio.start_server(reset, "127.0.0.1", port + 2, ssl=tls("cert.pem", "key.pem"), backlog=1024),
        # The handshake fails on the server's side (unknown issuer): this one never reads.
        await asyncio.start_server(trickle, "127.0.0.1", port + 3, ssl=tls("untrusted.pem", "untrusted-key.pem"), backlog=1024),
    ]
    await asyncio.gather(*(s.serve_forever() for s in servers))

asyncio.run(main())
PY
nice -n 19 python3 "$WH_WORK/bad.py" "$WH_WORK" "$BAD_PORT" 2>"$WH_WORK/bad.log" &
BAD=$!
for _ in $(seq 1 50); do (exec 3<>"/dev/tcp/127.0.0.1/$((BAD_PORT + 3))") 2>/dev/null && break; sleep 0.1; done
wh_prepare_db
echo "machine: $(nproc) cores; load average at the start: $(cut -d' ' -f1-3 /proc/loadavg); attempt timeout $PARTNER_WEBHOOK_TIMEOUT; $PER events per partner and run, $PAIRS pairs"

# endpoints BAD: one endpoint at nginx for each of wh-1…wh-9; with BAD=1 the six misbehaving
# ones of wh-10.
endpoints() {
  psql -q "$WH_DB" -c "
    TRUNCATE webhook_deliveries, domain_events, leads, bench_arrivals CASCADE;
    DELETE FROM webhook_endpoints;
    INSERT INTO webhook_endpoints (id, partner_id, url, events, secret, created_at, updated_at)
    SELECT gen_random_uuid(), 'wh-' || g, 'https://127.0.0.1:$WH_NGINX_PORT/hook/' || g,
      '{lead.created}', 'whsec_bench0123456789abcdefghijklmnopqrstuvwxyzABCD', now(), now()
    FROM generate_series(1, 9) g;"
  if [ "$1" = 1 ]; then
    psql -q "$WH_DB" -c "
      INSERT INTO webhook_endpoints (id, partner_id, url, events, secret, created_at, updated_at)
      SELECT gen_random_uuid(), 'wh-10', u, '{lead.created}',
        'whsec_bench0123456789abcdefghijklmnopqrstuvwxyzABCD', now(), now()
      FROM unnest(ARRAY['https://127.0.0.1:$BAD_PORT/trickle', 'https://127.0.0.1:$((BAD_PORT + 1))/huge',
        'https://127.0.0.1:$((BAD_PORT + 2))/reset', 'https://127.0.0.1:$((BAD_PORT + 3))/untrusted',
        'https://no-such-host.invalid/hook', 'https://127.0.0.1:$WH_HANG_PORT/no-tls']) u;"
  fi
  psql -q "$WH_DB" -c "VACUUM ANALYZE webhook_endpoints"
}

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }

# run BAD → "rate rss_growth_kb bad_attempts bad_cpu_ms": the nine's deliveries/s (first to last
# arrival), the server's peak RSS over its RSS once started, the tenth partner's attempts.
run() {
  endpoints "$1"
  wh_prefill "$PER" $((9 + $1))
  wh_rotate_log
  local cpu0; cpu0=$(cpu_ticks "$BAD")
  wh_start_server worker
  local rss0 peak; rss0=$(rss_kb "$WH_SERVER"); peak=$rss0
  while :; do
    local r; r=$(rss_kb "$WH_SERVER"); [ "$r" -gt "$peak" ] && peak=$r
    left=$(psql -qtA "$WH_DB" -c "SELECT count(*) FROM webhook_deliveries WHERE status = 'pending' AND partner_id <> 'wh-10'")
    [ "$left" = 0 ] && break
    sleep 0.2
  done
  r=$(rss_kb "$WH_SERVER"); [ "$r" -gt "$peak" ] && peak=$r
  wh_stop_server
  local cpu1; cpu1=$(cpu_ticks "$BAD")
  read -r _ rate _ _ _ <<<"$(wh_arrivals "w.partner_id <> 'wh-10'")"
  local attempts
  attempts=$(psql -qtA "$WH_DB" -c "SELECT count(*) FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.partner_id = 'wh-10'")
  echo "$rate $((peak - rss0)) $attempts $(((cpu1 - cpu0) * 1000 / $(getconf CLK_TCK)))"
}

rates_base=() rates_bad=() rss_base=() rss_bad=() attempts=() cpu=()
for i in $(seq 1 "$PAIRS"); do
  read -r r g _ _ <<<"$(run 0)"; rates_base+=("$r"); rss_base+=("$g")
  read -r r g a c <<<"$(run 1)"; rates_bad+=("$r"); rss_bad+=("$g"); attempts+=("$a"); cpu+=("$c")
  echo "pair $i: without ${rates_base[-1]}/s (RSS +${rss_base[-1]} kB), with ${rates_bad[-1]}/s (RSS +${rss_bad[-1]} kB; $a attempts to the bad endpoints; bad receivers' CPU ${c} ms)"
done

# What each bad endpoint's attempts ended with in the last run (one line an endpoint).
echo "the last run's attempts to the bad endpoints (endpoint: attempts, outcome, slowest):"
psql -qtA -F' | ' "$WH_DB" -c "
  SELECT regexp_replace(w.url, '^https://[^/]*/', ''), count(*),
    coalesce(a.error, 'HTTP ' || a.status_code), max(a.duration_ms) || ' ms'
  FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id JOIN webhook_endpoints w ON w.id = d.endpoint_id
  WHERE d.partner_id = 'wh-10' GROUP BY 1, 3 ORDER BY 1, 2 DESC" | tee "$WH_WORK/outcomes.txt" | sed 's/^/  /'

median() { printf '%s\n' "$@" | sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
base=$(median "${rates_base[@]}"); bad=$(median "${rates_bad[@]}")
grow_base=$(median "${rss_base[@]}"); grow_bad=$(median "${rss_bad[@]}")
max_bad=$(printf '%s\n' "${rss_bad[@]}" | sort -n | tail -1)
echo "the nine healthy endpoints: $bad deliveries/s with the bad receivers (runs: ${rates_bad[*]}) against $base/s without (runs: ${rates_base[*]}); ratio $(awk -v a="$bad" -v b="$base" 'BEGIN { printf "%.3f", a / b }')"
echo "server RSS growth from its start to its peak: median ${grow_bad} kB with the bad receivers (max ${max_bad} kB), ${grow_base} kB without; the worst run with them $((max_bad - grow_base)) kB over the median without"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"

# Every bad endpoint failed the way it should (the huge body is delivered, read only up to the cap).
ok=1
expect() { grep -q "^$1 | .* | $2" "$WH_WORK/outcomes.txt" || { echo "$1: no attempt ended with \"$2\"" >&2; ok=0; }; }
expect trickle timeout
expect huge "HTTP 200"
expect reset connection
expect untrusted "tls error"
expect hook "dns error"
expect no-tls timeout
[ $((max_bad - grow_base)) -lt 20480 ] || { echo "RSS grew ${max_bad} kB in a run with the bad receivers (${grow_base} kB without)" >&2; ok=0; }
[ "$ok" = 1 ]
