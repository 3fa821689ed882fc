-- One worker turn: the claim (lead2's CLAIM_SQL reduced to its marker logic: room 2, at most 8,
-- lease 2 s; @FROM_MARKER@ and @STALE@ select lead2's or main's form), its advance (lock, then
-- read in a new statement), a send, and the outcomes: 60 % delivered, 30 % retry in 0-300 ms,
-- 10 % given back (due now, attempt taken back); 2 % of turns die (no outcome: the lease ends).
WITH ep AS MATERIALIZED (
  SELECT s.id, s.room, s.due_at, row_number() OVER () AS ord FROM (
    SELECT q.endpoint_id AS id, 2 AS room, q.due_at FROM webhook_endpoint_queue q
    WHERE q.due_at <= now() AND (SELECT e.disabled_at IS NULL FROM webhook_endpoints e WHERE e.id = q.endpoint_id)
    ORDER BY random() LIMIT 8) s),
picked AS (
  SELECT p.id, p.due FROM ep CROSS JOIN LATERAL (
    SELECT d.id, d.next_attempt_at AS due FROM webhook_deliveries d
    WHERE d.endpoint_id = ep.id AND d.status = 'pending' @FROM_MARKER@
      AND d.next_attempt_at <= now() AND d.attempts - d.attempt_base < 1000
    ORDER BY d.next_attempt_at LIMIT ep.room FOR UPDATE SKIP LOCKED) p LIMIT 8),
claimed AS (
  UPDATE webhook_deliveries d SET attempts = d.attempts + 1, next_attempt_at = now() + interval '2 s',
    lease_token = gen_random_uuid()
  FROM picked WHERE d.id = picked.id
  RETURNING d.id, d.endpoint_id, d.lease_token),
got AS (SELECT c.endpoint_id, count(*) AS n FROM claimed c GROUP BY c.endpoint_id),
visits AS (
  SELECT ep.id, ep.room, ep.ord, COALESCE(got.n, 0) AS n,
    max(ep.ord) FILTER (WHERE got.n IS NOT NULL) OVER () AS last
  FROM ep LEFT JOIN got ON got.endpoint_id = ep.id),
logged AS (INSERT INTO a14_log (id, due, at) SELECT id, due, clock_timestamp() FROM picked),
vlogged AS (INSERT INTO a14_visits (at, endpoint_id, due_at, n) SELECT now(), v.id, ep.due_at, v.n FROM visits v JOIN ep ON ep.id = v.id)
SELECT COALESCE((SELECT array_agg(id) FROM claimed), '{}') AS ids,
  COALESCE((SELECT array_agg(lease_token) FROM claimed), '{}') AS toks,
  COALESCE((SELECT array_agg(v.id) FILTER (WHERE @STALE@
    AND ((SELECT count(*) FROM claimed) < 8 OR v.ord <= v.last)) FROM visits v), '{}') AS stale
\gset
BEGIN;
SELECT COALESCE(array_agg(endpoint_id), '{}') AS locked FROM (SELECT endpoint_id FROM webhook_endpoint_queue
  WHERE endpoint_id = ANY(:stale::uuid[]) FOR UPDATE SKIP LOCKED) s
\gset
@ADVANCE@;
COMMIT;
\set send random(0, 20)
\sleep :send ms
\set o random(1, 100)
\if :o <= 98
UPDATE webhook_deliveries d SET
  status = CASE WHEN u.r < 0.6 THEN 'delivered' ELSE 'pending' END,
  delivered_at = CASE WHEN u.r < 0.6 THEN clock_timestamp() END,
  next_attempt_at = CASE WHEN u.r < 0.6 THEN NULL WHEN u.r < 0.9 THEN clock_timestamp() + u.r * interval '330 ms'
    ELSE clock_timestamp() END,
  attempts = d.attempts - CASE WHEN u.r >= 0.9 THEN 1 ELSE 0 END,
  lease_token = NULL
FROM (SELECT unnest(:ids::uuid[]) AS id, unnest(:toks::uuid[]) AS tok, random() AS r) u
WHERE d.id = u.id AND d.lease_token = u.tok AND d.status = 'pending';
\endif
