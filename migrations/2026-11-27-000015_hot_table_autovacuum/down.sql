ALTER TABLE webhook_deliveries RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
    autovacuum_vacuum_insert_scale_factor, autovacuum_analyze_scale_factor);
ALTER TABLE domain_events RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_insert_scale_factor,
    autovacuum_analyze_scale_factor);
ALTER TABLE webhook_attempts RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_insert_scale_factor,
    autovacuum_analyze_scale_factor);
