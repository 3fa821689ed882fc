# Shared by bench/webhooks.sh and bench/drill-kill9.sh (sourced, not run): a throw-away HTTPS
# receiver (Debian's nginx on loopback, its own config and certificate), a hanging TLS port, a
# benchmark database with partners and endpoints, event generators, and the arrival analysis.
# Everything listens on 127.0.0.1 only and is stopped by `wh_cleanup`.

export PGHOST=127.0.0.1 PGPORT=${BENCH_PGPORT:-5432} PGUSER=postgres
WH_DB=${BENCH_DB:-pp_bench_webhooks}
WH_PORT=${BENCH_PORT:-18091}
WH_NGINX_PORT=${BENCH_NGINX_PORT:-18443}
WH_HANG_PORT=${BENCH_HANG_PORT:-18444}
WH_WORK=$(mktemp -d /tmp/pp-webhooks.XXXXXX)
WH_SERVER=""
WH_HANG=""
BIN=${CARGO_TARGET_DIR:-target}/release/partner-server

export DATABASE_URL="postgres://postgres@127.0.0.1:$PGPORT/$WH_DB"
export PARTNER_BIND="127.0.0.1:$WH_PORT" PARTNER_TOKEN_PEPPER=bench-pepper
export PARTNER_INTERNAL_TOKEN=bench-internal-token-0123456789abcdef RUST_LOG=${RUST_LOG:-warn}
export PARTNER_WEBHOOK_ALLOW_PRIVATE=true PARTNER_WEBHOOK_CA_FILE="$WH_WORK/cert.pem"
# The benchmarks stop and start servers often: no drain of serving after SIGTERM (src/shutdown.rs).
export PARTNER_SHUTDOWN_DRAIN=${PARTNER_SHUTDOWN_DRAIN:-0}

wh_install() {
  local missing=()
  command -v nginx >/dev/null || missing+=(nginx-light)
  command -v wrk >/dev/null || missing+=(wrk)
  if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    # The package may start a default nginx on port 80; this benchmark runs its own.
    nginx -s stop 2>/dev/null || true
  fi
  command -v pgbench >/dev/null || { echo "pgbench is missing (it ships with PostgreSQL)" >&2; exit 1; }
  cargo build --release -q -p partner-server
}

wh_cleanup() {
  [ -n "$WH_SERVER" ] && kill -9 "$WH_SERVER" 2>/dev/null || true
  [ -n "$WH_HANG" ] && kill "$WH_HANG" 2>/dev/null || true
  [ -f "$WH_WORK/nginx.pid" ] && nginx -p "$WH_WORK" -c "$WH_WORK/nginx.conf" -s stop 2>/dev/null || true
  # BENCH_KEEP_SERVER_LOG=<file>: the servers' log of the run is kept there.
  [ -n "${BENCH_KEEP_SERVER_LOG:-}" ] && cp "$WH_WORK/server.log" "$BENCH_KEEP_SERVER_LOG" 2>/dev/null || true
  rm -rf "$WH_WORK"
}

# nginx as the HTTPS receiver: one worker (the server, PostgreSQL and the load share two cores),
# keep-alive, and an access log of "<arrival time> <X-Partner-Delivery>". WH_NGINX_HTTP and
# WH_NGINX_SERVER, if set, are added to its http and server blocks (bench/soak.sh's failing and
# slow endpoints).
wh_start_receiver() {
  openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
    -addext "subjectAltName=IP:127.0.0.1" -addext "basicConstraints=critical,CA:FALSE" -keyout "$WH_WORK/key.pem" -out "$WH_WORK/cert.pem" 2>/dev/null
  mkdir -p "$WH_WORK/tmp"
  cat > "$WH_WORK/nginx.conf" <<EOF
user root;
worker_processes 1;
pid $WH_WORK/nginx.pid;
error_log $WH_WORK/error.log warn;
events { worker_connections 8192; }
http {
  client_body_temp_path $WH_WORK/tmp;
  log_format hook '\$msec \$http_x_partner_delivery';
  keepalive_requests 10000000;
  keepalive_timeout 120s;
  ${WH_NGINX_HTTP:-}
  server {
    listen 127.0.0.1:$WH_NGINX_PORT ssl;
    ssl_certificate $WH_WORK/cert.pem;
    ssl_certificate_key $WH_WORK/key.pem;
    access_log $WH_WORK/access.log hook buffer=256k flush=200ms;
    ${WH_NGINX_SERVER:-}
    location / { return 200 "ok"; }
  }
}
EOF
  nginx -p "$WH_WORK" -c "$WH_WORK/nginx.conf"
  for _ in $(seq 1 50); do curl -sk "https://127.0.0.1:$WH_NGINX_PORT/" >/dev/null && return; sleep 0.1; done
  echo "nginx did not start" >&2; cat "$WH_WORK/error.log" >&2; exit 1
}

