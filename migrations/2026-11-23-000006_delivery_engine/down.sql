DROP INDEX webhook_deliveries_event_idx;
DROP INDEX webhook_deliveries_finished_idx;
DROP INDEX webhook_deliveries_endpoint_due_idx;
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
ALTER TABLE webhook_deliveries DROP COLUMN lease_token;
