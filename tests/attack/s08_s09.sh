#!/usr/bin/env bash
# S-08: custom header names (spellings of reserved names must be refused, partner and operator
# API, POST and PATCH) and what a delivery carries; S-09: where the custom header value appears.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
start_server s08 18480 || exit 1
start_receiver s08 18485
trap 'stop_server; stop_receiver' EXIT
URL="https://127.0.0.1:18485/s08"
for id in $(P "$BASE/api/v1/webhook-endpoints" | jq -r '.data[].id'); do P -X DELETE "$BASE/api/v1/webhook-endpoints/$id" >/dev/null; done
EP=$(P -X POST "$BASE/api/v1/webhook-endpoints" -d "{\"url\":\"$URL\",\"events\":[\"lead.created\"],\"secret\":true}" | jq -r .data.id)

reserved=(X_Partner_Signature x-partner-signature X-PARTNER-SIGNATURE x_partner_delivery X-Partner-Event
  X-Partner-Event-Id x_partner_event_id webhook-signature Webhook_Signature WEBHOOK-ID webhook_timestamp Webhook-Anything
  Connection CONNECTION keep_alive Keep-Alive Proxy-Connection proxy_connection TE te Trailer trailer Upgrade
  Expect Content-Encoding content_encoding Proxy-Authorization proxy_authorization Cookie COOKIE Forwarded
  forwarded X-Forwarded-For x_forwarded_for X-Forwarded-Host X_FORWARDED_PROTO X-Real-IP x_real_ip X-Real_Ip
  Content-Type content_type Content-Length content_length Host HOST Transfer-Encoding transfer_encoding
  User-Agent user_agent Authorization AUTHORIZATION)
# not in the ruling's list; printed for the report (accepted = sent to receivers)
others=(Proxy X-Forwarded X.Partner.Signature X-Partner.Signature XPartnerSignature X--Partner-Signature
  Via True-Client-IP X-Client-IP CF-Connecting-IP X-Original-URL X-Rewrite-URL X-HTTP-Method-Override
  Set-Cookie Cookie2 Proxy-Authenticate Max-Forwards Accept-Encoding Date Content-Md5 Digest Range
  Idempotency-Key Sec-Fetch-Site Origin Referer)
bad=0
try() {  # try NAME -> prints statuses of partner POST, partner PATCH, operator POST, operator PATCH
  local n=$1 v="val-$RANDOM"
  local b="{\"url\":\"$URL\",\"events\":[\"lead.created\"],\"customHeader\":{\"name\":\"$n\",\"value\":\"$v\"}}"
  local s1 s2 s3 s4 id
  s1=$(P -o /tmp/s08.$$ -w '%{http_code}' -X POST "$BASE/api/v1/webhook-endpoints" -d "$b")
  [ "$s1" = 201 ] && { id=$(jq -r .data.id /tmp/s08.$$); P -X DELETE "$BASE/api/v1/webhook-endpoints/$id" >/dev/null; }
  s2=$(P -o /dev/null -w '%{http_code}' -X PATCH "$BASE/api/v1/webhook-endpoints/$EP" -d "{\"customHeader\":{\"name\":\"$n\",\"value\":\"$v\"}}")
  s3=$(I -o /tmp/s08.$$ -w '%{http_code}' -X POST "$BASE/internal/v1/partners/demo-clinic/webhook-endpoints" -d "$b")
  [ "$s3" = 201 ] && { id=$(jq -r .data.id /tmp/s08.$$); I -X DELETE "$BASE/internal/v1/partners/demo-clinic/webhook-endpoints/$id" >/dev/null; }
  s4=$(I -o /dev/null -w '%{http_code}' -X PATCH "$BASE/internal/v1/partners/demo-clinic/webhook-endpoints/$EP" -d "{\"customHeader\":{\"name\":\"$n\",\"value\":\"$v\"}}")
  echo "$s1 $s2 $s3 $s4"
}
echo "== reserved spellings (want 400 400 400 400)"
for n in "${reserved[@]}"; do
  r=$(try "$n"); [ "$r" = "400 400 400 400" ] || { bad=$((bad+1)); echo "ACCEPTED? $n -> $r"; }