# A TLS port that accepts connections and never answers.
wh_start_hanging() {
  python3 - "$WH_HANG_PORT" <<'PY' &
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(4096)
held = []
while True:
    c, _ = s.accept(); held.append(c)
PY
  WH_HANG=$!
}

# The receiver's own limit: wrk posting a delivery-sized body over keep-alive HTTPS.
wh_receiver_limit() {
  cat > "$WH_WORK/post.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = string.rep("x", 700)
LUA
  wrk -t1 -c64 -d"${1:-8s}" -s "$WH_WORK/post.lua" "https://127.0.0.1:$WH_NGINX_PORT/" | awk '/Requests\/sec/ {print $2}'
}

wh_rotate_log() {
  rm -f "$WH_WORK/access.log"
  nginx -p "$WH_WORK" -c "$WH_WORK/nginx.conf" -s reopen
  sleep 0.3
}

wh_prepare_db() {
  psql -qc "DROP DATABASE IF EXISTS $WH_DB WITH (FORCE)" postgres
  $BIN migrate
  psql -q "$WH_DB" -c "
    INSERT INTO partners (partner_id, name, email, active, dna_access, headless_links, default_lang, enabled_langs,
      cs_subscription_active, cs_manual_override, cs_yearly_bundle, cs_services, created_at, updated_at)
    SELECT 'wh-' || g, 'Bench ' || g, 'ops' || g || '@bench.test', true, false, true, 'en', '{en}',
      false, false, false, '{}', now(), now() FROM generate_series(1, 10) g;
    CREATE TABLE bench_arrivals (ms numeric, id text);"
}

# wh_endpoints N HANGING: one signed endpoint for each of partners wh-1…wh-N at nginx; with
# HANGING=1 the last one points at the hanging port instead.
wh_endpoints() {
  local n=$1 hanging=${2:-0}
  psql -q "$WH_DB" -c "
    TRUNCATE webhook_deliveries, domain_events, leads, bench_arrivals CASCADE;
    DELETE FROM webhook_endpoints;
    INSERT INTO webhook_endpoints (id, partner_id, url, events, secret, created_at, updated_at)
    SELECT gen_random_uuid(), 'wh-' || g,
      CASE WHEN $hanging = 1 AND g = $n THEN 'https://127.0.0.1:$WH_HANG_PORT/hang'
           ELSE 'https://127.0.0.1:$WH_NGINX_PORT/hook/' || g END,
      '{lead.created}', 'whsec_bench0123456789abcdefghijklmnopqrstuvwxyzABCD', now(), now()
    FROM generate_series(1, $n) g;" -c "VACUUM ANALYZE webhook_endpoints"
}

# wh_idle N: N more endpoints that never receive anything (10 for each of partners idle-1…,
# which write nothing), as other partners' endpoints are beside the ones under test (issue 22,
# item 1: a claim's cost must grow with the endpoints that have due work, not with all).
wh_idle() {
  local n=$1
  [ "$n" -gt 0 ] || return 0
  psql -q "$WH_DB" -c "
    INSERT INTO partners (partner_id, name, email, active, dna_access, headless_links, default_lang, enabled_langs,
      cs_subscription_active, cs_manual_override, cs_yearly_bundle, cs_services, created_at, updated_at)
    SELECT 'idle-' || g, 'Idle ' || g, 'ops' || g || '@idle.test', true, false, true, 'en', '{en}',
      false, false, false, '{}', now(), now() FROM generate_series(1, ($n + 9) / 10) g
    ON CONFLICT DO NOTHING;
    INSERT INTO webhook_endpoints (id, partner_id, url, events, secret, created_at, updated_at)
    SELECT gen_random_uuid(), 'idle-' || (1 + g / 10), 'https://127.0.0.1:$WH_NGINX_PORT/idle/' || g,
      '{lead.created}', 'whsec_bench0123456789abcdefghijklmnopqrstuvwxyzABCD', now(), now()
    FROM generate_series(0, $n - 1) g;" -c "VACUUM ANALYZE webhook_endpoints"
}

