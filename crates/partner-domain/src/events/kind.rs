//! The one declaration of the event kinds, and the two sets of them the contract uses:
//!
//! - [`EventKind::SUBSCRIBABLE`]: the four kinds of the spec's webhook section (`lead.created`,
//!   `lead.enriched`, `order.created`, `payout.created`). An endpoint's `events` is a subset of
//!   them, and so is the events feed's `types` (extensions §8.1: "`ping` is never in it").
//! - [`EventKind::DELIVERED`]: every kind a delivery may carry, the four and `ping`, the test
//!   delivery a partner asks for (extensions §1: "`ping` is never sent unless asked for"); the
//!   delivery log's `event` filter takes any of them.
//!
//! There is deliberately no `ALL`: which set a caller means is always one of these two.
//!
//! ```
//! use partner_domain::events::EventKind;
//!
//! assert_eq!(EventKind::parse("order.created"), Some(EventKind::OrderCreated));
//! assert_eq!(EventKind::parse("ping"), None, "no endpoint subscribes to ping");
//! assert_eq!(EventKind::parse_delivered("ping"), Some(EventKind::Ping));
//! assert!(!EventKind::SUBSCRIBABLE.contains(&EventKind::Ping));
//! assert!(EventKind::DELIVERED.contains(&EventKind::Ping));
//! ```

use serde::{Serialize, Serializer};

/// `"a, b, c or d"`: the names joined as an error message lists them.
macro_rules! or_list {
    ($last:literal) => { $last };
    ($first:literal, $last:literal) => { concat!($first, " or ", $last) };
    ($first:literal, $($rest:literal),+) => { concat!($first, ", ", or_list!($($rest),+)) };
}

/// Declares [`EventKind`] and everything that lists its kinds: the kinds an endpoint subscribes
/// to, then (after `;`) the kinds only ever delivered on request. Each kind is written here once,
/// with its wire name; [`EventKind::SUBSCRIBABLE`], [`EventKind::DELIVERED`], [`EventKind::as_str`], the
/// parsers and the lists the error messages and the OpenAPI document show all come from it.
macro_rules! event_kinds {
    (
        $( $(#[$doc:meta])* $kind:ident = $name:literal, )+
        ;
        $( $(#[$odoc:meta])* $other:ident = $oname:literal, )*
    ) => {
        /// The kind of an event: what happened, as its wire name says (`X-Partner-Event`, the
        /// delivery body's `event`, an endpoint's `events`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum EventKind {
            $( $(#[$doc])* $kind, )+
            $( $(#[$odoc])* $other, )*
        }

        impl EventKind {
            /// The kinds an endpoint may subscribe to (and the events feed lists), in the order
            /// the contract lists them; never `ping`.
            pub const SUBSCRIBABLE: [EventKind; [$($name),+].len()] = [$(Self::$kind),+];

            /// Every kind a delivery may carry: [`Self::SUBSCRIBABLE`], then the kinds sent only
            /// on request (`ping`).
            pub const DELIVERED: [EventKind; [$($name,)+ $($oname),*].len()] =
                [$(Self::$kind,)+ $(Self::$other,)*];

            /// The names of [`Self::SUBSCRIBABLE`], as a message lists them (`a, b or c`).
            pub const SUBSCRIBABLE_NAMES: &'static str = or_list!($($name),+);

            /// The names of [`Self::DELIVERED`], as a message lists them.
            pub const DELIVERED_NAMES: &'static str = or_list!($($name,)+ $($oname),*);

            /// The name on the wire.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( Self::$kind => $name, )+
                    $( Self::$other => $oname, )*
                }
            }
        }
    };
}

event_kinds! {
    /// A lead was created (delivered after the endpoint's `leadCreatedDelay`, if any).
    LeadCreated = "lead.created",
    /// A lead's phone was filled in or changed by a later intake step.
    LeadEnriched = "lead.enriched",
    /// An order was stored (the first time its `orderId` was seen).
    OrderCreated = "order.created",
    /// A payout was recorded.
    PayoutCreated = "payout.created",
    ;
    /// A test delivery a partner asks for (extensions.md §1); no endpoint subscribes to it.
    Ping = "ping",
}

impl EventKind {
    /// One of the kinds an endpoint subscribes to ([`Self::SUBSCRIBABLE`]; never `ping`).
    pub fn parse(s: &str) -> Option<Self> {
        Self::SUBSCRIBABLE.into_iter().find(|k| k.as_str() == s)
    }

    /// Any kind a delivery may carry ([`Self::DELIVERED`]).
    pub fn parse_delivered(s: &str) -> Option<Self> {
        Self::DELIVERED.into_iter().find(|k| k.as_str() == s)
    }

    /// Whether a delivery of this kind waits for its endpoint's `leadCreatedDelaySeconds`
    /// before its first attempt (spec: the delay applies to `lead.created` only).
    pub fn honours_endpoint_delay(self) -> bool {
        match self {
            Self::LeadCreated => true,
            Self::LeadEnriched | Self::OrderCreated | Self::PayoutCreated | Self::Ping => false,
        }
    }
}

impl Serialize for EventKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 21: `EventKind::ALL` left out `ping`, so "all" meant "all but one". The two sets
    /// are named for what they hold, and `ping` is in exactly the delivered one.
    #[test]
    fn ping_is_delivered_on_request_but_never_subscribed_to() {
        assert!(!EventKind::SUBSCRIBABLE.contains(&EventKind::Ping));
        assert!(EventKind::DELIVERED.contains(&EventKind::Ping));
        // Every kind is delivered; every kind but ping can be subscribed to.
        for k in EventKind::DELIVERED {
            assert_eq!(
                EventKind::SUBSCRIBABLE.contains(&k),
                k != EventKind::Ping,
                "{k:?}"
            );
        }
    }

    #[test]
    fn every_kind_round_trips_its_wire_name() {
        for k in EventKind::SUBSCRIBABLE {
            assert_eq!(EventKind::parse(k.as_str()), Some(k));
        }
        for k in EventKind::DELIVERED {
            assert_eq!(EventKind::parse_delivered(k.as_str()), Some(k));
        }
        assert_eq!(
            EventKind::parse("ping"),
            None,
            "no endpoint subscribes to ping"
        );
        assert_eq!(EventKind::parse_delivered("ping"), Some(EventKind::Ping));
        assert_eq!(
            EventKind::parse_delivered("order.created"),
            Some(EventKind::OrderCreated)
        );
        assert_eq!(EventKind::parse("Lead.Created"), None);
    }

    #[test]
    fn the_lists_come_from_the_declaration() {
        assert_eq!(
            EventKind::SUBSCRIBABLE_NAMES,
            "lead.created, lead.enriched, order.created or payout.created"
        );
        assert_eq!(
            EventKind::DELIVERED_NAMES,
            "lead.created, lead.enriched, order.created, payout.created or ping"
        );
        assert_eq!(
            EventKind::DELIVERED.len(),
            EventKind::SUBSCRIBABLE.len() + 1
        );
        assert!(EventKind::DELIVERED.starts_with(&EventKind::SUBSCRIBABLE));
    }
}
