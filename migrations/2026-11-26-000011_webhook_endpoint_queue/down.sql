DROP TRIGGER webhook_deliveries_mark_updated ON webhook_deliveries;
DROP TRIGGER webhook_deliveries_mark_inserted ON webhook_deliveries;
DROP FUNCTION webhook_mark_due();
DROP TABLE webhook_endpoint_queue;
