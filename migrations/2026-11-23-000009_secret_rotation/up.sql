-- Secret rotation with overlap (extensions.md §3): the secret a rotation replaced keeps signing,
-- next to the new one, until `previous_secret_expires_at`.
ALTER TABLE webhook_endpoints
    ADD COLUMN previous_secret            text,
    ADD COLUMN previous_secret_expires_at timestamptz,
    ADD CHECK ((previous_secret IS NULL) = (previous_secret_expires_at IS NULL));
