DROP INDEX webhook_deliveries_partner_idx;
CREATE INDEX webhook_deliveries_partner_idx ON webhook_deliveries (partner_id, created_at DESC, id);
DROP TABLE webhook_attempts;
ALTER TABLE webhook_deliveries DROP COLUMN last_attempt_at, DROP COLUMN attempt_base;
