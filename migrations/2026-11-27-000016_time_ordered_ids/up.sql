-- Time-ordered ids for the outbox's rows (issue 22, item 3; docs/decisions.md, "Time-ordered
-- event and delivery ids"). `gen_random_uuid()` ids put every new delivery, and every new version
-- of one (neither the claim's update nor the outcome's is HOT: both change indexed columns), at a
-- random leaf of `webhook_deliveries_pkey`, its event at a random leaf of
-- `webhook_deliveries_event_idx` and `domain_events_pkey`, and its attempt at a random leaf of
-- `webhook_attempts_delivery_idx`. Beside 10,000,000 finished deliveries (about 800 MB of those
-- indexes, against 128 MB of shared buffers) each was a buffer miss, and after every checkpoint a
-- full-page image in the WAL: 3.3 blocks read and 1.8 full-page images a delivery on `pp_dataset`
-- against 0.1 and 0.05 on the small dataset. A UUIDv7 (RFC 9562: 48 bits of Unix milliseconds,
-- version 7, 74 random bits) sorts by creation, so the new rows of all these indexes share the
-- few leaves at their right edge. PostgreSQL 18 has `uuidv7()`; this is the same layout for 15.
CREATE OR REPLACE FUNCTION uuid_v7() RETURNS uuid LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
  SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
    PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
    FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid
$$;
