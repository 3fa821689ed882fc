//! The shared kernel: what every aggregate builds on and nothing in it depends on an aggregate.
//! Values parsed at the edge, typed ids, injected time and randomness, signed cursors, the wire
//! formats of timestamps, and the one storage error every port returns. It imports nothing from
//! the rest of the crate (`tests/layers.rs` checks it).
//!
//! ```
//! use partner_domain::kernel::ids::{EndpointId, LeadId};
//! use partner_domain::kernel::values::PartnerId;
//!
//! let lead = LeadId::parse("0f8fad5b-d9cb-469f-a165-70867728950e")?;
//! assert_eq!(lead.to_string(), "0f8fad5b-d9cb-469f-a165-70867728950e");
//! // A lead id is no endpoint id: the types keep them apart.
//! let _: EndpointId = EndpointId::from_uuid(lead.as_uuid());
//! assert!(PartnerId::parse("acme").is_ok());
//! # Ok::<(), partner_domain::kernel::values::ValueError>(())
//! ```

pub mod ambient;
pub mod clock;
pub mod compare;
pub mod csv_cell;
pub mod cursor;
pub mod error;
pub mod ids;
pub mod page;
pub mod params;
pub mod random;
pub mod readiness;
pub mod uow;
pub mod values;
pub mod wire;

/// `Debug` for port trait objects (services holding `Arc<dyn Port>` derive `Debug`): the
/// port's name, nothing of its state.
macro_rules! debug_port {
    ($($t:ident),* $(,)?) => {$(
        impl std::fmt::Debug for dyn $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(stringify!($t))
            }
        }
    )*};
}
pub(crate) use debug_port;
