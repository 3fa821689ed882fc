//! Figures for operators' metrics: the pool's state and the webhook backlog.

use diesel::prelude::*;
use diesel::sql_types::Bool;
use diesel_async::RunQueryDsl;
use partner_domain::RepoError;
use time::OffsetDateTime;

use crate::PgStore;
use crate::dsl::fixed;
use crate::schema::webhook_deliveries;

/// The connection pool right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolState {
    /// Open and idle.
    pub idle: usize,
    /// Open and checked out.
    pub in_use: usize,
    /// Callers waiting for a connection.
    pub waiting: usize,
    /// The most connections this process may open: every pool's ceiling, summed.
    pub max: usize,
}

/// Deliveries still to be delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backlog {
    pub pending: i64,
    /// When the oldest pending delivery was created.
    pub oldest: Option<OffsetDateTime>,
}

impl PgStore {
    pub fn pool_state(&self) -> PoolState {
        // Summed over the shared pool and every worker's pool.
        let mut state = PoolState {
            idle: 0,
            in_use: 0,
            waiting: 0,
            max: 0,
        };
        for s in
            std::iter::once(self.pool.status()).chain(self.workers.pools.iter().map(|p| p.status()))
        {
            state.idle += s.available;
            state.in_use += s.size.saturating_sub(s.available);
            state.waiting += s.waiting;
        }
        // Planned, not only attached, worker pools: the most this process may open.
        state.max =
            self.pool.status().max_size + self.workers.size.saturating_mul(self.workers.planned);
        state
    }

    /// One query over the pending-deliveries index (its predicate written as a literal, so
    /// the prepared statement's plan can use it).
    pub async fn webhook_backlog(&self) -> Result<Backlog, RepoError> {
        let mut conn = self.conn().await?;
        let (pending, oldest) = webhook_deliveries::table
            .filter(fixed::<Bool>("webhook_deliveries.status = 'pending'"))
            .select((
                diesel::dsl::count_star(),
                diesel::dsl::min(webhook_deliveries::created_at),
            ))
            .get_result::<(i64, Option<OffsetDateTime>)>(&mut conn)
            .await
            .map_err(RepoError::new)?;
        Ok(Backlog { pending, oldest })
    }
}
