//! Idempotency keys and their kept answers (extensions §8.3), shared by every instance.

use diesel::prelude::*;
use diesel::result::DatabaseErrorKind;
use diesel::sql_types::{BigInt, Bool, Bytea, Nullable, SmallInt, Text, Timestamptz};
use diesel_async::{AnsiTransactionManager, AsyncPgConnection, RunQueryDsl, TransactionManager};
use partner_domain::RepoError;
use partner_domain::idempotency::{
    End, Existing, Fingerprint, IdempotencyStore, KEPT_FOR, KeptAnswer, KeyTaken, Ticket,
};
use partner_domain::kernel::ambient::Ambient;
use time::OffsetDateTime;

use std::sync::Arc;

use crate::connect::Pooled;
use crate::held::{Conn, HeldTx};
use crate::{PgStore, Prepared, corrupt, db, is_violation};

/// The claim: a lock on the key for the rest of the transaction (taken at once or not at all),
/// and the key's row, in one statement sent in the round trip of the transaction's `BEGIN`
/// ([`claim_in`]). Two callers or two keys never share a lock: the caller and the key,
/// newline-separated (neither holds a newline), hashed to 64 bits. Raw: the DSL has no advisory
/// locks. Prepared once per connection ([`Prepared`]), as every statement here.
///
/// The row is read with the statement's snapshot, taken before the lock: a request that held
/// the lock and committed its answer between the two is not seen, and this one runs. Its answer
/// then cannot be kept: the `INSERT` of [`KEEP_SQL`] fails on the row, the `COMMIT` behind it
/// rolls the writes back, and it answers what the row says; an answer not kept is committed
/// only once a read in its transaction finds no row ([`PgStore::finish`]'s `End::Commit`).
const CLAIM_SQL: &str = "SELECT l.locked, k.fingerprint, k.status, k.content_type, k.body, \
k.lease_until, k.expires_at \
FROM (SELECT pg_try_advisory_xact_lock(hashtextextended($1 || E'\\n' || $2, 0)) AS locked) AS l \
LEFT JOIN idempotency_keys k ON k.caller = $1 AND k.key = $2";

/// The key's row, read in a transaction holding the claim (a fresh snapshot).
const READ_SQL: &str = "SELECT fingerprint, status, content_type, body, lease_until, expires_at \
FROM idempotency_keys WHERE caller = $1 AND key = $2";

/// A row that no longer holds the key (an answer past its expiry, or a claim row an earlier
/// version left, past its lease), deleted under the lock before the key's new answer.
const STALE_SQL: &str = "DELETE FROM idempotency_keys WHERE caller = $1 AND key = $2";

/// The answer, kept in the request's transaction, sent with its `COMMIT` ([`keep_and_commit`]).
/// A plain `INSERT`: should a row be there after all, it fails, the `COMMIT` behind it rolls the
/// request's writes back, and the answer is not sent.
const KEEP_SQL: &str = "INSERT INTO idempotency_keys \
(caller, key, fingerprint, created_at, lease_until, expires_at, status, content_type, body) \
VALUES ($1, $2, $3, $4, $4, $5, $6, $7, $8)";

/// Expired keys, a batch at a time, walking `idempotency_keys_expires_idx` from the previous
/// batch's latest expiry (`$2`), so no batch reads again the keys earlier ones deleted (issue 22).
const PRUNE_SQL: &str = "WITH gone AS ( \
  DELETE FROM idempotency_keys WHERE ctid = ANY(ARRAY( \
    SELECT ctid FROM idempotency_keys WHERE expires_at <= $1 AND expires_at >= $2 \
    ORDER BY expires_at LIMIT $3)) \
  AND expires_at <= $1 RETURNING expires_at) \
SELECT count(*) AS n, max(expires_at) AS last FROM gone";

#[derive(QueryableByName)]
struct PrunedKeys {
    #[diesel(sql_type = BigInt)]
    n: i64,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    last: Option<OffsetDateTime>,
}