# The id function of the outbox's events and deliveries, as the server under test writes them:
# `uuid_v7()` where its schema has it (migration 000016: time-ordered ids), else
# `gen_random_uuid()` (an older binary's schema, for A/B runs).
wh_id_fn() {
  psql -Atq "$WH_DB" -c "SELECT COALESCE(to_regprocedure('uuid_v7()')::text, 'gen_random_uuid()')"
}

# wh_prefill_rows PARTNER_SQL ROWS AFTER_SQL: ROWS leads (row number `g` from 0, for PARTNER_SQL
# to name each one's partner), each with its event and one pending delivery per enabled endpoint
# of its partner, written set-based while no worker runs; then AFTER_SQL.
wh_prefill_rows() {
  local id
  id=$(wh_id_fn)
  psql -q "$WH_DB" -c "
    WITH l AS (
      INSERT INTO leads (id, partner_id, first_name, last_name, email, email_consent, phone, sms_consent,
        origin, location, is_test, created_at, updated_at)
      SELECT gen_random_uuid(), $1, 'Ann', 'Lee', 'ann@example.com', true, '+1 555 0100', true,
        'managed-website', 'Austin, TX', false, clock_timestamp(), clock_timestamp()
      FROM generate_series(0, $2 - 1) g
      RETURNING id, partner_id, created_at),
    ev AS (
      INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at)
      SELECT $id, partner_id, 'lead.created', id::text, '{}', created_at FROM l
      RETURNING id, partner_id, created_at)
    INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, attempts, next_attempt_at, created_at)
    SELECT $id, w.id, w.partner_id, ev.id, 'lead.created', 'pending', 0, ev.created_at, ev.created_at
    FROM ev JOIN webhook_endpoints w ON w.partner_id = ev.partner_id AND w.disabled_at IS NULL;" -c "$3"
}

# wh_prefill_partner PARTNER EVENTS: EVENTS leads of PARTNER (a dataset's big partner) and their
# deliveries (bench/webhooks-dataset.sh's pre-filled case, bench/dataset-claim-probe.sh).
wh_prefill_partner() {
  wh_prefill_rows "'$1'" "$2" "ANALYZE webhook_deliveries"
}

# The outbox rows the server writes for a lead (lead, event, one delivery per subscribed
# endpoint), for partner wh-P, as one statement. (pgbench runs wh_notify_sql beside it, as the
# server's announcer does after such commits.)
wh_event_sql() {
  local id
  id=$(wh_id_fn)
  sed "s/@ID@/$id/g" <<'SQL'
WITH l AS (
  INSERT INTO leads (id, partner_id, first_name, last_name, email, email_consent, phone, sms_consent,
    origin, location, is_test, created_at, updated_at)
  VALUES (gen_random_uuid(), 'wh-' || :p, 'Ann', 'Lee', 'ann@example.com', true, '+1 555 0100', true,
    'managed-website', 'Austin, TX', false, clock_timestamp(), clock_timestamp())
  RETURNING id, partner_id, created_at),
ev AS (
  INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at)
  SELECT @ID@, partner_id, 'lead.created', id::text, '{}', created_at FROM l
  RETURNING id, partner_id, created_at)
INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, attempts, next_attempt_at, created_at)
SELECT @ID@, w.id, w.partner_id, ev.id, 'lead.created', 'pending', 0, ev.created_at, ev.created_at
FROM ev JOIN webhook_endpoints w ON w.partner_id = ev.partner_id;
SQL
}

# The server's announcer: a non-durable NOTIFY in a transaction of its own, in one round trip as
# the announcer sends it (its connection has `synchronous_commit = off` for the session, and each
# announcement is one autocommitted `NOTIFY`). Until 2026-11-27 this was BEGIN, SET LOCAL, NOTIFY
# and COMMIT: four round trips after each event that the server's path does not have.
wh_notify_sql() {
  printf "SELECT set_config('synchronous_commit', 'off', true), pg_notify('webhook_deliveries', '');\n"
}

# Live ingest through the server's own operator API (wrk, 32 connections, $1 long), leads
# spread over partners wh-1…wh-10.
wh_ingest_api() {
  cat > "$WH_WORK/ingest.lua" <<LUA
local n = 0
request = function()
  n = n + 1
  local body = '{"partnerId":"wh-' .. (n % 10 + 1) .. '","firstName":"Ann","lastName":"Lee","email":"ann@example.com",'
    .. '"emailConsent":true,"phone":"+1 555 0100","smsConsent":true,"origin":"managed-website","location":"Austin, TX"}'
  return wrk.format("POST", "/internal/v1/leads", {
    ["Authorization"] = "Bearer $PARTNER_INTERNAL_TOKEN", ["Content-Type"] = "application/json" }, body)
end
LUA
  wrk -t1 -c32 -d"$1" -s "$WH_WORK/ingest.lua" "http://127.0.0.1:$WH_PORT" | awk '/Requests\/sec/ {printf "%.0f", $2}'
}

