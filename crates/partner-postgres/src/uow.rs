//! The unit-of-work port: a transaction held on one pooled connection across a service's calls.
//! One transaction type implements every aggregate's writes and the outbox; the store begins it
//! as each aggregate's transaction (`UnitOfWork<dyn LeadTransaction>`, …).

use diesel_async::{AnsiTransactionManager, AsyncPgConnection, TransactionManager};
use partner_domain::RepoError;
use partner_domain::events::{DomainEvent, Outbox, Requeue, Requeued};
use partner_domain::idempotency::KeyTaken;
use partner_domain::kernel::ids::{DeliveryId, EndpointId, PayoutId};
use partner_domain::kernel::uow::{Commit, UnitOfWork};
use partner_domain::kernel::values::PartnerId;
use partner_domain::lead::ports::{LeadTransaction, LeadWrites};
use partner_domain::lead::{Lead, LeadId};
use partner_domain::order::ports::{OrderTransaction, OrderWrites};
use partner_domain::order::{Order, OrderListing};
use partner_domain::payout::ports::{PayoutTransaction, PayoutWrites};
use partner_domain::payout::{NewPayout, Payout};
use partner_domain::webhook::DeliveryInfo;
use partner_domain::webhook::WebhookEndpoint;
use partner_domain::webhook::ports::{
    ActionCalls, DeliveryReads, EndpointWrites, WebhookTransaction,
};
use time::OffsetDateTime;

use crate::held::{Conn, HeldTx, Took};
use crate::{PgStore, action_budget, db, endpoint_writes, leads, orders, outbox, payouts};

/// An open transaction. `conn` is `None` once committed.
///
/// In a keyed request ([`crate::held`]) the first one runs in the transaction that claimed the
/// request's key and leaves it open, parked, at `commit`, for the idempotency layer to commit
/// with the request's answer; later ones are savepoints in it, on its connection.
struct PgTransaction {
    conn: Option<Conn>,
    store: PgStore,
    /// Deliveries written so far, announced to the workers after the commit.
    deliveries: usize,
    /// Whether it runs directly in the transaction that claimed the request's key: its commit
    /// leaves that transaction open (held, no longer fresh); its rollback rolls back the claim
    /// too (nothing else ran in it), and the key is claimed again by what comes next.
    on_claim: bool,
}

impl PgTransaction {
    fn conn(&mut self) -> Result<&mut AsyncPgConnection, RepoError> {
        self.conn
            .as_deref_mut()
            .ok_or_else(|| RepoError::new("the transaction has ended"))
    }
}

impl PgStore {
    async fn begin_transaction(&self) -> Result<PgTransaction, RepoError> {
        let held = HeldTx::current(self.workers.id);
        let mut took = held.as_ref().map(HeldTx::take);
        while let (Some(Took::Wait), Some(h)) = (&took, &held) {
            h.settled().await;
            took = Some(h.take());
        }
        let mut conn = match took {
            // The transaction that claimed the request's key, nothing written in it yet: the
            // unit runs in it directly.
            Some(Took::Conn(conn, true)) => return Ok(self.on_claim(conn)),
            // A savepoint in the request's held transaction.
            Some(Took::Conn(conn, false)) => conn,
            // The request's key, claimed in the round trip of this unit's `BEGIN`.
            Some(Took::Claim(held)) => {
                let conn = self.claim_held(&held).await?;
                return Ok(self.on_claim(conn));
            }
            Some(Took::Refused) => return Err(RepoError::new(KeyTaken)),
            Some(Took::Busy | Took::Wait) | None => Conn::pooled(self.pooled().await?),
        };
        AnsiTransactionManager::begin_transaction(&mut *conn)
            .await
            .map_err(db)?;
        Ok(PgTransaction {
            conn: Some(conn),
            store: self.clone(),
            deliveries: 0,
            on_claim: false,
        })
    }

    /// A unit of work run directly in the fresh transaction that claimed the request's key.
    fn on_claim(&self, conn: Conn) -> PgTransaction {
        PgTransaction {
            conn: Some(conn),
            store: self.clone(),
            deliveries: 0,
            on_claim: true,
        }
    }
}

/// The store begins the one transaction type as each aggregate's transaction.
macro_rules! unit_of_work {
    ($($tx:ident),*) => {$(
        #[async_trait::async_trait]
        impl UnitOfWork<dyn $tx> for PgStore {
            async fn begin(&self) -> Result<Box<dyn $tx>, RepoError> {
                Ok(Box::new(self.begin_transaction().await?))
            }
        }
    )*};
}
unit_of_work!(
    LeadTransaction,
    OrderTransaction,
    PayoutTransaction,
    WebhookTransaction
);

#[async_trait::async_trait]
impl LeadWrites for PgTransaction {
    async fn insert_lead(&mut self, lead: &Lead) -> Result<bool, RepoError> {
        leads::insert(self.conn()?, lead).await.map_err(db)
    }

    async fn lock_lead(&mut self, id: LeadId) -> Result<Option<Lead>, RepoError> {
        leads::lock(self.conn()?, id).await
    }