/// [`CLAIM_SQL`]'s row: whether the lock was taken, and the key's row if there is one (its
/// columns all null when the `LEFT JOIN` found none: `Option`'s `QueryableByName` then gives
/// `None`).
#[derive(QueryableByName)]
struct ClaimRow {
    #[diesel(sql_type = Bool)]
    locked: bool,
    #[diesel(embed)]
    row: Option<KeyRow>,
}

#[derive(QueryableByName)]
struct KeyRow {
    #[diesel(sql_type = Bytea)]
    fingerprint: Vec<u8>,
    #[diesel(sql_type = Nullable<SmallInt>)]
    status: Option<i16>,
    #[diesel(sql_type = Nullable<Text>)]
    content_type: Option<String>,
    #[diesel(sql_type = Nullable<Bytea>)]
    body: Option<Vec<u8>>,
    #[diesel(sql_type = Timestamptz)]
    lease_until: OffsetDateTime,
    #[diesel(sql_type = Timestamptz)]
    expires_at: OffsetDateTime,
}

impl KeyRow {
    /// What the row says at `now`: `None` when it no longer holds the key.
    fn holds(self, now: OffsetDateTime) -> Result<Option<Existing>, RepoError> {
        if self.expires_at <= now {
            return Ok(None);
        }
        let Some(status) = self.status else {
            // A claim row of an earlier version: running until its lease ends.
            return Ok((self.lease_until > now).then_some(Existing::Running));
        };
        let fingerprint: [u8; 32] = self
            .fingerprint
            .try_into()
            .map_err(|_| corrupt("idempotency fingerprint"))?;
        Ok(Some(Existing::Answered(
            Fingerprint::from_bytes(fingerprint),
            KeptAnswer {
                status: u16::try_from(status).map_err(|_| corrupt("kept status"))?,
                content_type: self.content_type,
                body: self.body.unwrap_or_default(),
            },
        )))
    }
}

/// Marks `conn`'s transaction manager in a transaction (`true`) or out of it, for the
/// transaction statements sent here in a pipeline rather than through it. Marked in before the
/// `BEGIN` is sent and out only once the `COMMIT` or `ROLLBACK` answered: a connection given up
/// midway is then taken for one left in a transaction, which the pool discards.
fn mark_in_transaction(conn: &mut AsyncPgConnection, inside: bool) -> Result<(), RepoError> {
    use diesel::connection::{TransactionDepthChange, TransactionManagerStatus};
    let status =
        <AnsiTransactionManager as TransactionManager<AsyncPgConnection>>::transaction_manager_status_mut(conn);
    let TransactionManagerStatus::Valid(valid) = status else {
        return Err(RepoError::new(
            "the connection's transaction manager is broken",
        ));
    };
    let change = if inside {
        TransactionDepthChange::IncreaseDepth
    } else {
        TransactionDepthChange::DecreaseDepth
    };
    valid.change_transaction_depth(change).map_err(db)
}

/// Begins a transaction on `conn` and claims `ticket`'s key in it, in one round trip: `BEGIN`
/// and [`CLAIM_SQL`] pipelined. `Ok(None)`: claimed, `conn` left in the
/// transaction, which holds the key until it ends. `Ok(Some(_))`: what holds the key; the
/// transaction is rolled back.
pub(crate) async fn claim_in(
    conn: &mut AsyncPgConnection,
    ticket: &Ticket,
) -> Result<Option<Existing>, RepoError> {
    mark_in_transaction(conn, true)?;
    let (begun, claimed) = {
        let mut shared: &AsyncPgConnection = conn;
        let begin = Prepared(diesel::sql_query("BEGIN")).execute(&mut shared);
        let claim = Prepared(
            diesel::sql_query(CLAIM_SQL)
                .bind::<Text, _>(&ticket.caller)
                .bind::<Text, _>(&ticket.key),
        )
        .get_result::<ClaimRow>(&mut shared);
        // Polled in order, so sent in order, on one connection: one round trip.
        futures_util::future::join(begin, claim).await
    };
    begun.map_err(db)?;
    let ClaimRow { locked, row } = claimed.map_err(db)?;
    let now = ticket.claimed_at;
    let (holder, stale) = match row {
        Some(row) => {
            let holder = row.holds(now)?;
            let stale = holder.is_none();
            (holder, stale)
        }
        None => (None, false),
    };
    let holder = match holder {
        Some(h) => Some(h),
        None if !locked => Some(Existing::Running),
        None => None,
    };
    if holder.is_some() {
        AnsiTransactionManager::rollback_transaction(conn)
            .await
            .map_err(db)?;
        return Ok(holder);
    }
    if stale {
        Prepared(
            diesel::sql_query(STALE_SQL)
                .bind::<Text, _>(&ticket.caller)
                .bind::<Text, _>(&ticket.key),
        )
        .execute(conn)
        .await
        .map_err(db)?;
    }
    Ok(None)
}

