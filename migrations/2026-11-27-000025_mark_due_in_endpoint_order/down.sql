-- Back to migration 000024's marking function.
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
        WHERE q.due_at <= due.due_at FOR KEY SHARE OF q)
    INSERT INTO webhook_endpoint_queue (endpoint_id, due_at)
    SELECT due.endpoint_id, due.due_at FROM due
    WHERE due.endpoint_id NOT IN (SELECT endpoint_id FROM held)
    ON CONFLICT (endpoint_id) DO UPDATE
        SET due_at = LEAST(webhook_endpoint_queue.due_at, EXCLUDED.due_at);
    RETURN NULL;
END
$$;
