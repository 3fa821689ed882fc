-- Leads, orders, analytics events, payouts, and the outbox of domain events.

CREATE TABLE leads (
    id             uuid PRIMARY KEY,
    partner_id     text NOT NULL REFERENCES partners (partner_id),
    sub_id         smallint CHECK (sub_id BETWEEN 1 AND 250),
    first_name     text NOT NULL,
    last_name      text NOT NULL,
    email          text NOT NULL,
    email_consent  boolean NOT NULL,
    phone          text,
    sms_consent    boolean NOT NULL,
    origin         text NOT NULL,
    location       text NOT NULL,
    question_id    text,
    is_test        boolean NOT NULL,
    test_source    text CHECK (test_source IN ('provider_test_mode', 'simulation')),
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    -- The test-flag rules, enforced again where the data lives.
    CONSTRAINT leads_test_source_iff_test CHECK (is_test = (test_source IS NOT NULL)),
    CONSTRAINT leads_test_only_headless CHECK (NOT is_test OR origin = 'headless_intake')
);
-- GET /api/v1/leads?includeTest=true: one index range scan per page, at any depth.
CREATE INDEX leads_page_all_idx ON leads (partner_id, created_at DESC, id DESC);
-- GET /api/v1/leads (real leads only, the default): the same, without skipping test rows.
CREATE INDEX leads_page_real_idx ON leads (partner_id, created_at DESC, id DESC) WHERE NOT is_test;

CREATE TABLE orders (
    order_id          text PRIMARY KEY,
    partner_id        text NOT NULL REFERENCES partners (partner_id),
    sub_id            smallint CHECK (sub_id BETWEEN 1 AND 250),
    created_date      timestamptz NOT NULL,
    product           text NOT NULL,
    amount_cents      bigint NOT NULL CHECK (amount_cents >= 0),
    commission_cents  bigint NOT NULL CHECK (commission_cents >= 0),
    status            text NOT NULL,
    is_test           boolean NOT NULL,
    source            text NOT NULL,
    customer_name     text,
    customer_email    text,
    recorded_at       timestamptz NOT NULL
);
-- GET /api/v1/orders and the commission summary's period scan.
CREATE INDEX orders_partner_date_idx ON orders (partner_id, created_date DESC, order_id DESC);

CREATE TABLE analytics_events (
    id            uuid PRIMARY KEY,
    run_id        text NOT NULL,
    partner_id    text NOT NULL REFERENCES partners (partner_id),
    sub_id        smallint CHECK (sub_id BETWEEN 1 AND 250),
    event         text NOT NULL,
    product       text,
    amount_cents  bigint CHECK (amount_cents >= 0),
    occurred_at   timestamptz NOT NULL,
    test_source   text NOT NULL CHECK (test_source IN ('provider_test_mode', 'simulation')),
    recorded_at   timestamptz NOT NULL
);
-- One simulated order per run.
CREATE UNIQUE INDEX analytics_order_completed_run_key ON analytics_events (run_id) WHERE event = 'order_completed';
-- Simulated orders of a partner, by date (orders listing and commission summary).
CREATE INDEX analytics_partner_orders_idx ON analytics_events (partner_id, occurred_at DESC) WHERE event = 'order_completed';

CREATE TABLE payouts (
    id            uuid PRIMARY KEY,
    partner_id    text NOT NULL REFERENCES partners (partner_id),
    email         text NOT NULL,
    created_on    date NOT NULL,
    payout_date   date NOT NULL,
    amount_cents  bigint NOT NULL CHECK (amount_cents >= 0),
    status        text NOT NULL,
    receipt_url   text,
    note          text
);
-- GET /api/v1/payouts.
CREATE INDEX payouts_partner_idx ON payouts (partner_id, payout_date DESC, created_on DESC, id DESC);

-- The outbox: every change that partners may be notified of, written in the change's
-- transaction. The webhook worker fans these out into deliveries.
CREATE TABLE domain_events (
    id          uuid PRIMARY KEY,
    partner_id  text NOT NULL REFERENCES partners (partner_id),
    kind        text NOT NULL,
    subject     text NOT NULL,
    extra       jsonb NOT NULL,
    created_at  timestamptz NOT NULL
);
CREATE INDEX domain_events_created_idx ON domain_events (created_at, id);
