//! The shared kernel: what every aggregate builds on and nothing in it depends on an aggregate.
//! Values parsed at the edge, typed ids, injected time and randomness, signed cursors, the wire
//! formats of timestamps, and the one storage error every port returns. It imports nothing from
//! the rest of the crate (`tests/layers.rs` checks it).

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
