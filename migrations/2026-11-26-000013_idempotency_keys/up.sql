-- Idempotent requests (extensions §8.3): one row per (caller, key). A row without `status` is a
-- claim of a request still running (until `lease_until`: past it, its process is taken to have
-- died and the key may run again); with `status`, the kept answer, replayed until `expires_at`
-- to a request with the same `fingerprint` (SHA-256 of method, path with query, and body).
-- `caller` is `partner:<partner_id>` or `operator`, so one caller's answers never reach another.
-- Not tied to `partners` by a foreign key: a kept answer outlives nothing it describes, and the
-- maintenance prunes expired rows by `expires_at`.
CREATE TABLE idempotency_keys (
    caller       text NOT NULL,
    key          text NOT NULL,
    fingerprint  bytea NOT NULL,
    created_at   timestamptz NOT NULL,
    lease_until  timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    status       smallint,
    content_type text,
    body         bytea,
    PRIMARY KEY (caller, key)
);
CREATE INDEX idempotency_keys_expires_idx ON idempotency_keys (expires_at);
