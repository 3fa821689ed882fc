-- attack15: retention (retention.rs DELIVERIES_SQL): finished deliveries older than @AGE@ ms deleted,
-- 100 at a time, `status <> 'pending'` checked again on the row deleted. Logged in a15_deleted.
WITH walk AS MATERIALIZED (
  SELECT d.id FROM webhook_deliveries d
  WHERE d.status <> 'pending' AND d.created_at < now() - interval '@AGE@ ms'
  ORDER BY d.created_at, d.id LIMIT 100),
gone AS (
  DELETE FROM webhook_deliveries d USING walk w
  WHERE d.id = w.id AND d.status <> 'pending' RETURNING d.id, d.created_at)
INSERT INTO a15_deleted (id, created_at, at) SELECT id, created_at, clock_timestamp() FROM gone;
