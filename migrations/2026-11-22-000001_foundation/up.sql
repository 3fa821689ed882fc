-- Partners, portal users, API tokens, sub-accounts and the Care Services feature flags.

CREATE TABLE partners (
    partner_id              text PRIMARY KEY CHECK (partner_id ~ '^[A-Za-z0-9_-]{1,64}$'),
    name                    text NOT NULL,
    email                   text NOT NULL,
    active                  boolean NOT NULL,
    dna_access              boolean NOT NULL,
    headless_links          boolean NOT NULL,
    default_lang            text NOT NULL,
    enabled_langs           text[] NOT NULL,
    cs_subscription_active  boolean NOT NULL,
    cs_manual_override      boolean NOT NULL,
    cs_yearly_bundle        boolean NOT NULL,
    cs_services             text[] NOT NULL,
    created_at              timestamptz NOT NULL,
    updated_at              timestamptz NOT NULL
);

CREATE TABLE care_service_flags (
    service  text PRIMARY KEY,
    enabled  boolean NOT NULL
);
INSERT INTO care_service_flags (service, enabled) VALUES
    ('primary-care', true), ('urgent-care', true), ('mental-health', true),
    ('dermatology', true), ('veterinary-care', true);

-- Users are soft-deleted so that their tokens can answer `unknown_user`.
CREATE TABLE portal_users (
    id          uuid PRIMARY KEY,
    partner_id  text NOT NULL REFERENCES partners (partner_id),
    email       text NOT NULL,
    admin       boolean NOT NULL,
    created_at  timestamptz NOT NULL,
    deleted_at  timestamptz
);
CREATE INDEX portal_users_partner_idx ON portal_users (partner_id);

-- Only the keyed hash of a token is stored; the unique index makes authentication one lookup.
CREATE TABLE api_tokens (
    id            uuid PRIMARY KEY,
    user_id       uuid NOT NULL REFERENCES portal_users (id),
    token_hash    bytea NOT NULL UNIQUE,
    token_prefix  text NOT NULL,
    created_at    timestamptz NOT NULL,
    expires_at    timestamptz,
    revoked_at    timestamptz,
    last_used_at  timestamptz
);
CREATE INDEX api_tokens_user_idx ON api_tokens (user_id, created_at);

CREATE TABLE sub_accounts (
    id          uuid PRIMARY KEY,
    partner_id  text NOT NULL REFERENCES partners (partner_id),
    sub_id      smallint NOT NULL CHECK (sub_id BETWEEN 1 AND 250),
    nickname    text NOT NULL,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    CONSTRAINT sub_accounts_partner_sub_key UNIQUE (partner_id, sub_id)
);
