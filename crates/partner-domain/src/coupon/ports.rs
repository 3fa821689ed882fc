//! The coupon aggregate's port.
//!
//! ```
//! use partner_domain::coupon::ports::CouponWrite;
//!
//! // A bulk insert wrote every code, or met an existing code and wrote none (the service then
//! // draws new codes and tries again).
//! let outcome = CouponWrite::CodeCollision;
//! assert_ne!(outcome, CouponWrite::Done);
//! ```

use async_trait::async_trait;
use time::OffsetDateTime;

use crate::account::auth::{Sealed, TokenKey};
use crate::coupon::{Coupon, CouponCode, CouponFilter, ProductSlug, Redemption};
use crate::kernel::error::RepoError;
use crate::kernel::ids::CouponId;

/// How a write that must be unique ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CouponWrite {
    /// Written.
    Done,
    /// A code already exists; nothing was written.
    CodeCollision,
}

/// Storage of coupons. State changes MUST be single conditional statements (compare-and-set on
/// the stored status and, for redemption, the expiry at the given time), so that of concurrent
/// attempts on one code exactly one succeeds.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait CouponRepo: Send + Sync {
    /// Inserts every coupon in one transaction, or none.
    async fn insert_bulk(&self, coupons: &[Coupon]) -> Result<CouponWrite, RepoError>;
    /// One conditional update: the coupon with `code` becomes redeemed if it is active at
    /// `who.at` and locked to `slug` and `months`. `Err(None)`: no such code; `Err(Some(c))`:
    /// the coupon as it is, unchanged.
    async fn redeem(
        &self,
        code: &CouponCode,
        slug: ProductSlug,
        months: u8,
        who: &Redemption,
    ) -> Result<Result<Coupon, Option<Coupon>>, RepoError>;
    /// The same for `active → void`.
    async fn void(
        &self,
        id: CouponId,
        now: OffsetDateTime,
    ) -> Result<Result<Coupon, Option<Coupon>>, RepoError>;
    /// In ONE round trip: the token of `key` and a page of the coupons matching `filter` at
    /// `key.now` (effective statuses), newest first, with the count of all that match, for the
    /// partner the statements derive from the token by [`crate::coupon::listing_scope`]'s rule
    /// (nothing when the token is not live or the scope is refused).
    async fn list_for_token(
        &self,
        key: TokenKey,
        filter: &CouponFilter,
    ) -> Result<Sealed<(Vec<Coupon>, u64)>, RepoError>;
    /// In ONE round trip: the token of `key` and the coupon with this code when it belongs to
    /// the token's own partner (admin tokens too).
    async fn find_for_token(
        &self,
        key: TokenKey,
        code: &CouponCode,
    ) -> Result<Sealed<Option<Coupon>>, RepoError>;
}

crate::kernel::debug_port!(CouponRepo);
