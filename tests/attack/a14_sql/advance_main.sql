WITH n AS (
  SELECT q.endpoint_id, (SELECT min(d.next_attempt_at) FROM webhook_deliveries d
    WHERE d.endpoint_id = q.endpoint_id AND d.status = 'pending') AS due
  FROM webhook_endpoint_queue q WHERE q.endpoint_id = ANY(:locked::uuid[])),
gone AS (
  DELETE FROM webhook_endpoint_queue q USING n WHERE q.endpoint_id = n.endpoint_id AND n.due IS NULL)
UPDATE webhook_endpoint_queue q SET due_at = n.due FROM n
WHERE q.endpoint_id = n.endpoint_id AND n.due <> q.due_at
