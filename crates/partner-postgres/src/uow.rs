//! The unit-of-work port: a transaction held on one pooled connection across a service's calls.

use diesel_async::pooled_connection::deadpool::Object;
use diesel_async::{AnsiTransactionManager, AsyncPgConnection, TransactionManager};
use partner_domain::RepoError;
use partner_domain::events::DomainEvent;
use partner_domain::kernel::ids::PayoutId;
use partner_domain::kernel::values::PartnerId;
use partner_domain::lead::{Lead, LeadId};
use partner_domain::order::{Order, OrderListing};
use partner_domain::payout::{NewPayout, Payout};
use partner_domain::ports::{Transaction, UnitOfWork};
use time::OffsetDateTime;

use crate::{PgStore, db, leads, orders, outbox, payouts};

/// An open transaction. `conn` is `None` once committed.
struct PgTransaction {
    conn: Option<Object<AsyncPgConnection>>,
    store: PgStore,
    /// Deliveries written so far, announced to the workers after the commit.
    deliveries: usize,
}

impl PgTransaction {
    fn conn(&mut self) -> Result<&mut AsyncPgConnection, RepoError> {
        self.conn
            .as_deref_mut()
            .ok_or_else(|| RepoError::new("the transaction has ended"))
    }
}

#[async_trait::async_trait]
impl UnitOfWork for PgStore {
    async fn begin(&self) -> Result<Box<dyn Transaction>, RepoError> {
        let mut conn = self.conn().await?;
        AnsiTransactionManager::begin_transaction(&mut *conn)
            .await
            .map_err(db)?;
        Ok(Box::new(PgTransaction {
            conn: Some(conn),
            store: self.clone(),
            deliveries: 0,
        }))
    }
}

#[async_trait::async_trait]
impl Transaction for PgTransaction {
    async fn insert_lead(&mut self, lead: &Lead) -> Result<bool, RepoError> {
        leads::insert(self.conn()?, lead).await.map_err(db)
    }

    async fn lock_lead(&mut self, id: LeadId) -> Result<Option<Lead>, RepoError> {
        leads::lock(self.conn()?, id).await
    }

    async fn update_lead(&mut self, lead: &Lead) -> Result<(), RepoError> {
        leads::update(self.conn()?, lead).await.map_err(db)
    }

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

    async fn insert_payout(
        &mut self,
        id: PayoutId,
        new: &NewPayout,
        now: OffsetDateTime,
    ) -> Result<Option<Payout>, RepoError> {
        payouts::insert(self.conn()?, id.as_uuid(), new, now).await
    }

    async fn publish(
        &mut self,
        events: &[DomainEvent],
        now: OffsetDateTime,
    ) -> Result<(), RepoError> {
        if events.is_empty() {
            return Ok(());
        }
        let n = outbox::write(self.conn()?, events, now).await.map_err(db)?;
        self.deliveries += n;
        Ok(())
    }

    async fn commit(mut self: Box<Self>) -> Result<(), RepoError> {
        let mut conn = self
            .conn
            .take()
            .ok_or_else(|| RepoError::new("the transaction has ended"))?;
        AnsiTransactionManager::commit_transaction(&mut *conn)
            .await
            .map_err(db)?;
        drop(conn);
        self.store.deliveries_committed(self.deliveries);
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
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                if let Err(e) = AnsiTransactionManager::rollback_transaction(&mut *conn).await {
                    tracing::warn!(error = %e, "rolling back an abandoned transaction failed");
                }
            });
        }
    }
}
