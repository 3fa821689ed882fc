-- The delivery engine: fenced leases, fair per-endpoint claims, a wake-up on insert, and
-- indexes for the attempt-budget sweep and retention pruning.

-- The fencing token of the claim that holds a delivery; an outcome is recorded only under it.
ALTER TABLE webhook_deliveries ADD COLUMN lease_token uuid;

-- The claim walks endpoints and takes each one's oldest due rows from this index.
CREATE INDEX webhook_deliveries_endpoint_due_idx
    ON webhook_deliveries (endpoint_id, next_attempt_at) WHERE status = 'pending';
-- Retention: finished deliveries by age.
CREATE INDEX webhook_deliveries_finished_idx
    ON webhook_deliveries (created_at) WHERE status <> 'pending';
-- Pruning events looks up whether any delivery still refers to one.
CREATE INDEX webhook_deliveries_event_idx ON webhook_deliveries (event_id);

-- Workers LISTEN on this channel, so a delivery is offered as soon as its transaction commits.
-- Per row, because PostgreSQL folds identical notifications of one transaction into one, while a
-- statement trigger would also fire for an INSERT … SELECT that inserted nothing.
CREATE FUNCTION webhook_deliveries_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('webhook_deliveries', '');
    RETURN NULL;
END
$$;
CREATE TRIGGER webhook_deliveries_notify AFTER INSERT ON webhook_deliveries
    FOR EACH ROW EXECUTE FUNCTION webhook_deliveries_notify();
