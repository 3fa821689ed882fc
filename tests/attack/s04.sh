#!/usr/bin/env bash
# S-04: an admin token of one partner reads another partner's coupons: one audit line (target
# audit, info, tokenId userId partnerId path rows) and partner_cross_reads_total per read; the
# own partner's reads and refused reads write none. Tries parameter spellings for a read that
# escapes the audit, and looks for 5xx.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
start_server s04 18490 || exit 1
trap stop_server EXIT
other="victim$RANDOM"
I -X PUT "$BASE/internal/v1/partners/$other" -d "{\"name\":\"Victim\",\"email\":\"ops@victim.test\",\"active\":true,\"dnaAccess\":true,\"headlessLinks\":true,\"defaultLang\":\"en\",\"enabledLangs\":[\"en\"],\"careServices\":{\"subscriptionActive\":true,\"manualOverride\":false,\"yearlyBundle\":true,\"services\":[]}}" >/dev/null
I -X POST "$BASE/internal/v1/care-services-coupons/bulk-orders" -d "{\"partnerId\":\"$other\",\"productSlug\":\"primary\",\"months\":12,\"quantity\":7,\"unitPriceCents\":100,\"purchaserEmail\":\"hr@victim.test\",\"purchaserSource\":\"x\"}" | jq -c '{n:(.data.coupons|length)}'
uid=$(I -X POST "$BASE/internal/v1/users" -d '{"email":"staff@platform.test","partnerId":"demo-clinic","admin":true}' | jq -r .data.id)
tok=$(I -X POST "$BASE/internal/v1/users/$uid/tokens" | jq -r .data.token)
tokid=$(I "$BASE/internal/v1/users/$uid/tokens" | jq -r '.data[0].id')
echo "admin user $uid token id $tokid"
A() { curl -s -H "Authorization: Bearer $tok" "$@"; }
audits() { grep -a '"target":"audit"' "$SERVER_LOG" | wc -l; }
metric() { curl -s "$METRICS" | awk '/^partner_cross_reads_total/{print $2}'; }
echo "before: audit lines $(audits), metric $(metric)"
try() {  # try LABEL QUERY [extra curl args]
  local label=$1 q=$2; shift 2
  local a0 m0 a1 m1 out code rows
  a0=$(audits); m0=$(metric)
  out=$(A -w '\n%{http_code}' "$BASE/api/v1/care-services-coupons?$q" "$@")
  code=$(tail -1 <<<"$out"); body=$(sed '$d' <<<"$out")
  rows=$(jq -r "[.data[]? | select(.partnerId==\"$other\")] | length" <<<"$body" 2>/dev/null || echo "csv:$(grep -c "$other" <<<"$body")")
  sleep 0.3
  a1=$(audits); m1=$(metric)
  printf '  %-44s %s victim-rows=%-6s audit+%s metric+%s\n' "$label" "$code" "$rows" "$((a1-a0))" "$(echo "$m1 - $m0" | bc)"
}
try "partner_id=victim" "partner_id=$other"
try "partner_id=victim, status=active" "partner_id=$other&status=active"
try "partner_id=victim, csv" "partner_id=$other&format=csv"
try "partner_id=victim, Accept: text/csv" "partner_id=$other" -H 'Accept: text/csv'
try "partner_id=victim, limit=1 offset=3" "partner_id=$other&limit=1&offset=3"
try "partner_id=victim, zero rows (status=void)" "partner_id=$other&status=void"
try "own partner (no audit expected)" "partner_id=demo-clinic"
try "no partner_id (no audit expected)" ""
try "duplicate partner_id own,victim" "partner_id=demo-clinic&partner_id=$other"
try "duplicate partner_id victim,own" "partner_id=$other&partner_id=demo-clinic"
try "partner_id=VICTIM upper" "partner_id=$(tr a-z A-Z <<<"$other")"
try "partner_id=victim%20" "partner_id=$other%20"
try "partner_id=%20victim" "partner_id=%20$other"
try "partner_id=victim.1 (sub-account code)" "partner_id=$other.1"
try "partner_id[]=victim" "partner_id%5B%5D=$other"
try "partnerId=victim" "partnerId=$other"
try "partner%5Fid=victim (encoded name)" "partner%5Fid=$other"
try "partner_id=victim%00" "partner_id=$other%00"
try "partner_id= (empty)" "partner_id="
code=$(A "$BASE/api/v1/care-services-coupons?partner_id=$other" | jq -r '.data[0].code')
try "by code (8.2) $code" "" ; A -s -o /dev/null -w "  GET /care-services-coupons/{code}: %{http_code}\n" "$BASE/api/v1/care-services-coupons/$code"
P -s -o /dev/null -w "  non-admin token partner_id=victim: %{http_code}\n" "$BASE/api/v1/care-services-coupons?partner_id=$other"
echo "one audit line:"; grep -a '"target":"audit"' "$SERVER_LOG" | tail -1
echo "after: audit lines $(audits), metric $(metric)"
