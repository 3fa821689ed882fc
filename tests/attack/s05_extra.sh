#!/usr/bin/env bash
# S-05, second part:
#  1. a delivery whose first attempt failed before a rotation: is its retry (after the rotation
#     was answered) signed with the new secret? With expirePrevious, without the old one?
#  2. an expired previous secret is erased from storage (not only hidden) by the first delivery
#     or change after its expiry (PARTNER_WEBHOOK_SECRET_OVERLAP=3s here).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
PARTNER_WEBHOOK_SECRET_OVERLAP=3s PARTNER_WEBHOOK_RETRY_SCHEDULE=3s,3s,3s start_server s05x 18500 || exit 1
start_receiver s05x 18505
trap 'stop_server; stop_receiver' EXIT
DB="postgresql://postgres@127.0.0.1:5432/attack_s05x"
for id in $(P "$BASE/api/v1/webhook-endpoints" | jq -r '.data[].id'); do P -X DELETE "$BASE/api/v1/webhook-endpoints/$id" >/dev/null; done
mk() { P -X POST "$BASE/api/v1/webhook-endpoints" -d "{\"url\":\"https://127.0.0.1:18505/$1\",\"events\":[\"lead.created\"],\"secret\":true}"; }
verify() {  # verify RECORD-JSON SECRET -> 1 when the secret's v1 is in X-Partner-Signature
  python3 - "$1" "$2" <<'PY'
import json, sys, hmac, hashlib
rec, s = json.loads(sys.argv[1]), sys.argv[2]
sig = [v for k, v in rec["headers"] if k.lower() == "x-partner-signature"][0]
p = [x.split("=", 1) for x in sig.split(",")]
t = [v for k, v in p if k == "t"][0]
print(int(hmac.new(s.encode(), f"{t}.".encode() + rec["body"].encode(), hashlib.sha256).hexdigest() in [v for k, v in p if k == "v1"]))
PY
}
for variant in overlap expirePrevious; do
  e=$(mk "retry-$variant"); EP=$(jq -r .data.id <<<"$e"); S0=$(jq -r .data.secret <<<"$e")
  echo 500 >"$RECV_MODE"
  lid=$(lead demo-clinic "retry-$variant-$RANDOM@x.test" | jq -r .data.id)
  for _ in $(seq 50); do grep -q "$lid" "$RECV_LOG" && break; sleep 0.1; done
  if [ $variant = overlap ]; then body='{"secret":true}'; else body='{"secret":true,"expirePrevious":true}'; fi
  S1=$(P -X PATCH "$BASE/api/v1/webhook-endpoints/$EP" -d "$body" | jq -r .data.secret)
  echo 200 >"$RECV_MODE"
  for _ in $(seq 100); do [ "$(grep "$lid" "$RECV_LOG" | grep "/retry-$variant\"" | grep -c '"status": 200')" -ge 1 ] && break; sleep 0.1; done
  first=$(grep "$lid" "$RECV_LOG" | grep "/retry-$variant\"" | head -1); retry=$(grep "$lid" "$RECV_LOG" | grep "/retry-$variant\"" | grep '"status": 200' | head -1)
  P -X DELETE "$BASE/api/v1/webhook-endpoints/$EP" >/dev/null
  echo "$variant: first attempt S0=$(verify "$first" "$S0") | retry after rotation: S1(new)=$(verify "$retry" "$S1") S0(old)=$(verify "$retry" "$S0")"
done

echo "--- expired previous secret erased from storage"
e=$(mk erase); EP=$(jq -r .data.id <<<"$e")
P -X PATCH "$BASE/api/v1/webhook-endpoints/$EP" -d '{"secret":true}' >/dev/null
echo "right after rotation: $(psql -qtA "$DB" -c "select previous_secret is not null, previous_secret_expires_at from webhook_endpoints where id='$EP'")"
sleep 4
echo "4 s later, nothing happened: $(psql -qtA "$DB" -c "select previous_secret is not null from webhook_endpoints where id='$EP'") (GET shows previousSecretExpiresAt=$(P "$BASE/api/v1/webhook-endpoints" | jq -r ".data[]|select(.id==\"$EP\")|.previousSecretExpiresAt"))"
lid=$(lead demo-clinic "erase-$RANDOM@x.test" | jq -r .data.id)
for _ in $(seq 50); do grep -q "$lid" "$RECV_LOG" && break; sleep 0.1; done; sleep 1
echo "after a delivery: previous_secret stored=$(psql -qtA "$DB" -c "select previous_secret is not null from webhook_endpoints where id='$EP'") v1 count=$(grep "$lid" "$RECV_LOG" | head -1 | grep -o 'v1=' | wc -l)"
e=$(mk erase2); EP2=$(jq -r .data.id <<<"$e")
P -X PATCH "$BASE/api/v1/webhook-endpoints/$EP2" -d '{"secret":true}' >/dev/null; sleep 4
P -X PATCH "$BASE/api/v1/webhook-endpoints/$EP2" -d '{"events":["lead.created","order.created"]}' >/dev/null
echo "after a PATCH {events}: previous_secret stored=$(psql -qtA "$DB" -c "select previous_secret is not null from webhook_endpoints where id='$EP2'")"
e=$(mk erase3); EP3=$(jq -r .data.id <<<"$e")
P -X PATCH "$BASE/api/v1/webhook-endpoints/$EP3" -d '{"secret":true}' >/dev/null; sleep 4
P -X POST "$BASE/api/v1/webhook-endpoints/$EP3/test" >/dev/null; sleep 2
echo "after a test ping: previous_secret stored=$(psql -qtA "$DB" -c "select previous_secret is not null from webhook_endpoints where id='$EP3'")"
P -X PATCH "$BASE/api/v1/webhook-endpoints/$EP3" -d '{"enabled":false}' >/dev/null