    async fn update_lead(&mut self, lead: &Lead) -> Result<(), RepoError> {
        leads::update(self.conn()?, lead).await.map_err(db)
    }
}

#[async_trait::async_trait]
impl OrderWrites for PgTransaction {
    async fn partner_exists(&mut self, partner: &PartnerId) -> Result<bool, RepoError> {
        outbox::partner_exists(self.conn()?, partner.as_str())
            .await
            .map_err(db)
    }

    async fn insert_order(
        &mut self,
        order: &Order,
        now: OffsetDateTime,
    ) -> Result<bool, RepoError> {
        orders::insert(self.conn()?, order, now).await.map_err(db)
    }

    async fn order_listing(&mut self, order_id: &str) -> Result<Option<OrderListing>, RepoError> {
        orders::stored_listing(self.conn()?, order_id).await
    }
}

#[async_trait::async_trait]
impl PayoutWrites for PgTransaction {
    async fn insert_payout(
        &mut self,
        id: PayoutId,
        new: &NewPayout,
        now: OffsetDateTime,
    ) -> Result<Option<Payout>, RepoError> {
        payouts::insert(self.conn()?, id.as_uuid(), new, now).await
    }
}

#[async_trait::async_trait]
impl DeliveryReads for PgTransaction {
    async fn delivery(
        &mut self,
        partner: &PartnerId,
        id: DeliveryId,
    ) -> Result<Option<DeliveryInfo>, RepoError> {
        outbox::delivery(self.conn()?, partner, id).await
    }
}

#[async_trait::async_trait]
impl Outbox for PgTransaction {
    async fn publish(
        &mut self,
        events: &[DomainEvent],
        now: OffsetDateTime,
    ) -> Result<u64, RepoError> {
        if events.is_empty() {
            return Ok(0);
        }
        let n = outbox::write(self.conn()?, events, now).await.map_err(db)?;
        self.deliveries += n;
        Ok(u64::try_from(n).unwrap_or(u64::MAX))
    }

    async fn requeue(
        &mut self,
        partner: &PartnerId,
        which: Requeue,
        now: OffsetDateTime,
    ) -> Result<Option<Requeued>, RepoError> {
        let r = outbox::requeue(self.conn()?, partner, which, now)
            .await
            .map_err(db)?;
        if let Some(r) = r {
            self.deliveries += usize::try_from(r.requeued).unwrap_or(usize::MAX);
        }
        Ok(r)
    }
}

#[async_trait::async_trait]
impl EndpointWrites for PgTransaction {
    async fn lock_endpoint(
        &mut self,
        partner: &PartnerId,
        id: EndpointId,
    ) -> Result<Option<WebhookEndpoint>, RepoError> {
        endpoint_writes::lock_endpoint(self.conn()?, partner, id).await
    }

    async fn write_endpoint(&mut self, e: &WebhookEndpoint) -> Result<(), RepoError> {
        endpoint_writes::write_endpoint(self.conn()?, e)
            .await
            .map_err(db)
    }
}

#[async_trait::async_trait]
impl ActionCalls for PgTransaction {
    async fn lock_action_calls(
        &mut self,
        partner: &PartnerId,
    ) -> Result<Vec<OffsetDateTime>, RepoError> {
        action_budget::lock(self.conn()?, partner).await.map_err(db)
    }

    async fn store_action_calls(
        &mut self,
        partner: &PartnerId,
        calls: &[OffsetDateTime],
    ) -> Result<(), RepoError> {
        action_budget::store(self.conn()?, partner, calls)
            .await
            .map_err(db)
    }
}

#[async_trait::async_trait]
impl Commit for PgTransaction {
    async fn commit(mut self: Box<Self>) -> Result<(), RepoError> {
        let mut conn = self
            .conn
            .take()
            .ok_or_else(|| RepoError::new("the transaction has ended"))?;
        if self.on_claim {
            if let Some(held) = conn.held() {
                held.written();
                held.add_deliveries(self.deliveries);
            }
            // Put back, parked.
            drop(conn);
            return Ok(());
        }
        // A savepoint's release when the connection is a held transaction's.
        AnsiTransactionManager::commit_transaction(&mut *conn)
            .await
            .map_err(db)?;
        match conn.held() {
            Some(held) => held.add_deliveries(self.deliveries),
            None => self.store.deliveries_committed(self.deliveries),
        }
        drop(conn);
        Ok(())
    }
}

impl Drop for PgTransaction {
    /// Rolls back a transaction that was not committed, then returns its connection to the
    /// pool. Without a runtime (never on the request path) the connection is dropped with the
    /// transaction open; the pool discards such a connection, and closing it rolls back.
    fn drop(&mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        if self.on_claim {
            // Nothing but the claim ran in it: rolled back whole, the key claimed again later.
            conn.roll_back_claim();
            return;
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                if let Err(e) = AnsiTransactionManager::rollback_transaction(&mut *conn).await {
                    tracing::warn!(error = %e, "rolling back an abandoned transaction failed");
                }
            });
        }
    }
}
