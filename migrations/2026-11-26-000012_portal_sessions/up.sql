-- The partner's webhook portal (extensions §10): one-time codes, and the portal sessions they
-- are exchanged for. A portal session is an API token (so every authentication path, including
-- the reads that fold the token lookup into their own statement, serves it unchanged) marked by
-- `portal_of`: the partner token whose holder minted the code. Revoking or rotating that token
-- revokes the sessions minted with it (docs/decisions.md, "Portal sessions").
ALTER TABLE api_tokens ADD COLUMN portal_of uuid REFERENCES api_tokens (id);
CREATE INDEX api_tokens_portal_of_idx ON api_tokens (portal_of) WHERE portal_of IS NOT NULL;

-- Only the keyed hash of a code is stored; `used_at` makes it single use.
CREATE TABLE portal_codes (
    code_hash   bytea PRIMARY KEY,
    token_id    uuid NOT NULL REFERENCES api_tokens (id),
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    used_at     timestamptz
);
CREATE INDEX portal_codes_expires_idx ON portal_codes (expires_at);
