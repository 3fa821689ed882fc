-- Autovacuum of the hot tables (issue 22, item 4; docs/capacity.md, "Autovacuum"). PostgreSQL's
-- defaults wait for 20 % of a table to be dead before vacuuming it: 2,000,000 dead rows in a
-- 10,000,000-row `webhook_deliveries`, where every delivery leaves two (the claim's update and the
-- outcome's, neither HOT since both change indexed columns) and retention deletes one. Dead
-- entries in the partial index of pending rows are what the claim walks; stale statistics on the
-- pending rows are what its plan rests on. So: vacuum at 2 % dead, analyze at 1 % changed.
-- The outbox and the attempt log grow and shrink by retention only: vacuum at 5 %.
-- `webhook_endpoint_queue` stays at the defaults: it holds a row per endpoint with due work, and
-- 50 dead rows + 20 % already vacuum it at every autovacuum round (once a minute).
ALTER TABLE webhook_deliveries SET (
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_threshold = 10000,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.01);
ALTER TABLE domain_events SET (
    autovacuum_vacuum_scale_factor = 0.05,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.02);
ALTER TABLE webhook_attempts SET (
    autovacuum_vacuum_scale_factor = 0.05,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.02);
