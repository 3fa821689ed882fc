//! Pure domain of the Partner Portal API: the contract's rules, free of I/O.
//!
//! Three kinds of code use this crate, and its public surface is laid out for them:
//!
//! - **Other internal services** (a billing or newsletter job in a crate of its own) reuse the
//!   rules: parse partner values ([`kernel::values`]: [`PartnerId`](kernel::values::PartnerId),
//!   [`SubId`](kernel::values::SubId), [`Email`](kernel::values::Email),
//!   [`Money`](kernel::values::Money)…), build Care Services and medical links ([`links`]),
//!   decide coupon redemption ([`coupon::Coupon::can_redeem`]) and commission
//!   ([`order::Order::counts_toward_commission`], [`order::CommissionSummary`]), and verify a
//!   webhook delivery as a receiver ([`webhook::WebhookVerifier`]).
//! - **Unit tests of the rules**, here and in other crates, run the services over mocks of their
//!   ports with a fixed clock and seeded randomness: the `mocks` feature adds a `mockall` mock of
//!   every port (`MockTokenRepo`, `MockSubAccountRepo`…; each aggregate's transaction too,
//!   `MockLeadTransaction`…, begun by `kernel::uow::BeginsOnce`), `kernel::random::SeededRandom`
//!   and `account::auth::Principal::for_test`; [`kernel::clock::FixedClock`] is always there.
//! - **This workspace's server and adapters** (`partner-postgres`, `partner-http`,
//!   `partner-webhooks`, `partner-redis`, `partner-server`) implement the ports (the `ports`
//!   module of each aggregate, [`Clock`], [`Random`]) and call the services. What they need and no
//!   other service does (stored forms, the delivery worker's claims, token-sealed reads…) is
//!   public for them; what no other crate uses is `pub(crate)`.
//!
//! The public API is recorded in `docs/partner-domain-public-api.txt` and CI fails when it
//! changes without that file (`.ci/public-api`), so a change of this surface is a
//! conscious one. `docs/architecture.md` ("Depending on the domain from another service") says
//! how another crate depends on this one; `examples/billing_job.rs` is such a service in small.
//!
//! The crate re-exports the three crates its API speaks in ([`time`], [`url`], [`uuid`]), so a
//! dependent names `partner_domain::time::OffsetDateTime` without choosing versions itself. It
//! uses no randomness of its own: ids, tokens, codes and secrets are drawn from the injected
//! [`Random`].
//!
//! # Reuse a rule
//!
//! Values are built only by their parsers, and a coupon only by [`coupon::Coupon::new`], which
//! refuses the states the contract rules out; the redemption rule is then one call:
//!
//! ```
//! use partner_domain::coupon::{
//!     Coupon, CouponCode, CouponError, CouponParts, ProductSlug, RedeemRefusal, StoredStatus,
//! };
//! use partner_domain::kernel::ids::{BulkOrderId, CouponId};
//! use partner_domain::kernel::values::{PartnerId, SubId};
//! use partner_domain::time::{Duration, OffsetDateTime};
//! use partner_domain::uuid::Uuid;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let partner = PartnerId::parse("acme")?;
//! assert!(PartnerId::parse("Not an id!").is_err());
//! let sub = SubId::parse("7")?;
//!
//! let now = OffsetDateTime::from_unix_timestamp(1_795_000_000)?;
//! let parts = CouponParts {
//!     id: CouponId::from_uuid(Uuid::from_u128(1)),
//!     code: CouponCode::normalize("abcd-efgh-2345").ok_or("not a code")?,
//!     partner_id: partner,
//!     sub_id: Some(sub),
//!     product_slug: ProductSlug::UrgentCare,
//!     months: 3,
//!     status: StoredStatus::Active,
//!     expires_at: Some(now + Duration::days(30)),
//!     redemption: None,
//!     bulk_order_id: BulkOrderId::from_uuid(Uuid::from_u128(2)),
//!     purchaser_email: "billing@acme.test".into(),
//!     purchaser_source: "newsletter".into(),
//!     unit_price_cents: 4_900,
//!     notes: None,
//!     created_at: now,
//! };
//! // A coupon for 7 months is a state the contract rules out: it cannot be built.
//! let seven = CouponParts { months: 7, ..parts.clone() };
//! assert_eq!(Coupon::new(seven), Err(CouponError::Months));
//!
//! let coupon = Coupon::new(parts)?;
//! assert_eq!(coupon.can_redeem(ProductSlug::UrgentCare, 3, now), Ok(()));
//! assert_eq!(coupon.can_redeem(ProductSlug::VetCare, 3, now), Err(RedeemRefusal::Mismatch));
//! let later = now + Duration::days(31);
//! assert!(matches!(
//!     coupon.can_redeem(ProductSlug::UrgentCare, 3, later),
//!     Err(RedeemRefusal::NotActive(_)) // expired
//! ));
//! # Ok(())
//! # }
//! ```
//!
//! # Verify a delivery
//!
//! A receiver builds one [`webhook::WebhookVerifier`] from every secret it accepts (during a
//! rotation, the new and the old one) and hands it the delivery's headers and raw body:
//!
//! ```
//! use partner_domain::time::OffsetDateTime;
//! use partner_domain::webhook::{VerifyError, WebhookSecret, WebhookVerifier};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let new = WebhookSecret::from_stored("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into());
//! let old = WebhookSecret::from_stored("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD".into());
//! let verifier = WebhookVerifier::new([new.clone(), old.clone()])?;
//! assert_eq!(WebhookVerifier::new([]).err(), Some(VerifyError::NoSecret));
//!
//! // What arrived: here signed by the sender's function, during the rotation's overlap.
//! let body = br#"{"id":"6c1f","event":"ping","created_at":"2026-11-23T10:00:00.000Z","data":{}}"#;
//! let now = OffsetDateTime::from_unix_timestamp(1_795_000_000)?;
//! let header = partner_domain::webhook::signature_header_with(&[&new, &old], now.unix_timestamp(), body);
//! let headers = [("X-Partner-Signature", header.as_str()), ("Content-Type", "application/json")];
//!
//! assert_eq!(verifier.verify(headers, body, now), Ok(()));
//! assert_eq!(verifier.verify(headers, b"{}", now), Err(VerifyError::Mismatch));
//! let much_later = now + partner_domain::time::Duration::minutes(6);
//! assert_eq!(verifier.verify(headers, body, much_later), Err(VerifyError::TooOld));
//! # Ok(())
//! # }
//! ```
//!
//! # Test a service over the mocks
//!
//! With the `mocks` feature (a dev-dependency `partner-domain = { …, features = ["mocks"] }`),
//! a service runs over `mockall` mocks of its ports, a [`kernel::clock::FixedClock`] and a
//! `kernel::random::SeededRandom`; the mocks answer at once, so no runtime is needed:
//!
//! ```
//! # #[cfg(feature = "mocks")]
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//!
//! use futures_util::FutureExt as _; // `now_or_never`: the mocks never wait
//! use partner_domain::kernel::clock::FixedClock;
//! use partner_domain::kernel::random::SeededRandom;
//! use partner_domain::kernel::values::{Nickname, PartnerId, SubId};
//! use partner_domain::sub_account::ports::{InsertSubAccount, MockSubAccountRepo};
//! use partner_domain::sub_account::{CreateSubAccountError, SubAccount, SubAccountService};
//! use partner_domain::time::OffsetDateTime;
//!
//! let now = OffsetDateTime::from_unix_timestamp(1_795_000_000)?;
//! let mut repo = MockSubAccountRepo::new();
//! repo.expect_insert()
//!     .times(1)
//!     .returning(|partner, new| {
//!         assert_eq!(partner.as_str(), "acme"); // every write is scoped by the partner
//!         Ok(InsertSubAccount::Inserted(SubAccount::new(
//!             new.id,
//!             "ops@acme.test".into(),
//!             new.sub_id,
//!             new.nickname.to_string(),
//!             new.now,
//!             new.now,
//!         )))
//!     });
//! let service = SubAccountService::new(
//!     Arc::new(repo),
//!     Arc::new(FixedClock::new(now)),
//!     Arc::new(SeededRandom::new(7)),
//! );
//! let created = service
//!     .create(&PartnerId::parse("acme")?, SubId::parse("7")?, Nickname::parse("Ann")?)
//!     .now_or_never()
//!     .ok_or("the mocks answer at once")??;
//! assert_eq!(created.created_at(), now); // the fixed clock's instant
//!
//! // A duplicate `subId` is decided by the store and mapped to its own error.
//! let mut repo = MockSubAccountRepo::new();
//! repo.expect_insert().returning(|_, _| Ok(InsertSubAccount::DuplicateSubId));
//! let service = SubAccountService::new(
//!     Arc::new(repo),
//!     Arc::new(FixedClock::new(now)),
//!     Arc::new(SeededRandom::new(7)),
//! );
//! let again = service
//!     .create(&PartnerId::parse("acme")?, SubId::parse("7")?, Nickname::parse("Ann")?)
//!     .now_or_never()
//!     .ok_or("the mocks answer at once")?;
//! assert!(matches!(again, Err(CreateSubAccountError::Duplicate(_))));
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "mocks"))]
//! # fn main() {}
//! ```
//!
//! # Layout
//!
//! One module per aggregate (`account` with its tokens and authentication, `sub_account`,
//! `lead`, `order`, `payout`, `catalog`, `links`, `coupon`, `webhook`), each with its model
//! (`mod.rs`), its ports (`ports.rs`) and its service (`service.rs`), over a shared `kernel` that
//! imports nothing above it; `events` (the event kinds, typed events and the outbox) sits beside
//! the kernel, and `webhook` above the aggregates whose events it delivers. No two top-level
//! modules import each other, directly or not (`tests/layers.rs`).

#![deny(missing_docs)]
#![cfg_attr(test, allow(clippy::expect_used, clippy::indexing_slicing))]

pub mod account;
pub mod catalog;
pub mod coupon;
pub mod events;
pub mod idempotency;
pub mod kernel;
pub mod lead;
pub mod links;
pub mod order;
pub mod payout;
pub mod rate_limit;
pub mod sub_account;
pub mod webhook;

pub use kernel::clock::{Clock, SystemClock};
pub use kernel::error::RepoError;
pub use kernel::random::{Random, SystemRandom};

// The crates the public API speaks in, so a dependent uses the same versions without naming them.
pub use time;
pub use url;
pub use uuid;
