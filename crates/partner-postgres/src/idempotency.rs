//! Idempotency keys and their kept answers (extensions §8.3), shared by every instance.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Bytea, Nullable, SmallInt, Text, Timestamptz};
use diesel_async::{AnsiTransactionManager, AsyncPgConnection, RunQueryDsl, TransactionManager};
use partner_domain::RepoError;
use partner_domain::idempotency::{Existing, Fingerprint, IdempotencyStore, KeptAnswer, Ticket};
use partner_domain::kernel::ambient::Ambient;
use time::OffsetDateTime;

use crate::held::HeldTx;
use crate::{PgStore, Prepared, corrupt, db};

/// Claims the key (a new row, or one whose answer expired or whose claim's lease ran out) and,
/// when it could not, reads what holds it, in one statement (one round trip on the hot path).
/// Raw: a data-modifying CTE read by the statement around it, which the DSL cannot write.
/// Prepared once per connection through [`Prepared`]. The outer read sees the statement's
/// snapshot: a row a concurrent request committed after it began is not seen, and answers as a
/// running claim (409), which it just was.
///
/// Committed without waiting for the WAL flush (`synchronous_commit` off for this statement's
/// transaction only): a claim matters only together with the write it guards, and that write's
/// own (synchronous) commit flushes the WAL up to its record, so up to the earlier claim's too.
/// A crash can lose a claim only when no write followed it, and then only a claim: the request
/// died with the process, and its retry finds the key free, as it should. One fsync less per
/// keyed request (docs/decisions.md).
const CLAIM_SQL: &str = "\
WITH claimed AS ( \
  INSERT INTO idempotency_keys AS k (caller, key, fingerprint, created_at, lease_until, expires_at) \
  VALUES ($1, $2, $3, $4, $5, $6) \
  ON CONFLICT (caller, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, \
    created_at = EXCLUDED.created_at, lease_until = EXCLUDED.lease_until, \
    expires_at = EXCLUDED.expires_at, status = NULL, content_type = NULL, body = NULL \
  WHERE k.expires_at <= EXCLUDED.created_at \
     OR (k.status IS NULL AND k.lease_until <= EXCLUDED.created_at) \
  RETURNING 1 ) \
SELECT set_config('synchronous_commit', 'off', true) IS NOT NULL AS async_commit, \
  EXISTS (SELECT 1 FROM claimed) AS claimed, k.fingerprint, k.status, k.content_type, k.body \
FROM (SELECT 1) AS one \
LEFT JOIN idempotency_keys k ON k.caller = $1 AND k.key = $2 AND NOT EXISTS (SELECT 1 FROM claimed)";

/// The answer of the request that claimed the key. Raw like [`CLAIM_SQL`], prepared: it runs
/// after every keyed request.
/// Only while the row is still this claim's (`fingerprint`, `created_at`): a request that ran past
/// its lease must not answer for a later claim of the key.
const KEEP_SQL: &str = "UPDATE idempotency_keys SET status = $3, content_type = $4, body = $5 \
WHERE caller = $1 AND key = $2 AND status IS NULL AND fingerprint = $6 AND created_at = $7";

/// Only while the row is still this claim's, as [`KEEP_SQL`].
const RELEASE_SQL: &str = "DELETE FROM idempotency_keys \
WHERE caller = $1 AND key = $2 AND status IS NULL AND fingerprint = $3 AND created_at = $4";

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

#[derive(QueryableByName)]
struct ClaimRow {
    #[diesel(sql_type = Bool)]
    claimed: bool,
    #[diesel(sql_type = Nullable<Bytea>)]
    fingerprint: Option<Vec<u8>>,
    #[diesel(sql_type = Nullable<SmallInt>)]
    status: Option<i16>,
    #[diesel(sql_type = Nullable<Text>)]
    content_type: Option<String>,
    #[diesel(sql_type = Nullable<Bytea>)]
    body: Option<Vec<u8>>,
}

