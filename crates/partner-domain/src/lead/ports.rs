//! The lead aggregate's ports: reads of leads, and the writes of a lead transaction.
//!
//! Services hold the ports as trait objects; the PostgreSQL adapter implements them, and the
//! `mocks` feature generates `MockLeadRepo` for tests:
//!
//! ```
//! use std::sync::Arc;
//! use partner_domain::lead::ports::LeadRepo;
//!
//! fn wire(_reads: Arc<dyn LeadRepo>) {}
//! ```

use async_trait::async_trait;
use time::OffsetDateTime;

use crate::account::auth::{Sealed, TokenKey};
use crate::account::token::TokenHash;
use crate::events::Outbox;
#[cfg(any(test, feature = "mocks"))]
use crate::events::{DomainEvent, Requeue};
use crate::kernel::cursor::Position;
use crate::kernel::error::RepoError;
use crate::kernel::ids::LeadId;
use crate::kernel::uow::Commit;
use crate::kernel::values::PartnerId;
use crate::lead::Lead;

/// Reads of leads (writes go through a [`LeadTransaction`]).
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
    /// In ONE round trip: the token with this hash (as [`crate::account::ports::TokenRepo::find_by_hash`]) and the page
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
    /// In ONE round trip: the token of `key` and the lead with this id when it belongs to the
    /// token's partner (test leads too), taken from the token by the statement; nothing for a
    /// token that is not live.
    async fn lead_for_token(
        &self,
        key: TokenKey,
        id: LeadId,
    ) -> Result<Sealed<Option<Lead>>, RepoError>;
}

/// The writes of the lead service, inside a [`LeadTransaction`].
#[async_trait]
pub trait LeadWrites: Send {
    /// Inserts the lead. `false`, with nothing written, when its partner does not exist; the
    /// transaction stays usable.
    async fn insert_lead(&mut self, lead: &Lead) -> Result<bool, RepoError>;
    /// The lead with this id, locked against concurrent writers until the transaction ends;
    /// `None` for an unknown id.
    async fn lock_lead(&mut self, id: LeadId) -> Result<Option<Lead>, RepoError>;
    /// Stores what a patch may change of a lead (names, email, phone, consents, `updatedAt`),
    /// for the lead with the same id.
    async fn update_lead(&mut self, lead: &Lead) -> Result<(), RepoError>;
}

/// A transaction of the lead service: its writes and the events they cause, committed together
/// (begun by a `UnitOfWork<dyn LeadTransaction>`).
pub trait LeadTransaction: LeadWrites + Outbox + Commit {}

impl<T: LeadWrites + Outbox + Commit + ?Sized> LeadTransaction for T {}

#[cfg(any(test, feature = "mocks"))]
mockall::mock! {
    /// A mock [`LeadTransaction`]: its writes, the outbox and the commit.
    pub LeadTransaction {}
    #[async_trait]
    impl LeadWrites for LeadTransaction {
        async fn insert_lead(&mut self, lead: &Lead) -> Result<bool, RepoError>;
        async fn lock_lead(&mut self, id: LeadId) -> Result<Option<Lead>, RepoError>;
        async fn update_lead(&mut self, lead: &Lead) -> Result<(), RepoError>;
    }
    #[async_trait]
    impl Outbox for LeadTransaction {
        async fn publish(&mut self, events: &[DomainEvent], now: OffsetDateTime) -> Result<u64, RepoError>;
        async fn requeue(&mut self, partner: &PartnerId, which: Requeue, now: OffsetDateTime) -> Result<Option<crate::events::Requeued>, RepoError>;
    }
    #[async_trait]
    impl Commit for LeadTransaction {
        async fn commit(self: Box<Self>) -> Result<(), RepoError>;
    }
}

crate::kernel::debug_port!(LeadRepo);
