//! The lead aggregate's ports.

use async_trait::async_trait;
use time::OffsetDateTime;

use crate::account::auth::Sealed;
use crate::account::token::TokenHash;
use crate::kernel::cursor::Position;
use crate::kernel::error::RepoError;
use crate::kernel::values::PartnerId;
use crate::lead::Lead;

/// Reads of leads (writes go through a [`Transaction`]).
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait LeadRepo: Send + Sync {
    /// Up to `limit` of the partner's leads strictly after `after` in (createdAt desc, id desc)
    /// order; test rows only when `include_test`.
    async fn page_leads(
        &self,
        partner: &PartnerId,
        after: Option<Position>,
        include_test: bool,
        limit: u16,
    ) -> Result<Vec<Lead>, RepoError>;
    /// In ONE round trip: the token with this hash (as [`TokenRepo::find_by_hash`]) and the page
    /// [`LeadRepo::page_leads`] would read for its partner. Rows are read only for a token that
    /// is live at `now` (not revoked or expired, user not deleted, partner active), and only of
    /// that token's partner; whether the request is authenticated is still decided by
    /// [`crate::account::auth::AuthService::open`] from the record.
    async fn page_leads_for_token(
        &self,
        hash: &TokenHash,
        now: OffsetDateTime,
        after: Option<Position>,
        include_test: bool,
        limit: u16,
    ) -> Result<Sealed<Vec<Lead>>, RepoError>;
}

crate::kernel::debug_port!(LeadRepo);
