#!/usr/bin/env bash
# S-02: no RUST_LOG setting puts secrets, header values, tokens or personal data into the log.
# Usage: RUST_LOG=<filter> s02.sh <name>   (e.g. RUST_LOG=trace s02.sh trace)
# Drives webhooks (secret, custom header value, URL with a query credential), leads (e-mail,
# phone, name), orders (customer e-mail), a portal session, a coupon redemption, then searches
# the whole log for every known value and prints the targets that logged at DEBUG/TRACE.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
name=${1:-trace}
port=${S02_PORT:-18450}
R=$(python3 -c 'import secrets;print(secrets.token_hex(6))')
RPORT=$((port+5))
PARTNER_REDIS_URL=${PARTNER_REDIS_URL-redis://127.0.0.1:6379/9} PARTNER_WEBHOOK_RETRY_SCHEDULE=200ms,200ms \
  start_server "s02_$name" "$port" || exit 1
start_receiver "s02_$name" "$RPORT"
trap 'stop_server; stop_receiver' EXIT

HV="hdrval$R"; QS="qcred$R"; EMAIL="mail$R@leak.test"; PHONE="+1 555 77$((RANDOM%90+10)) $((RANDOM%9000+1000))"
FIRST="Zelda$R"; CEMAIL="cust$R@leak.test"; NEWPHONE="+44 20 7$((RANDOM%900+100)) $((RANDOM%9000+1000))"
known=("$TOKEN" "$ITOKEN" "$HV" "$QS" "$EMAIL" "$PHONE" "$FIRST" "$CEMAIL" "$NEWPHONE")
labels=(partner-token internal-token header-value url-query-credential lead-email lead-phone lead-first-name customer-email new-phone)

ep=$(P -X POST "$BASE/api/v1/webhook-endpoints" -d "{\"url\":\"https://127.0.0.1:$RPORT/s02/ok?apikey=$QS\",\"events\":[\"lead.created\",\"lead.enriched\",\"order.created\"],\"secret\":true,\"customHeader\":{\"name\":\"X-Api-Key\",\"value\":\"$HV\"}}")
EP=$(jq -r .data.id <<<"$ep"); SEC1=$(jq -r .data.secret <<<"$ep")
# an endpoint that refuses connections, with the credential in its query (error paths)
ep2=$(P -X POST "$BASE/api/v1/webhook-endpoints" -d "{\"url\":\"https://127.0.0.1:1/s02?apikey=$QS\",\"events\":[\"lead.created\"],\"secret\":true,\"customHeader\":{\"name\":\"X-Api-Key\",\"value\":\"$HV\"}}")
SEC2=$(jq -r .data.secret <<<"$ep2")
lead=$(I -X POST "$BASE/internal/v1/leads" -d "{\"partnerId\":\"demo-clinic\",\"firstName\":\"$FIRST\",\"lastName\":\"Leak\",\"email\":\"$EMAIL\",\"emailConsent\":true,\"phone\":\"$PHONE\",\"smsConsent\":true,\"origin\":\"managed-website\",\"location\":\"Austin, TX\"}")
LID=$(jq -r .data.id <<<"$lead")
I -X PATCH "$BASE/internal/v1/leads/$LID" -d "{\"phone\":\"$NEWPHONE\"}" >/dev/null
I -X POST "$BASE/internal/v1/orders" -d "{\"orderId\":\"ORD-$R\",\"partnerId\":\"demo-clinic\",\"amount\":10,\"commission\":1,\"createdDate\":\"2026-11-20T10:00:00Z\",\"status\":\"complete\",\"source\":\"web\",\"customerEmail\":\"$CEMAIL\"}" >/dev/null
rot=$(P -X PATCH "$BASE/api/v1/webhook-endpoints/$EP" -d '{"secret":true}'); SEC3=$(jq -r .data.secret <<<"$rot")
P "$BASE/api/v1/webhook-endpoints" >/dev/null
P "$BASE/api/v1/leads?limit=5" >/dev/null
P -X POST "$BASE/api/v1/webhook-endpoints/$EP/test" >/dev/null
# portal session: the one-time code and the session token
url=$(P -X POST "$BASE/api/v1/portal-sessions" | jq -r .data.url); CODE=${url#*#code=}
PT=$(curl -s -X POST "$BASE/portal/v1/sessions" -H 'content-type: application/json' -d "{\"code\":\"$CODE\"}" | jq -r .data.token)
curl -s "$BASE/api/v1/webhook-endpoints" -H "Authorization: Bearer $PT" >/dev/null
# a coupon code, redeemed
COUPON=$(P "$BASE/api/v1/care-services-coupons?limit=50" | jq -r '[.data[]|select(.status=="active")][0].code // empty')
if [ -n "$COUPON" ]; then
  c=$(P "$BASE/api/v1/care-services-coupons?limit=50" | jq -c "[.data[]|select(.code==\"$COUPON\")][0]")
  I -X POST "$BASE/internal/v1/care-services-coupons/redeem" -d "{\"code\":\"$COUPON\",\"productSlug\":$(jq .productSlug <<<"$c"),\"months\":$(jq .months <<<"$c"),\"email\":\"$CEMAIL\",\"providerPrimaryExternalId\":\"ext-$R\"}" >/dev/null
fi
# a wrong token and a token in the query string
curl -s "$BASE/api/v1/leads?token=$TOKEN" -H "Authorization: Bearer pk_live_wrong$R" >/dev/null
sleep 4
known+=("$SEC1" "$SEC2" "$SEC3" "$CODE" "$PT" ${COUPON:+"$COUPON"})
labels+=(secret-1 secret-2 secret-rotated portal-code portal-token ${COUPON:+coupon-code})
echo "deliveries received: $(wc -l <"$RECV_LOG") (RUST_LOG=$RUST_LOG)"
# the demo's banner (stdout, shown once to the operator) is not a log line: search the log lines only
LOG="$SERVER_LOG.lines"; grep -a '^{' "$SERVER_LOG" >"$LOG"
echo "log lines: $(wc -l <"$LOG")"
leaks=0
for i in "${!known[@]}"; do
  v=${known[$i]}; [ -z "$v" ] || [ "$v" = null ] && { echo "  (no value for ${labels[$i]})"; continue; }
  n=$(grep -cF -- "$v" "$LOG")
  # secrets also without whsec_
  [ "${v#whsec_}" != "$v" ] && n=$((n + $(grep -cF -- "${v#whsec_}" "$LOG")))
  printf '  %-22s %s\n' "${labels[$i]}" "$n"
  [ "$n" -gt 0 ] && { leaks=$((leaks+1)); grep -F -- "$v" "$LOG" | head -2 | cut -c1-400; }
done
# phone digits without formatting
d=$(tr -dc 0-9 <<<"$PHONE"); printf '  %-22s %s\n' phone-digits "$(grep -c "$d" "$LOG")"
echo "targets logging at DEBUG/TRACE:"
jq -r 'select(.level=="DEBUG" or .level=="TRACE") | .target' "$LOG" | sort | uniq -c | sort -rn | head -30
echo "RESULT $name leaks=$leaks"
