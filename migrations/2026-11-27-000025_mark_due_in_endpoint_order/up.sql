-- The marking trigger takes its markers' row locks in endpoint order (issue 22; found by the
-- attack14 run, tests/attack/RESULTS.md): two statements writing deliveries for the same
-- endpoints, each moving markers earlier (an upsert, which holds the marker's row lock until the
-- commit), could take them in opposite orders and deadlock; PostgreSQL then aborted one after
-- `deadlock_timeout` (an ingest that fails, a recorded retry that fails) and the other committed
-- a second late. Sorted, the second writer waits for the first and then goes on. The share locks
-- of markers already early enough are sorted too (they do not conflict with each other or with
-- the upserts, but they do with the advance's `FOR UPDATE`, which skips what it cannot take).
-- Same marks as migrations 000011 and 000024.
CREATE OR REPLACE FUNCTION webhook_mark_due() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM new_rows
                   WHERE status = 'pending' AND lease_token IS NULL AND next_attempt_at IS NOT NULL) THEN
        RETURN NULL;
    END IF;
    WITH due AS (
        SELECT endpoint_id, min(next_attempt_at) AS due_at FROM new_rows
        WHERE status = 'pending' AND lease_token IS NULL AND next_attempt_at IS NOT NULL
        GROUP BY endpoint_id),
    held AS (
        SELECT q.endpoint_id FROM webhook_endpoint_queue q JOIN due ON due.endpoint_id = q.endpoint_id
        WHERE q.due_at <= due.due_at ORDER BY q.endpoint_id FOR KEY SHARE OF q)
    INSERT INTO webhook_endpoint_queue (endpoint_id, due_at)
    SELECT due.endpoint_id, due.due_at FROM due
    WHERE due.endpoint_id NOT IN (SELECT endpoint_id FROM held)
    ORDER BY due.endpoint_id
    ON CONFLICT (endpoint_id) DO UPDATE
        SET due_at = LEAST(webhook_endpoint_queue.due_at, EXCLUDED.due_at);
    RETURN NULL;
END
$$;