# wh_prefill PER_PARTNER N_PARTNERS: PER_PARTNER leads for each of partners wh-1…wh-N and their
# deliveries, written set-based while no worker runs.
wh_prefill() {
  wh_prefill_rows "'wh-' || (1 + g % $2)" "$(($1 * $2))" "VACUUM ANALYZE webhook_deliveries"
}

wh_start_server() {
  $BIN serve --no-migrate --role "${1:-worker}" >>"$WH_WORK/server.log" 2>&1 &
  WH_SERVER=$!
  for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$WH_PORT/healthz" >/dev/null && return; sleep 0.1; done
  echo "the server did not start" >&2; tail -20 "$WH_WORK/server.log" >&2; exit 1
}

wh_stop_server() {
  [ -n "$WH_SERVER" ] && { kill "$WH_SERVER" 2>/dev/null; wait "$WH_SERVER" 2>/dev/null || true; }
  WH_SERVER=""
}

# Waits until no delivery is pending (or $2 seconds pass); $1 is an SQL filter on the endpoints.
wh_wait_done() {
  local filter=${1:-true} limit=${2:-300}
  for _ in $(seq 1 $((limit * 5))); do
    left=$(psql -qtA "$WH_DB" -c "SELECT count(*) FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id WHERE d.status = 'pending' AND $filter")
    [ "$left" = 0 ] && return 0
    sleep 0.2
  done
  echo "still pending after ${limit}s: $left" >&2
  return 1
}

# Loads nginx's log and prints "count rate p50_ms p99_ms live_rate" for the deliveries whose
# endpoint matches $1: rate over first to last arrival, latency from the event to its arrival,
# live_rate over the first event's creation to the last arrival. (One primary-key lookup per
# arrival, forced by the LATERAL subquery: on a database of bench/dataset.sh a join on the id as
# text reads all 10,000,000 deliveries, and a planner that has not seen the new deliveries yet
# loops over the arrivals once per delivery.)
wh_arrivals() {
  sleep 0.5 # the log's flush interval
  psql -q "$WH_DB" -c "TRUNCATE bench_arrivals" -c "\\copy bench_arrivals FROM '$WH_WORK/access.log' WITH (FORMAT text, DELIMITER ' ')"
  wh_arrival_stats "${1:-true}"
}

# wh_arrivals_after SECONDS: after wh_arrivals, "p50_ms p99_ms" of the deliveries whose events
# were written SECONDS or more after the first delivery of the (fresh) database: a live case's
# figures without its first second, when the writers' own connections are new (pgbench's 16
# sessions each parse, plan and cache their first statement and trigger, so the first events
# commit ~80 ms after their timestamp, before any worker sees them) and so are the server's.
wh_arrivals_after() {
  wh_arrival_stats "d.created_at >= (SELECT min(created_at) FROM webhook_deliveries) + make_interval(secs => $1)" \
    | cut -d' ' -f3,4
}

# The figures of wh_arrivals over the arrivals already loaded, for the deliveries matching $1.
wh_arrival_stats() {
  psql -qtA -F' ' "$WH_DB" -c "
    WITH a AS (
      SELECT to_timestamp(b.ms) AS at, d.created_at
      FROM (SELECT ms, id::uuid AS id FROM bench_arrivals WHERE id ~ '^[0-9a-f-]{36}$' OFFSET 0) b
      CROSS JOIN LATERAL (SELECT * FROM webhook_deliveries d WHERE d.id = b.id OFFSET 0) d
      JOIN webhook_endpoints w ON w.id = d.endpoint_id
      WHERE $1)
    SELECT count(*),
      round((count(*) / GREATEST(extract(epoch FROM max(at) - min(at)), 0.001))::numeric, 0),
      round((1000 * percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM at - created_at)))::numeric, 1),
      round((1000 * percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM at - created_at)))::numeric, 1),
      round((count(*) / GREATEST(extract(epoch FROM max(at) - min(created_at)), 0.001))::numeric, 0)
    FROM a"
}
