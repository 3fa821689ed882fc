//! Typed identifiers: a UUID that says what it identifies, so an endpoint id cannot be passed
//! where a delivery id is expected. On the wire each is the UUID's text (`serde(transparent)`).
//!
//! ```
//! use partner_domain::kernel::ids::{DeliveryId, parse_uuid};
//!
//! assert!(DeliveryId::parse("not-a-uuid").is_err());
//! let id = parse_uuid("0f8fad5b-d9cb-469f-a165-70867728950e", "deliveryId")?;
//! assert_eq!(DeliveryId::from_uuid(id).as_uuid(), id);
//! # Ok::<(), partner_domain::kernel::values::ValueError>(())
//! ```

use std::fmt;

use uuid::Uuid;

use crate::kernel::random::Random;
use crate::kernel::values::ValueError;

/// A UUID of a request field (a path segment or a body field): `{field} must be a UUID`
/// otherwise.
pub fn parse_uuid(s: &str, field: &'static str) -> Result<Uuid, ValueError> {
    Uuid::parse_str(s).map_err(|_| ValueError::Expected {
        field,
        expected: "a UUID",
    })
}

macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident, $field:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
        #[serde(transparent)]
        pub struct $name(Uuid);

        impl $name {
            /// An id read back from storage or built by a test.
            pub const fn from_uuid(id: Uuid) -> Self {
                Self(id)
            }

            /// A new random (v4) id.
            pub fn generate(rng: &dyn Random) -> Self {
                Self(crate::kernel::random::new_id(rng))
            }

            /// A new time-ordered (v7) id of a row created `at`: new rows of a big table land
            /// at the right edge of its primary key, not on random leaves.
            pub fn generate_at(rng: &dyn Random, at: time::OffsetDateTime) -> Self {
                Self(crate::kernel::random::new_time_ordered_id(rng, at))
            }

            /// Parses the text of a request (path or body); the error names the field.
            pub fn parse(s: &str) -> Result<Self, ValueError> {
                Uuid::parse_str(s)
                    .map(Self)
                    .map_err(|_| ValueError::invalid($field, "must be a UUID"))
            }

            /// The UUID.
            pub const fn as_uuid(self) -> Uuid {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl From<$name> for Uuid {
            fn from(id: $name) -> Uuid {
                id.0
            }
        }
    };
}

uuid_id!(
    /// A lead.
    LeadId,
    "id"
);
uuid_id!(
    /// An event of the outbox (the events feed's `id`, and `X-Partner-Event-Id`).
    EventId,
    "id"
);
uuid_id!(
    /// A partner's webhook endpoint.
    EndpointId,
    "id"
);
uuid_id!(
    /// One delivery of one event to one endpoint.
    DeliveryId,
    "id"
);

uuid_id!(
    /// A partner's sub-account (its row, not its numeric `subId`).
    SubAccountId,
    "id"
);
uuid_id!(
    /// A Care Services coupon.
    CouponId,
    "id"
);
uuid_id!(
    /// An API token (its row; never its secret text).
    TokenId,
    "id"
);
uuid_id!(
    /// A portal user.
    UserId,
    "id"
);
uuid_id!(
    /// A catalog product (medical, DNA or Care Services: they share one key space per kind).
    ProductId,
    "id"
);
uuid_id!(
    /// An image file of a medical product, in the media store the product links to.
    ImageFileId,
    "imageFileId"
);
uuid_id!(
    /// The bulk order a Care Services coupon was issued in.
    BulkOrderId,
    "bulkOrderId"
);
uuid_id!(
    /// A payout (its `recordId` on the wire).
    PayoutId,
    "recordId"
);
uuid_id!(
    /// An analytics event of a simulated run.
    AnalyticsEventId,
    "id"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_uuids_only_and_render_them_unchanged() {
        let text = "0b7e6f1c-3f4e-4a59-9a57-6f1f0e3c2d11";
        let id = EndpointId::parse(text).expect("uuid");
        assert_eq!(id.to_string(), text);
        assert_eq!(
            serde_json::to_value(id).expect("json"),
            serde_json::json!(text)
        );
        assert!(DeliveryId::parse("not-a-uuid").is_err());
        assert!(LeadId::parse("").is_err());
    }
}
