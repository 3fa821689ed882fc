WITH l AS (
  INSERT INTO leads (id, partner_id, first_name, last_name, email, email_consent, phone, sms_consent,
    origin, location, is_test, created_at, updated_at)
  SELECT gen_random_uuid(), 'demo-clinic', 'Ann', 'Lee', 'ann@example.com', true, '+1 555 0100', true,
    'managed-website', 'Austin, TX', false, clock_timestamp(), clock_timestamp() FROM generate_series(1, @N@)
  RETURNING id, partner_id, created_at),
ev AS (
  INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at)
  SELECT @ID@, partner_id, 'lead.created', id::text, '{}', created_at FROM l
  RETURNING id, partner_id, created_at)
INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, attempts, next_attempt_at, created_at)
SELECT @ID@, w.id, w.partner_id, ev.id, 'lead.created', 'pending', 0, @DUE@, @DUE@
FROM ev JOIN webhook_endpoints w ON w.partner_id = ev.partner_id AND w.disabled_at IS NULL;
SELECT pg_notify('webhook_deliveries', '');
