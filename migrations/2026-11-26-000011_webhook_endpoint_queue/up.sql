-- The endpoints that may have due work, so the claim walks those and not every endpoint (issue 22:
-- at 100,000 endpoints with 10 due, the walk over all of them took 177 ms a claim).
--
-- Invariant: every pending delivery's endpoint has a row here whose `due_at` is at or before that
-- delivery's `next_attempt_at` (a lower bound: a row may be early or stale, never late or missing).
-- The triggers below keep it for every statement that makes a delivery pending (the outbox
-- insert, resend, recover, a retry recorded, a test's or benchmark's own INSERT); a claim's lease
-- only moves a row later, so it needs no mark. The claim takes markers due now and, for the
-- endpoints it found without enough due work, raises or removes the marker under a lock taken
-- before it reads the deliveries (`ADVANCE_SQL` in partner-postgres/src/webhooks.rs). A writer
-- holds a `FOR KEY SHARE` lock on the marker until it commits (writers do not block each other),
-- so the advance skips an endpoint whose new deliveries it cannot see yet.
CREATE TABLE webhook_endpoint_queue (
    endpoint_id uuid PRIMARY KEY REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    due_at      timestamptz NOT NULL
);
CREATE INDEX webhook_endpoint_queue_due_idx ON webhook_endpoint_queue (due_at);

INSERT INTO webhook_endpoint_queue (endpoint_id, due_at)
SELECT endpoint_id, min(next_attempt_at) FROM webhook_deliveries
WHERE status = 'pending' AND next_attempt_at IS NOT NULL GROUP BY endpoint_id;

-- Marks the endpoints of the statement's pending, unleased rows: keeps (and share-locks) a marker
-- already due early enough, else inserts it or moves it earlier. Claimed rows (a lease token)
-- only move later, and are skipped.
CREATE FUNCTION webhook_mark_due() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
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

CREATE TRIGGER webhook_deliveries_mark_inserted AFTER INSERT ON webhook_deliveries
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION webhook_mark_due();
CREATE TRIGGER webhook_deliveries_mark_updated AFTER UPDATE ON webhook_deliveries
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION webhook_mark_due();
