DROP TRIGGER webhook_deliveries_notify ON webhook_deliveries;
DROP FUNCTION webhook_deliveries_notify();
DROP INDEX webhook_deliveries_event_idx;
DROP INDEX webhook_deliveries_finished_idx;
DROP INDEX webhook_deliveries_endpoint_due_idx;
ALTER TABLE webhook_deliveries DROP COLUMN lease_token;
