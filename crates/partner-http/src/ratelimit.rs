//! Rate limits: the port and the in-process adapter live in the domain
//! ([`partner_domain::rate_limit`]); the guard in `middleware.rs` charges them.

pub use partner_domain::rate_limit::*;
