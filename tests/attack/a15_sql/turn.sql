-- attack15: one worker turn with the server's own claim statement (@CLAIM@: CLAIM_SQL of claim.rs,
-- a15_sql/extract.py --pgbench; prepared, like the server's), lease @LEASE@ s, room :room, batch :batch.
-- Then, as PgStore::advance_later: the stale markers advanced at once (lock FOR UPDATE SKIP
-- LOCKED, then ADVANCE_SQL in a new statement, one transaction); the trailing ones with them on
-- @TRAIL_PCT@ % of the turns (the 50 ms window, roughly). A 0-20 ms "send", then the outcomes by
-- lease token (RECORD_SQL's fence): 60 % delivered, 30 % retry in 0-330 ms, 10 % given back
-- (RELEASE_SQL: due now, attempt taken back), each logged in a15_out; 2 % of turns die (the lease runs out).
SELECT now() AS now, now() + interval '@LEASE@ s' AS lu, @ROOM@ AS room, @BATCH@ AS batch
\gset
@CLAIM@
\gset
\set t random(1, 100)
\if :t <= @TRAIL_PCT@
SELECT array_cat(:stale::uuid[], :trailing::uuid[]) AS stale
\gset
\endif
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
WITH o AS (
UPDATE webhook_deliveries d SET
  status = CASE WHEN u.r < 0.6 THEN 'delivered' ELSE 'pending' END,
  delivered_at = CASE WHEN u.r < 0.6 THEN clock_timestamp() END,
  next_attempt_at = CASE WHEN u.r < 0.6 THEN NULL WHEN u.r < 0.9 THEN clock_timestamp() + u.r * interval '330 ms'
    ELSE clock_timestamp() END,
  attempts = d.attempts - CASE WHEN u.r >= 0.9 THEN 1 ELSE 0 END,
  lease_token = NULL
FROM (SELECT unnest(:ids::uuid[]) AS id, unnest(:toks::uuid[]) AS tok, random() AS r) u
WHERE d.id = ANY(:ids::uuid[]) AND d.id = u.id AND d.lease_token = u.tok AND d.status = 'pending'
RETURNING d.id, u.tok, CASE WHEN u.r < 0.6 THEN 'delivered' WHEN u.r < 0.9 THEN 'retry' ELSE 'release' END AS kind)
INSERT INTO a15_out (id, lease, at, kind) SELECT id, tok, clock_timestamp(), kind FROM o;
\endif
