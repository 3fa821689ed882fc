-- The events feed (extensions.md §8.1). An event's place in the feed is (txid, seq): the id of
-- the transaction that wrote it (the top-level xid8, which every insert takes by default, so no
-- writer names it) and an identity number. A reader returns only events whose txid is below the
-- xmin of its own statement's snapshot: every transaction with a smaller xid has ended, so no
-- event can later appear before a position the reader returned (docs/decisions.md, "Events feed
-- position").
ALTER TABLE domain_events
    ADD COLUMN txid bigint NOT NULL DEFAULT (pg_current_xact_id()::text::bigint),
    ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY;
-- The feed's walk: a partner's events in feed order (`ping` is never in the feed).
CREATE INDEX domain_events_feed_idx ON domain_events (partner_id, txid, seq) WHERE kind <> 'ping';

-- The last feed position whose event retention removed, per partner: a cursor before it has
-- lost events (410 `cursor_expired`); one at or after it has not.
CREATE TABLE event_feed_pruned (
    partner_id text PRIMARY KEY REFERENCES partners (partner_id),
    txid       bigint NOT NULL,
    seq        bigint NOT NULL
);
