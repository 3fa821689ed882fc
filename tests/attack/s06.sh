#!/usr/bin/env bash
# S-06: one delivery whose subject cannot be read must fail alone ("subject unreadable"); the
# deliveries claimed with it (another tenant's) are sent.
# Deliveries are made pending but not due (leadCreatedDelay 1h), the server is stopped, one row
# is corrupted in the database, every pending delivery is made due now, the server is started
# again so the worker claims them in one batch.
#  phase a: the event's stored subject is not a lead id (domain_events.subject = 'garbage')
#  phase b: the lead row itself does not parse (leads.origin = 'Bad Origin!')
set -uo pipefail
. "$(dirname "$0")/lib.sh"
DB="postgresql://postgres@127.0.0.1:5432/attack_s06"
start_receiver s06 18535
trap 'stop_server; stop_receiver' EXIT
start_server s06 18530 || exit 1
victim="victim06"
I -X PUT "$BASE/internal/v1/partners/$victim" -d "{\"name\":\"Victim\",\"email\":\"ops@victim.test\",\"active\":true,\"dnaAccess\":true,\"headlessLinks\":true,\"defaultLang\":\"en\",\"enabledLangs\":[\"en\"],\"careServices\":{\"subscriptionActive\":true,\"manualOverride\":false,\"yearlyBundle\":true,\"services\":[]}}" >/dev/null
for p in demo-clinic $victim; do
  for id in $(I "$BASE/internal/v1/partners/$p/webhook-endpoints" | jq -r '.data[].id'); do I -X DELETE "$BASE/internal/v1/partners/$p/webhook-endpoints/$id" >/dev/null; done
  I -X POST "$BASE/internal/v1/partners/$p/webhook-endpoints" -d "{\"url\":\"https://127.0.0.1:18535/$p\",\"events\":[\"lead.created\"],\"leadCreatedDelay\":\"1h\"}" | jq -c '{id:.data.id}'
done
for phase in ${PHASES:-a b}; do
  bad=$(lead demo-clinic "bad-$phase-$RANDOM@x.test" | jq -r .data.id)
  good=(); for i in 1 2 3; do good+=("$(lead $victim "good-$phase-$i-$RANDOM@x.test" | jq -r .data.id)"); done
  good+=("$(lead demo-clinic "good-own-$phase-$RANDOM@x.test" | jq -r .data.id)")
  stop_server
  if [ $phase = a ]; then
    psql -qtA "$DB" -c "update domain_events set subject='garbage' where subject='$bad'"
  else
    psql -qtA "$DB" -c "update leads set origin='Bad Origin!' where id='$bad'"
  fi
  psql -qtA "$DB" -c "update webhook_deliveries set next_attempt_at=now() where status='pending'"
  start_server s06 18530 >/dev/null || exit 1
  sleep ${WAIT:-8}
  echo "== phase $phase (corrupt lead $bad)"
  psql -qtA "$DB" -c "select d.partner_id, e.subject, d.status, d.attempts, coalesce(d.last_error,'') from webhook_deliveries d join domain_events e on e.id=d.event_id where e.subject in ('garbage', '$bad', '${good[0]}', '${good[1]}', '${good[2]}', '${good[3]}') order by d.partner_id"
  echo "received by the target: $(for g in "${good[@]}"; do grep -c "$g" "$RECV_LOG"; done | paste -sd+ | bc) of ${#good[@]} good deliveries"
  grep -a 'cannot be read\|subjects failed' "$SERVER_LOG" | tail -2 | cut -c1-300
  psql -qtA "$DB" -c "update leads set origin='managed-website' where id='$bad'" >/dev/null
  psql -qtA "$DB" -c "update webhook_deliveries set status='failed', next_attempt_at=null where status='pending'" >/dev/null
done
