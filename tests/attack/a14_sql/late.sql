-- For a kept a14_sqlrace.sh database: the late claims (> :late s) that had a visit of their
-- endpoint, between due + 50 ms and the claim - 50 ms, whose marker was above the delivery; each
-- with those visits and the delivery's earlier claims.
WITH l AS (
  SELECT l.id, d.endpoint_id, l.at, l.due AS row_due,
    greatest(l.due, to_timestamp(('x' || substr(replace(l.id::text, '-', ''), 1, 12))::bit(48)::bigint / 1000.0)) AS due
  FROM a14_log l JOIN webhook_deliveries d ON d.id = l.id),
bad AS (
  SELECT * FROM l WHERE l.at - l.due > make_interval(secs => :late)
    AND EXISTS (SELECT 1 FROM a14_visits v WHERE v.endpoint_id = l.endpoint_id
      AND v.at BETWEEN l.due + interval '50 ms' AND l.at - interval '50 ms' AND v.due_at > l.due))
SELECT 'LATE' AS k, b.id::text, b.row_due::text AS due, b.at::text AS at, (b.at - b.due)::text AS info FROM bad b
UNION ALL
SELECT 'visit', b.id::text, v.due_at::text, v.at::text, 'n=' || v.n FROM bad b JOIN a14_visits v
  ON v.endpoint_id = b.endpoint_id AND v.at BETWEEN b.due - interval '300 ms' AND b.at
UNION ALL
SELECT 'claim', b.id::text, l2.due::text, l2.at::text, '' FROM bad b JOIN a14_log l2 ON l2.id = b.id
ORDER BY 2, 4 LIMIT 80;
