-- The delivery engine: fenced leases, fair per-endpoint claims, and indexes for retention
-- pruning. (Workers are woken by `NOTIFY webhook_deliveries`, sent by the writing process after
-- its commit, not by a trigger: a NOTIFY inside the writing transaction serialises commits.)

-- The fencing token of the claim that holds a delivery; an outcome is recorded only under it.
ALTER TABLE webhook_deliveries ADD COLUMN lease_token uuid;

-- The claim walks endpoints and takes each one's oldest due rows from this index. It replaces the
-- index on next_attempt_at alone, which the planner preferred and then filtered by endpoint,
-- reading every due row of the other endpoints (10 ms instead of 2 ms a claim at 20,000 due).
DROP INDEX webhook_deliveries_due_idx;
CREATE INDEX webhook_deliveries_endpoint_due_idx
    ON webhook_deliveries (endpoint_id, next_attempt_at) WHERE status = 'pending';
-- Retention: finished deliveries by age.
CREATE INDEX webhook_deliveries_finished_idx
    ON webhook_deliveries (created_at) WHERE status <> 'pending';
-- Pruning events looks up whether any delivery still refers to one.
CREATE INDEX webhook_deliveries_event_idx ON webhook_deliveries (event_id);
