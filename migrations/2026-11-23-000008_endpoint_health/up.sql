-- Endpoint health (extensions.md §2): a disabled endpoint gets no new deliveries. `failing_since`
-- is when the current run of failed attempts began (NULL after any delivered one).
ALTER TABLE webhook_endpoints
    ADD COLUMN disabled_at     timestamptz,
    ADD COLUMN disabled_reason text CHECK (disabled_reason IN ('gone', 'failing')),
    ADD COLUMN failing_since   timestamptz,
    ADD CHECK (disabled_reason IS NULL OR disabled_at IS NOT NULL);
