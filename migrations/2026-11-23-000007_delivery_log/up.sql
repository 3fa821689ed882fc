-- The delivery log partners see and steer (extensions.md §1).
-- `attempts` keeps counting every attempt ever made; a resend or recover gives the delivery a
-- fresh budget by moving `attempt_base` up to `attempts`: the claim and the end of exhausted
-- deliveries compare `attempts - attempt_base` with the budget.
ALTER TABLE webhook_deliveries
    ADD COLUMN attempt_base    integer NOT NULL DEFAULT 0,
    ADD COLUMN last_attempt_at timestamptz;

-- Every recorded attempt, written by the same statement that records its outcome.
CREATE TABLE webhook_attempts (
    delivery_id   uuid NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    attempted_at  timestamptz NOT NULL,
    status_code   integer,
    duration_ms   integer,
    error         text
);
CREATE INDEX webhook_attempts_delivery_idx ON webhook_attempts (delivery_id, attempted_at);

-- The listing: newest first, ties by id, as for leads.
DROP INDEX webhook_deliveries_partner_idx;
CREATE INDEX webhook_deliveries_partner_idx
    ON webhook_deliveries (partner_id, created_at DESC, id DESC);
