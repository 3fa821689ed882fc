-- Portal sessions (api_tokens rows with portal_of set) expired for a day are deleted, oldest
-- first, a few at each mint of a portal link (crates/partner-postgres/src/portal.rs): walked by
-- this index, so a mint reads only what it deletes.
CREATE INDEX api_tokens_portal_expires_idx ON api_tokens (expires_at) WHERE portal_of IS NOT NULL;
