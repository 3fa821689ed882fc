//! The events feed (extensions.md §8.1) over the outbox (its retention: [`crate::retention`]).
//!
//! An event's place is `(txid, seq)`: the writing transaction's id (the column's default,
//! `pg_current_xact_id()`, so no writer names it) and an identity number. A page holds only events
//! whose `txid` is below the xmin of the page statement's own snapshot: every transaction with a
//! smaller id has ended (committed or rolled back), so no event can later appear before a position
//! this page returned (`docs/decisions.md`, "Events feed position").

use std::sync::LazyLock;

use diesel::QueryableByName;
use diesel::sql_types::{Array, BigInt, Nullable, Text, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use partner_domain::RepoError;
use partner_domain::account::auth::{Sealed, TokenKey};
use partner_domain::events::{Event, EventKind, StoredEvent};
use partner_domain::kernel::cursor::FeedPosition;
use partner_domain::kernel::ids::EventId;
use partner_domain::webhook::SubjectIds;
use partner_domain::webhook::feed::{EventFeedRepo, FeedEvent, FeedFilter, FeedRead};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::tokens::{self, TokenPartner};
use crate::{PgStore, corrupt, db};

/// One page, the horizon and the last pruned position, in ONE statement (one snapshot), for the
/// partner of the live token `$1`/`$2`. Raw: a lateral join on a computed horizon, which the DSL
/// cannot write; prepared once per connection ([`crate::Prepared`]): its text is fixed.
static PAGE_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH h AS MATERIALIZED ( \
  SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS horizon, {} AS partner_id) \
SELECT h.horizon, f.txid AS pruned_txid, f.seq AS pruned_seq, \
  e.id, e.kind, e.subject, e.extra::text AS extra, e.created_at, e.txid, e.seq \
FROM h LEFT JOIN event_feed_pruned f ON f.partner_id = h.partner_id \
LEFT JOIN LATERAL ( \
  SELECT d.id, d.kind, d.subject, d.extra, d.created_at, d.txid, d.seq FROM domain_events d \
  WHERE d.partner_id = h.partner_id AND d.kind <> 'ping' AND d.txid < h.horizon \
    AND (d.txid, d.seq) > ($3, $4) AND d.kind = ANY ($5) \
    AND d.created_at >= COALESCE($6, '-infinity'::timestamptz) \
  ORDER BY d.txid, d.seq LIMIT $7) e ON true \
ORDER BY e.txid, e.seq",
        TokenPartner::sql(1, 2)
    )
});

/// One event of the live token's partner (never a `ping`), with the horizon. Raw, as above.
static ONE_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH h AS MATERIALIZED ( \
  SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS horizon, {} AS partner_id) \
SELECT h.horizon, NULL::bigint AS pruned_txid, NULL::bigint AS pruned_seq, \
  e.id, e.kind, e.subject, e.extra::text AS extra, e.created_at, e.txid, e.seq \
FROM h LEFT JOIN domain_events e \
  ON e.id = $3 AND e.partner_id = h.partner_id AND e.kind <> 'ping'",
        TokenPartner::sql(1, 2)
    )
});

/// A row of [`PAGE_SQL`] or [`ONE_SQL`]: the horizon and pruned position on every row, an event
/// on each (none when the page is empty: one row of NULLs).
#[derive(QueryableByName)]
struct FeedRow {
    #[diesel(sql_type = BigInt)]
    horizon: i64,
    #[diesel(sql_type = Nullable<BigInt>)]
    pruned_txid: Option<i64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    pruned_seq: Option<i64>,
    #[diesel(sql_type = Nullable<diesel::sql_types::Uuid>)]
    id: Option<Uuid>,
    #[diesel(sql_type = Nullable<Text>)]
    kind: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    subject: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    extra: Option<String>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    created_at: Option<OffsetDateTime>,
    #[diesel(sql_type = Nullable<BigInt>)]
    txid: Option<i64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    seq: Option<i64>,
}

