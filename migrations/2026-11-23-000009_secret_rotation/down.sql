ALTER TABLE webhook_endpoints DROP COLUMN previous_secret_expires_at, DROP COLUMN previous_secret;