impl ClaimRow {
    fn into_domain(self) -> Result<Option<Existing>, RepoError> {
        if self.claimed {
            return Ok(None);
        }
        let Some(fingerprint) = self.fingerprint else {
            // Held by a request that committed its claim after this statement began.
            return Ok(Some(Existing::Running));
        };
        let Some(status) = self.status else {
            return Ok(Some(Existing::Running));
        };
        let fingerprint: [u8; 32] = fingerprint
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

/// Keeps `answer` for the claim of `ticket` ([`KEEP_SQL`]) on `conn`.
async fn keep(
    conn: &mut AsyncPgConnection,
    ticket: &Ticket,
    answer: &KeptAnswer,
) -> Result<(), RepoError> {
    let status = i16::try_from(answer.status).map_err(|_| corrupt("kept status"))?;
    Prepared(
        diesel::sql_query(KEEP_SQL)
            .bind::<Text, _>(&ticket.caller)
            .bind::<Text, _>(&ticket.key)
            .bind::<SmallInt, _>(status)
            .bind::<Nullable<Text>, _>(answer.content_type.as_deref())
            .bind::<Bytea, _>(answer.body.as_slice())
            .bind::<Bytea, _>(ticket.fingerprint.as_bytes().as_slice())
            .bind::<Timestamptz, _>(ticket.claimed_at),
    )
    .execute(conn)
    .await
    .map_err(db)?;
    Ok(())
}

/// Releases the claim of `ticket` ([`RELEASE_SQL`]) on `conn`.
async fn release(conn: &mut AsyncPgConnection, ticket: &Ticket) -> Result<(), RepoError> {
    diesel::sql_query(RELEASE_SQL)
        .bind::<Text, _>(&ticket.caller)
        .bind::<Text, _>(&ticket.key)
        .bind::<Bytea, _>(ticket.fingerprint.as_bytes().as_slice())
        .bind::<Timestamptz, _>(ticket.claimed_at)
        .execute(conn)
        .await
        .map_err(db)?;
    Ok(())
}

#[async_trait::async_trait]
impl IdempotencyStore for PgStore {
    async fn claim(
        &self,
        caller: &str,
        key: &str,
        fingerprint: &Fingerprint,
        now: OffsetDateTime,
        lease_until: OffsetDateTime,
        expires_at: OffsetDateTime,
    ) -> Result<Option<Existing>, RepoError> {
        let mut conn = self.pooled().await?;
        let row: ClaimRow = Prepared(
            diesel::sql_query(CLAIM_SQL)
                .bind::<Text, _>(caller)
                .bind::<Text, _>(key)
                .bind::<Bytea, _>(fingerprint.as_bytes().as_slice())
                .bind::<Timestamptz, _>(now)
                .bind::<Timestamptz, _>(lease_until)
                .bind::<Timestamptz, _>(expires_at),
        )
        .get_result(&mut conn)
        .await
        .map_err(db)?;
        row.into_domain()
    }

    async fn keep(&self, ticket: &Ticket, answer: &KeptAnswer) -> Result<(), RepoError> {
        let mut conn = self.pooled().await?;
        keep(&mut conn, ticket, answer).await
    }

    async fn release(&self, ticket: &Ticket) -> Result<(), RepoError> {
        let mut conn = self.pooled().await?;
        release(&mut conn, ticket).await
    }

    async fn finish_held<'a>(
        &self,
        ambient: &Ambient,
        ticket: &Ticket,
        answer: Option<&'a KeptAnswer>,
    ) -> Result<bool, RepoError> {
        let Some(held) = ambient.held::<HeldTx>() else {
            return Ok(false);
        };
        let Some(mut conn) = held.finish().await else {
            return Ok(false);
        };
        match answer {
            Some(a) => keep(&mut conn, ticket, a).await?,
            None => release(&mut conn, ticket).await?,
        }
        AnsiTransactionManager::commit_transaction(&mut *conn)
            .await
            .map_err(db)?;
        drop(conn);
        self.deliveries_committed(held.deliveries());
        Ok(true)
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
