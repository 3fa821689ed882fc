//! Webhook delivery worker (reqwest + rustls): claims due deliveries from the outbox with
//! `FOR UPDATE SKIP LOCKED`, signs them with the domain's signer, and retries on the contract's
//! schedule.
//!
//! Nothing is delivered yet: the outbox, the endpoints API and the worker arrive with the
//! webhooks issue. The crate exists now so the workspace's dependency graph is the final one.
