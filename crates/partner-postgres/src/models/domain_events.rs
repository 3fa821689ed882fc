//! `domain_events` rows: the outbox. No struct reads or writes them: an event is written with
//! its deliveries by one raw statement (`outbox::WRITE_SQL`, and `outbox::WRITE_TO_ENDPOINT_SQL` for a
//! ping), and the claim (`webhooks::CLAIM_SQL`) reads the columns sending needs into
//! [`crate::models::webhook_deliveries::ClaimRow`].
