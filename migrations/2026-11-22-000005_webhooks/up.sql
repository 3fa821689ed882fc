-- Webhook endpoints and their deliveries. A delivery row is written in the same transaction as
-- the domain event it carries (fan-out at write time), so delivery is at-least-once and survives
-- restarts; workers claim due rows with FOR UPDATE SKIP LOCKED.

CREATE TABLE webhook_endpoints (
    id                          uuid PRIMARY KEY,
    partner_id                  text NOT NULL REFERENCES partners (partner_id),
    url                         text NOT NULL,
    events                      text[] NOT NULL,
    lead_created_delay_seconds  integer CHECK (lead_created_delay_seconds IN (60, 300, 3600)),
    custom_header_name          text,
    custom_header_value         text,
    secret                      text,
    created_at                  timestamptz NOT NULL,
    updated_at                  timestamptz NOT NULL,
    CHECK ((custom_header_name IS NULL) = (custom_header_value IS NULL))
);
CREATE INDEX webhook_endpoints_partner_idx ON webhook_endpoints (partner_id, created_at, id);

CREATE TABLE webhook_deliveries (
    id                uuid PRIMARY KEY,
    endpoint_id       uuid NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    partner_id        text NOT NULL REFERENCES partners (partner_id),
    event_id          uuid NOT NULL REFERENCES domain_events (id),
    kind              text NOT NULL,
    status            text NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts          integer NOT NULL DEFAULT 0,
    next_attempt_at   timestamptz,
    last_status_code  integer,
    last_error        text,
    created_at        timestamptz NOT NULL,
    delivered_at      timestamptz
);
-- The workers' claim: due pending deliveries, oldest first.
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
-- The operator's delivery log.
CREATE INDEX webhook_deliveries_partner_idx ON webhook_deliveries (partner_id, created_at DESC, id);