done
echo "reserved spellings refused: $(( ${#reserved[@]} - bad )) of ${#reserved[@]}"
echo "== names outside the ruling's list (informational)"
for n in "${others[@]}"; do printf '  %-24s %s\n' "$n" "$(try "$n")"; done
echo "== httpoxy: a delivery with the custom header Proxy (CGI: HTTP_PROXY)"
P -X PATCH "$BASE/api/v1/webhook-endpoints/$EP" -d '{"customHeader":{"name":"Proxy","value":"http://attacker.example:3128"}}' -o /dev/null -w '  PATCH Proxy: %{http_code}\n'
P -X POST "$BASE/api/v1/webhook-endpoints/$EP/test" -o /dev/null -w '  test: %{http_code}\n'; sleep 2
echo "  receiver saw: $(tail -1 "$RECV_LOG" | jq -c '[.headers[]|select(.[0]|ascii_downcase=="proxy")]')"
echo "== value with CR LF / non-ASCII / 1025 chars (want 400)"
for v in 'a\r\nX-Partner-Signature: t=1,v1=00' 'caf\u00e9' "$(printf 'x%.0s' $(seq 1025))"; do
  printf '  %s -> %s\n' "${v:0:30}" "$(P -o /dev/null -w '%{http_code}' -X PATCH "$BASE/api/v1/webhook-endpoints/$EP" -d "{\"customHeader\":{\"name\":\"X-Key\",\"value\":\"$v\"}}")"
done

echo "== S-09: where the value appears"
HV="s09-secret-value-$RANDOM$RANDOM"
resp() { printf '  %-52s value=%s hint=%s\n' "$1" "$(grep -cF "$HV" <<<"$2")" "$(jq -c '[..|objects|select(has("valueHint"))|.valueHint][0]' <<<"$2" 2>/dev/null)"; }
resp "partner PATCH that sets it (value expected)" "$(P -X PATCH "$BASE/api/v1/webhook-endpoints/$EP" -d "{\"customHeader\":{\"name\":\"X-Key\",\"value\":\"$HV\"}}")"
resp "partner GET list" "$(P "$BASE/api/v1/webhook-endpoints")"
resp "partner PATCH {events}" "$(P -X PATCH "$BASE/api/v1/webhook-endpoints/$EP" -d '{"events":["lead.created"]}')"
resp "partner PATCH {secret:true}" "$(P -X PATCH "$BASE/api/v1/webhook-endpoints/$EP" -d '{"secret":true}')"
resp "partner PATCH same header again" "$(P -X PATCH "$BASE/api/v1/webhook-endpoints/$EP" -d "{\"customHeader\":{\"name\":\"X-Key\",\"value\":\"$HV\"}}")"
resp "partner GET by id (if any)" "$(P "$BASE/api/v1/webhook-endpoints/$EP")"
resp "operator GET list" "$(I "$BASE/internal/v1/partners/demo-clinic/webhook-endpoints")"
resp "operator PATCH {enabled:true}" "$(I -X PATCH "$BASE/internal/v1/partners/demo-clinic/webhook-endpoints/$EP" -d '{"enabled":true}')"
resp "test ping answer" "$(P -X POST "$BASE/api/v1/webhook-endpoints/$EP/test")"
sleep 2
resp "partner deliveries list" "$(P "$BASE/api/v1/webhook-deliveries")"
D=$(P "$BASE/api/v1/webhook-deliveries" | jq -r '.data[0].id')
resp "partner delivery by id" "$(P "$BASE/api/v1/webhook-deliveries/$D")"
resp "operator deliveries list" "$(I "$BASE/internal/v1/partners/demo-clinic/webhook-deliveries")"
resp "events feed" "$(P "$BASE/api/v1/events?limit=200")"
resp "openapi" "$(curl -s "$BASE/api/v1/openapi.json")"
echo "  delivery carries the value: $(grep -cF "$HV" "$RECV_LOG") deliveries"
echo "== Idempotency-Key replay of a POST with secret:true and a header (another token of the partner)"
KEY="idem-$RANDOM"; B="{\"url\":\"$URL\",\"events\":[\"lead.created\"],\"secret\":true,\"customHeader\":{\"name\":\"X-Key\",\"value\":\"$HV\"}}"
r1=$(P -X POST "$BASE/api/v1/webhook-endpoints" -H "Idempotency-Key: $KEY" -d "$B" -D /tmp/s08h1.$$)
r2=$(P -X POST "$BASE/api/v1/webhook-endpoints" -H "Idempotency-Key: $KEY" -d "$B" -D /tmp/s08h2.$$)
echo "  first: $(jq -c '{id:.data.id, secret:(.data.secret!=null)}' <<<"$r1")  second: $(jq -c '{id:.data.id, secret:(.data.secret!=null)}' <<<"$r2") replayed: $(grep -ci idempotent-replayed /tmp/s08h2.$$)"
echo "RESULT reserved-accepted=$bad"
