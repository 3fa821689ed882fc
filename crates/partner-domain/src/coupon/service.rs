//! The coupon service: issuance, redemption, voiding and listing.

use std::sync::Arc;

use serde::Serialize;
use time::OffsetDateTime;

use crate::account::auth::{Sealed, TokenKey};
use crate::account::ports::AccountRepo;
use crate::coupon::ports::{CouponRepo, CouponWrite};
use crate::coupon::{
    BulkOrderRequest, Coupon, CouponCode, CouponFilter, CouponPage, CouponParts, CouponRow,
    ProductSlug, RedeemRefusal, Redemption, StoredStatus,
};
use crate::kernel::clock::Clock;
use crate::kernel::error::RepoError;
use crate::kernel::ids::BulkOrderId;
use crate::kernel::ids::CouponId;
use crate::kernel::random::Random;
use crate::kernel::values::Email;
use crate::sub_account::ports::SubAccountRepo;

/// Errors of [`CouponService::issue`].
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    #[error("no partner with that partnerId")]
    UnknownPartner,
    #[error("subAccountId must be an existing sub-account of the partner")]
    UnknownSubAccount,
    #[error("expiresAt must be in the future")]
    ExpiryPast,
    #[error(transparent)]
    Repo(#[from] RepoError),
}

/// Errors of [`CouponService::redeem`] and [`CouponService::void`].
#[derive(Debug, thiserror::Error)]
pub enum TransitionError {
    #[error("no such coupon")]
    NotFound,
    #[error(transparent)]
    Refused(RedeemRefusal),
    #[error(transparent)]
    Repo(#[from] RepoError),
}

/// The issued bulk order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BulkOrder {
    pub bulk_order_id: BulkOrderId,
    pub coupons: Vec<CouponRow>,
}

/// Coupon issuance, redemption, voiding and listing.
#[derive(Debug, Clone)]
pub struct CouponService {
    repo: Arc<dyn CouponRepo>,
    accounts: Arc<dyn AccountRepo>,
    subs: Arc<dyn SubAccountRepo>,
    clock: Arc<dyn Clock>,
    rng: Arc<dyn Random>,
}

impl CouponService {
    pub fn new(
        repo: Arc<dyn CouponRepo>,
        accounts: Arc<dyn AccountRepo>,
        subs: Arc<dyn SubAccountRepo>,
        clock: Arc<dyn Clock>,
        rng: Arc<dyn Random>,
    ) -> Self {
        Self {
            repo,
            accounts,
            subs,
            clock,
            rng,
        }
    }

    /// Issues `quantity` codes in one transaction. Codes are unique across the table; on the
    /// (astronomically rare) collision the whole order is retried with fresh codes.
    pub async fn issue(&self, req: BulkOrderRequest) -> Result<BulkOrder, IssueError> {
        let now = self.clock.now();
        if req.expires_at.is_some_and(|e| e <= now) {
            return Err(IssueError::ExpiryPast);
        }
        if self.accounts.partner(&req.partner_id).await?.is_none() {
            return Err(IssueError::UnknownPartner);
        }
        if let Some(s) = req.sub_id
            && !self.subs.exists(&req.partner_id, s).await?
        {
            return Err(IssueError::UnknownSubAccount);
        }
        let bulk_order_id = BulkOrderId::generate(self.rng.as_ref());
        for _ in 0..3 {
            let coupons = self.mint(&req, bulk_order_id, now);
            if self.repo.insert_bulk(&coupons).await? == CouponWrite::Done {
                return Ok(BulkOrder {
                    bulk_order_id,
                    coupons: coupons.iter().map(|c| c.row(now)).collect(),
                });
            }
        }
        Err(RepoError::new("coupon codes collided three times").into())
    }

    fn mint(
        &self,
        req: &BulkOrderRequest,
        bulk_order_id: BulkOrderId,
        now: OffsetDateTime,
    ) -> Vec<Coupon> {
        let mut codes = std::collections::HashSet::with_capacity(req.quantity as usize);
        let mut out = Vec::with_capacity(req.quantity as usize);
        while out.len() < req.quantity as usize {
            let code = CouponCode::mint(self.rng.as_ref());
            if !codes.insert(code.clone()) {
                continue;
            }
            out.push(Coupon::new(CouponParts {
                id: CouponId::generate(self.rng.as_ref()),
                code,
                partner_id: req.partner_id.clone(),
                sub_id: req.sub_id,
                product_slug: req.product_slug,
                months: req.months,
                status: StoredStatus::Active,
                expires_at: req.expires_at,
                redemption: None,
                bulk_order_id,
                purchaser_email: req.purchaser_email.to_string(),
                purchaser_source: req.purchaser_source.clone(),
                unit_price_cents: req.unit_price_cents,
                notes: req.notes.clone(),
                created_at: now,
            }));
        }
        out
    }

    /// Redeems a code: exactly one of any number of concurrent attempts succeeds.
    pub async fn redeem(
        &self,
        code: &CouponCode,
        slug: ProductSlug,
        months: u8,
        who: Redemption,
    ) -> Result<CouponRow, TransitionError> {
        let now = who.at;
        match self.repo.redeem(code, slug, months, &who).await? {
            Ok(c) => Ok(c.row(now)),
            Err(None) => Err(TransitionError::NotFound),
            Err(Some(c)) => Err(TransitionError::Refused(
                c.can_redeem(slug, months, now).err().unwrap_or(
                    // The update lost a race to a concurrent redemption or void.
                    RedeemRefusal::NotActive(c.status_at(now)),
                ),
            )),
        }
    }

    /// A redemption by `email` happening now.
    pub fn redemption(&self, email: &Email, provider_primary_external_id: String) -> Redemption {
        Redemption {
            at: self.clock.now(),
            email: email.to_string(),
            provider_primary_external_id,
        }
    }

    pub async fn void(&self, id: CouponId) -> Result<CouponRow, TransitionError> {
        let now = self.clock.now();
        match self.repo.void(id, now).await? {
            Ok(c) => Ok(c.row(now)),
            Err(None) => Err(TransitionError::NotFound),
            Err(Some(c)) => Err(TransitionError::Refused(
                c.can_void(now)
                    .err()
                    .unwrap_or(RedeemRefusal::NotActive(c.status_at(now))),
            )),
        }
    }

    /// A page of coupons matching `filter` at the clock's instant (effective statuses, newest
    /// first) and the count of all that match, for the partner [`listing_scope`] gives the token
    /// of `key` (decided in the statement), read with the token's record in one round trip and sealed until
    /// authentication passes. The caller still decides the scope with [`listing_scope`] for the
    /// authenticated principal (400/403) before answering with the page.
    pub async fn list_for_token(
        &self,
        key: TokenKey,
        filter: &CouponFilter,
    ) -> Result<Sealed<CouponPage>, RepoError> {
        let now = key.now;
        Ok(self
            .repo
            .list_for_token(key, filter)
            .await?
            .map(|(coupons, total)| CouponPage {
                items: coupons.iter().map(|c| c.row(now)).collect(),
                total,
            }))
    }

    pub fn now(&self) -> OffsetDateTime {
        self.clock.now()
    }
}
