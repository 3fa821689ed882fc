//! Figures for operators' metrics: the pool's state and the webhook backlog.

use diesel::sql_types::{BigInt, Nullable, Timestamptz};
use diesel_async::RunQueryDsl;
use partner_domain::RepoError;
use time::OffsetDateTime;

use crate::PgStore;

/// The connection pool right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolState {
    /// Open and idle.
    pub idle: usize,
    /// Open and checked out.
    pub in_use: usize,
    /// Callers waiting for a connection.
    pub waiting: usize,
    /// The pool's ceiling.
    pub max: usize,
}

/// Deliveries still to be delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backlog {
    pub pending: i64,
    /// When the oldest pending delivery was created.
    pub oldest: Option<OffsetDateTime>,
}

#[derive(diesel::QueryableByName)]
struct Row {
    #[diesel(sql_type = BigInt)]
    pending: i64,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    oldest: Option<OffsetDateTime>,
}

impl PgStore {
    pub fn pool_state(&self) -> PoolState {
        let s = self.pool.status();
        PoolState {
            idle: s.available,
            in_use: s.size.saturating_sub(s.available),
            waiting: s.waiting,
            max: s.max_size,
        }
    }

    /// One query over the pending-deliveries index.
    pub async fn webhook_backlog(&self) -> Result<Backlog, RepoError> {
        let mut conn = self.conn().await?;
        let row = diesel::sql_query(
            "SELECT count(*) AS pending, min(created_at) AS oldest \
             FROM webhook_deliveries WHERE status = 'pending'",
        )
        .get_result::<Row>(&mut conn)
        .await
        .map_err(RepoError::new)?;
        Ok(Backlog {
            pending: row.pending,
            oldest: row.oldest,
        })
    }
}
