ALTER TABLE webhook_endpoints DROP COLUMN failing_since, DROP COLUMN disabled_reason, DROP COLUMN disabled_at;