impl PgStore {
    /// Claims the request's key for the slot [`Took::Claim`](crate::held::Took) took, on a
    /// pooled connection whose transaction then holds it ([`claim_in`]). Refused: recorded, and
    /// [`KeyTaken`].
    pub(crate) async fn claim_held(&self, held: &Arc<HeldTx>) -> Result<Conn, RepoError> {
        let ticket = held.ticket();
        let mut obj = match self.pooled().await {
            Ok(obj) => obj,
            Err(e) => {
                held.unclaimed();
                return Err(e);
            }
        };
        match claim_in(&mut obj, ticket).await {
            Ok(None) => Ok(held.claimed(obj)),
            Ok(Some(holder)) => {
                held.refuse(holder);
                Err(RepoError::new(KeyTaken))
            }
            Err(e) => {
                held.unclaimed();
                obj.close();
                Err(e)
            }
        }
    }
}

/// Keeps `answer` for `ticket` in `conn`'s transaction, which claimed the key, and commits it, in
/// one round trip ([`KEEP_SQL`] and `COMMIT` pipelined). `Ok(None)`: committed. `Ok(Some(_))`:
/// a row was there after all (kept by a request whose commit fell between the claim's snapshot
/// and its lock, or written by an earlier version without the lock): nothing committed, and
/// what holds the key. `Err`: the caller closes the connection (left marked in a transaction).
pub(crate) async fn keep_and_commit(
    conn: &mut AsyncPgConnection,
    ticket: &Ticket,
    answer: &KeptAnswer,
) -> Result<Option<Existing>, RepoError> {
    let status = i16::try_from(answer.status).map_err(|_| corrupt("kept status"))?;
    let (kept, committed) = {
        let mut shared: &AsyncPgConnection = conn;
        let keep = Prepared(
            diesel::sql_query(KEEP_SQL)
                .bind::<Text, _>(&ticket.caller)
                .bind::<Text, _>(&ticket.key)
                .bind::<Bytea, _>(ticket.fingerprint.as_bytes().as_slice())
                .bind::<Timestamptz, _>(ticket.claimed_at)
                .bind::<Timestamptz, _>(ticket.claimed_at + KEPT_FOR)
                .bind::<SmallInt, _>(status)
                .bind::<Nullable<Text>, _>(answer.content_type.as_deref())
                .bind::<Bytea, _>(answer.body.as_slice()),
        )
        .execute(&mut shared);
        // After a failed statement PostgreSQL answers this `COMMIT` by rolling back.
        let commit = Prepared(diesel::sql_query("COMMIT")).execute(&mut shared);
        futures_util::future::join(keep, commit).await
    };
    match (kept, committed) {
        (Ok(_), Ok(_)) => {
            mark_in_transaction(conn, false)?;
            Ok(None)
        }
        (Err(e), Ok(_))
            if is_violation(&e, |k| matches!(k, DatabaseErrorKind::UniqueViolation)) =>
        {
            mark_in_transaction(conn, false)?;
            let holder = read_key(conn, ticket).await?;
            Ok(Some(holder.unwrap_or(Existing::Running)))
        }
        (Err(e), _) | (_, Err(e)) => Err(db(e)),
    }
}

