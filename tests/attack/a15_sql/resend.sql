-- attack15: RESEND_SQL (outbox.rs) on one delivery: 60 % a due, pending, unleased row (the next
-- claim's target: the row a claim may have read and is about to lock), 40 % any recent row; due
-- now minus 0-@BACK@ ms (the API's clock, read before the statement). Logged in a15_resent.
\set k random(1, 100)
\if :k <= 60
SELECT COALESCE((SELECT id FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= now()
  AND lease_token IS NULL ORDER BY random() LIMIT 1), '00000000-0000-0000-0000-000000000000') AS rid
\gset
\else
SELECT COALESCE((SELECT id FROM webhook_deliveries WHERE created_at > now() - interval '5 s'
  ORDER BY random() LIMIT 1), '00000000-0000-0000-0000-000000000000') AS rid
\gset
\endif
WITH dl AS (
  SELECT d.id, w.disabled_at IS NULL AS enabled
  FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id
  WHERE d.id = :rid FOR SHARE OF w),
upd AS (
  UPDATE webhook_deliveries d SET status = 'pending', next_attempt_at = now() - random() * interval '@BACK@ ms',
    attempt_base = d.attempts, lease_token = NULL, delivered_at = NULL
  FROM dl WHERE d.id = dl.id AND dl.enabled
  RETURNING d.id)
INSERT INTO a15_resent (id, at) SELECT id, clock_timestamp() FROM upd;
