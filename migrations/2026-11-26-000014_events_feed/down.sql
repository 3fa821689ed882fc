DROP TABLE event_feed_pruned;
DROP INDEX domain_events_feed_idx;
ALTER TABLE domain_events DROP COLUMN seq, DROP COLUMN txid;