/// What the key's row says now ([`READ_SQL`]): `None` when none holds it.
async fn read_key(
    conn: &mut AsyncPgConnection,
    ticket: &Ticket,
) -> Result<Option<Existing>, RepoError> {
    let row: Option<KeyRow> = Prepared(
        diesel::sql_query(READ_SQL)
            .bind::<Text, _>(&ticket.caller)
            .bind::<Text, _>(&ticket.key),
    )
    .get_result(conn)
    .await
    .optional()
    .map_err(db)?;
    match row {
        Some(row) => row.holds(ticket.claimed_at),
        None => Ok(None),
    }
}

/// Ends `conn`'s transaction: commits it, or rolls it back; a connection that could not is
/// closed, so its transaction (and the key's lock) ends with it.
async fn end_or_close(mut conn: Pooled, commit: bool) -> Result<(), RepoError> {
    let ended = if commit {
        AnsiTransactionManager::commit_transaction(&mut *conn).await
    } else {
        AnsiTransactionManager::rollback_transaction(&mut *conn).await
    };
    match ended {
        Ok(()) => Ok(()),
        Err(e) => {
            conn.close();
            Err(db(e))
        }
    }
}

#[async_trait::async_trait]
impl IdempotencyStore for PgStore {
    fn arm(&self, ambient: &Ambient, ticket: &Ticket) {
        HeldTx::arm(ambient, self.workers.id, ticket);
    }

    async fn finish<'a>(
        &self,
        ambient: &Ambient,
        ticket: &Ticket,
        end: End<'a>,
    ) -> Result<Option<Existing>, RepoError> {
        let Some(held) = ambient.held::<HeldTx>() else {
            return Ok(None);
        };
        let parked = held.finish().await;
        if let Some(holder) = held.refused() {
            if let Some(conn) = parked {
                end_or_close(conn, false).await?;
            }
            return Ok(Some(holder));
        }
        match (parked, end) {
            (Some(mut conn), End::Keep(answer)) => {
                match keep_and_commit(&mut conn, ticket, answer).await {
                    Ok(found) => {
                        drop(conn);
                        if found.is_none() {
                            self.deliveries_committed(held.deliveries());
                        }
                        Ok(found)
                    }
                    Err(e) => {
                        conn.close();
                        Err(e)
                    }
                }
            }
            (Some(mut conn), End::Commit) => {
                // Committed only if no answer was kept meanwhile ([`CLAIM_SQL`]'s snapshot).
                let holder = match read_key(&mut conn, ticket).await {
                    Ok(holder) => holder,
                    Err(e) => {
                        conn.close();
                        return Err(e);
                    }
                };
                if let Some(holder) = holder {
                    end_or_close(conn, false).await?;
                    return Ok(Some(holder));
                }
                end_or_close(conn, true).await?;
                self.deliveries_committed(held.deliveries());
                Ok(None)
            }
            (Some(conn), End::Abandon) => {
                end_or_close(conn, false).await?;
                Ok(None)
            }
            // Nothing written: the answer is kept under a claim of its own.
            (None, End::Keep(answer)) => {
                let mut conn = self.pooled().await?;
                let found = match claim_in(&mut conn, ticket).await {
                    Ok(Some(holder)) => return Ok(Some(holder)),
                    Ok(None) => keep_and_commit(&mut conn, ticket, answer).await,
                    Err(e) => Err(e),
                };
                if found.is_err() {
                    conn.close();
                }
                found
            }
            (None, End::Commit | End::Abandon) => Ok(None),
        }
    }

    async fn prune(
        &self,
        now: OffsetDateTime,
        from: Option<OffsetDateTime>,
        batch: u32,
    ) -> Result<(u64, Option<OffsetDateTime>), RepoError> {
        let mut conn = self.pooled().await?;
        let r: PrunedKeys = diesel::sql_query(PRUNE_SQL)
            .bind::<Timestamptz, _>(now)
            .bind::<Timestamptz, _>(from.unwrap_or(time::macros::datetime!(0001-01-01 0:00 UTC)))
            .bind::<BigInt, _>(i64::from(batch))
            .get_result(&mut conn)
            .await
            .map_err(db)?;
        Ok((u64::try_from(r.n).unwrap_or(0), r.last))
    }
}