impl FeedRow {
    fn event(self) -> Result<Option<FeedEvent>, RepoError> {
        let (
            Some(id),
            Some(kind),
            Some(subject),
            Some(extra),
            Some(created_at),
            Some(txid),
            Some(seq),
        ) = (
            self.id,
            self.kind,
            self.subject,
            self.extra,
            self.created_at,
            self.txid,
            self.seq,
        )
        else {
            return Ok(None);
        };
        let event = Event::from_stored(&StoredEvent {
            kind: EventKind::parse(&kind).ok_or_else(|| corrupt("event kind"))?,
            subject,
            extra: serde_json::from_str(&extra).map_err(|_| corrupt("event extra"))?,
        })
        .ok_or_else(|| corrupt("event"))?;
        Ok(Some(FeedEvent {
            id: EventId::from_uuid(id),
            event,
            created_at,
            position: FeedPosition { txid, seq },
        }))
    }
}

/// The read of the rows of one statement, then the records their events are about (a second
/// round trip, only when there are events, with one query per kind of record sent together: an
/// empty page, the steady state of a poller, is one round trip).
async fn finish(conn: &AsyncPgConnection, rows: Vec<FeedRow>) -> Result<FeedRead, RepoError> {
    let mut read = FeedRead::default();
    for row in rows {
        read.horizon = row.horizon;
        if let (Some(txid), Some(seq)) = (row.pruned_txid, row.pruned_seq) {
            read.pruned = Some(FeedPosition { txid, seq });
        }
        if let Some(e) = row.event()? {
            read.events.push(e);
        }
    }
    let wanted = SubjectIds::of(read.events.iter().map(|e| &e.event));
    if !wanted.is_empty() {
        read.subjects = crate::webhooks::subjects(conn, &wanted).await?;
    }
    Ok(read)
}

async fn page(
    mut conn: &AsyncPgConnection,
    partner: &TokenPartner,
    filter: &FeedFilter,
) -> Result<Vec<FeedRow>, RepoError> {
    let (hash, now) = partner.binds();
    let after = filter.after.unwrap_or(FeedPosition { txid: 0, seq: 0 });
    let types: Vec<&str> = filter.types.iter().map(|k| k.as_str()).collect();
    crate::Prepared(
        diesel::sql_query(PAGE_SQL.as_str())
            .bind::<diesel::sql_types::Bytea, _>(hash)
            .bind::<Timestamptz, _>(now)
            .bind::<BigInt, _>(after.txid)
            .bind::<BigInt, _>(after.seq)
            .bind::<Array<Text>, _>(types)
            .bind::<Nullable<Timestamptz>, _>(filter.since)
            .bind::<BigInt, _>(i64::from(filter.limit)),
    )
    .load(&mut conn)
    .await
    .map_err(db)
}

async fn one(
    mut conn: &AsyncPgConnection,
    partner: &TokenPartner,
    id: EventId,
) -> Result<Vec<FeedRow>, RepoError> {
    let (hash, now) = partner.binds();
    crate::Prepared(
        diesel::sql_query(ONE_SQL.as_str())
            .bind::<diesel::sql_types::Bytea, _>(hash)
            .bind::<Timestamptz, _>(now)
            .bind::<diesel::sql_types::Uuid, _>(id.as_uuid()),
    )
    .load(&mut conn)
    .await
    .map_err(db)
}

#[async_trait::async_trait]
impl EventFeedRepo for PgStore {
    async fn events_for_token(
        &self,
        key: TokenKey,
        filter: &FeedFilter,
    ) -> Result<Sealed<FeedRead>, RepoError> {
        let conn = self.conn().await?;
        let partner = TokenPartner::of(key);
        let (token, rows) = futures_util::future::try_join(
            tokens::lookup(&conn, &key.hash),
            page(&conn, &partner, filter),
        )
        .await?;
        let read = finish(&conn, rows).await?;
        Ok(Sealed::new(token, read))
    }

    async fn event_for_token(
        &self,
        key: TokenKey,
        id: EventId,
    ) -> Result<Sealed<FeedRead>, RepoError> {
        let conn = self.conn().await?;
        let partner = TokenPartner::of(key);
        let (token, rows) = futures_util::future::try_join(
            tokens::lookup(&conn, &key.hash),
            one(&conn, &partner, id),
        )
        .await?;
        let read = finish(&conn, rows).await?;
        Ok(Sealed::new(token, read))
    }
}
