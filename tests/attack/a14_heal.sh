#!/usr/bin/env bash
# attack14: a delivery written below its endpoint's marker without the marking trigger (as a
# data-only restore with --disable-triggers or a logical-replication apply would write it:
# session_replication_role = replica), while leads keep coming for that endpoint.
#   a14_heal.sh TAG BIN PORTBASE TRAFFIC_SECONDS
# Prints when the hidden delivery arrived, relative to its write and to the end of the traffic.
set -uo pipefail
TAG=$1 BIN=$2 PB=$3 TR=${4:-20}
D="$(cd "$(dirname "$0")" && pwd)"
OUT=$D/out/a14heal_$TAG; rm -rf "$OUT"; mkdir -p "$OUT"
DB=pp_attack14_heal_$TAG
export PGHOST=127.0.0.1 PGUSER=postgres PGPORT=5432
"$D/gen-certs.sh"
psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill $p 2>/dev/null; done; wait 2>/dev/null; psql -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" postgres' EXIT
RP=$((PB+5))
python3 "$D/a14_recv.py" --port $RP --log "$OUT/recv.log" --fail 0 --delay "${RDELAY:-0}" & PIDS+=($!)
env DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB" PARTNER_WEBHOOK_ALLOW_PRIVATE=true \
  PARTNER_WEBHOOK_CA_FILE="$D/certs/ca.pem" RUST_LOG=warn PARTNER_BIND=127.0.0.1:$PB \
  PARTNER_METRICS_BIND=127.0.0.1:$((PB+1)) PARTNER_DEMO_ACCESS_FILE="$OUT/access" "$BIN" demo >"$OUT/demo.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 150); do [ -s "$OUT/access" ] && break; sleep 0.2; done
. "$OUT/access"
BASE=http://127.0.0.1:$PB
P() { curl -s -H "Authorization: Bearer $PARTNER_TOKEN" -H 'content-type: application/json' "$@"; }
for id in $(P "$BASE/api/v1/webhook-endpoints" | python3 -c 'import json,sys; print(" ".join(e["id"] for e in json.load(sys.stdin)["data"]))'); do
  P -X DELETE "$BASE/api/v1/webhook-endpoints/$id" >/dev/null; done
P -X POST "$BASE/api/v1/webhook-endpoints" -d "{\"url\":\"https://127.0.0.1:$RP/hook/1\",\"events\":[\"lead.created\"]}" >/dev/null
lead() { curl -s -o /dev/null -H "Authorization: Bearer $INTERNAL_TOKEN" -H 'content-type: application/json' -X POST "$BASE/internal/v1/leads" \
  -d '{"partnerId":"demo-clinic","firstName":"Ann","lastName":"Lee","email":"a@example.com","emailConsent":true,"phone":"+1 555 0100","smsConsent":true,"origin":"managed-website","location":"Austin, TX"}'; }
( end=$(( $(date +%s) + TR )); while [ "$(date +%s)" -lt "$end" ]; do lead; sleep 0.1; done; date +%s.%N >"$OUT/traffic_end" ) &
TP=$!
sleep 3
# the hidden one: a copy of the newest delivery's event, due 5 s ago, written with the trigger off
HID=$(psql -qAt $DB -c "SET session_replication_role = replica;
  INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, attempts, next_attempt_at, created_at)
  SELECT gen_random_uuid(), endpoint_id, partner_id, event_id, kind, 'pending', 0, now() - interval '5 s', now() - interval '5 s'
  FROM webhook_deliveries ORDER BY created_at DESC LIMIT 1 RETURNING id" | grep -E "^[0-9a-f-]{36}$" | head -1)
W=$(date +%s.%N)
echo "hidden delivery $HID written at $W; marker then: $(psql -At $DB -c "SELECT due_at FROM webhook_endpoint_queue")"
[ -n "$HID" ] || { echo "no hidden delivery written"; exit 1; }
for _ in $(seq 1 $(( (TR + 15) * 5 ))); do
  st=$(psql -At $DB -c "SELECT status FROM webhook_deliveries WHERE id = '$HID'")
  [ "$st" = delivered ] && break; sleep 0.2; done
wait $TP
A=$(awk -v id="$HID" '$3==id {print $1; exit}' "$OUT/recv.log")
TE=$(cat "$OUT/traffic_end")
echo "status $st; leads delivered $(grep -c ' 200 ' "$OUT/recv.log"); hidden arrived $(python3 -c "
a='$A'; w=$W; te=$TE
print('never' if not a else f'{float(a)-w:.2f} s after its write, {float(a)-te:+.2f} s from the end of the traffic')")"
