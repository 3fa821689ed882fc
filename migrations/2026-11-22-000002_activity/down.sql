DROP TABLE domain_events;
DROP TABLE payouts;
DROP TABLE analytics_events;
DROP TABLE orders;
DROP TABLE leads;
