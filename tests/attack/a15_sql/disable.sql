-- attack15: an endpoint disabled (its pending deliveries end failed, leases cleared, its marker
-- advanced: fail_disabled), then, @GAP@ ms later, enabled and its failed deliveries recovered
-- (RECOVER_SQL: pending, due now, fresh budget). Logged in a15_churn.
SELECT id AS eid FROM webhook_endpoints ORDER BY random() LIMIT 1
\gset
BEGIN;
UPDATE webhook_endpoints SET disabled_at = now(), updated_at = now() WHERE id = :eid;
WITH f AS (UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, lease_token = NULL,
    last_error = 'endpoint disabled' WHERE endpoint_id = :eid AND status = 'pending' RETURNING id)
INSERT INTO a15_churn (kind, id, endpoint_id, at) SELECT 'failed', id, :eid, clock_timestamp() FROM f;
SELECT COALESCE(array_agg(endpoint_id), '{}') AS locked FROM (SELECT endpoint_id FROM webhook_endpoint_queue
  WHERE endpoint_id = :eid FOR UPDATE SKIP LOCKED) s
\gset
@ADVANCE@;
COMMIT;
\sleep @GAP@ ms
UPDATE webhook_endpoints SET disabled_at = NULL, updated_at = now() WHERE id = :eid;
WITH picked AS (
  SELECT d.id FROM webhook_deliveries d WHERE d.endpoint_id = :eid AND d.status = 'failed'
  ORDER BY d.created_at, d.id LIMIT 1000 FOR UPDATE OF d),
upd AS (
  UPDATE webhook_deliveries d SET status = 'pending', next_attempt_at = now(), attempt_base = d.attempts,
    lease_token = NULL FROM picked WHERE d.id = picked.id RETURNING d.id)
INSERT INTO a15_churn (kind, id, endpoint_id, at) SELECT 'recovered', id, :eid, clock_timestamp() FROM upd;
