//! The claim (issue 22): which endpoints a claim visits (those whose marker in
//! `webhook_endpoint_queue` is due), the rows it takes from each within its room, and the
//! advance of the markers it may have left stale. `DeliveryRepo::claim` in `webhooks.rs` turns
//! the rows into the domain's batch.

use std::collections::HashSet;

use diesel::prelude::*;
use diesel::sql_types::{Array, Integer, Nullable, Timestamptz};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use partner_domain::RepoError;
use partner_domain::lead::LeadId;
use partner_domain::webhook::{ClaimBatch, ClaimRequest, SubjectIds};
use uuid::Uuid;

use crate::models::leads::Row as LeadRow;
use crate::models::webhook_deliveries::ClaimRow;
use crate::{PgStore, db};

/// The workers' claim, in one statement and one round trip (raw: the DSL cannot express a
/// LATERAL join with a locking clause, nor an `UPDATE` in a CTE; prepared once per connection).
///
/// - `ep`: the endpoints the claim visits: those whose marker in `webhook_endpoint_queue` is due
///   at `$1` (read from `webhook_endpoint_queue_due_idx`, so the cost grows with the endpoints
///   that may have due work, not with all endpoints), enabled, with room (`$5`, or the room
///   listed in `$3`/`$4` for the endpoints this worker holds deliveries of), in random order so
///   that no endpoint is always served first, at most `$6` of them, numbered in that order;
/// - `picked`: each endpoint's oldest due rows in that order, at most its room, skipping rows
///   another worker holds, at most `$6` in all. Read from the endpoint's marker on: no pending
///   delivery is due before it (the marker's invariant, migration 000011), and the entries of
///   `webhook_deliveries_endpoint_due_idx` before it are the dead versions the claims' and the
///   outcomes' updates left (neither is HOT), which a scan from the endpoint's first entry
///   stepped over until the next vacuum, on every claim: half of a backlog of 200,000 drained,
///   496 index pages and 3.7 ms a claim, against 4 pages and 0.08 ms from the marker
///   (`bench/claim-scan.sh`);
/// - `claimed`: counts the attempt, leases the row until `$2` under a fresh fencing token (and
///   returns where the row's new version is, for the outcome's write: `record::RECORD_SQL`), and
///   makes the transaction's commit asynchronous (a claim lost in a crash is a delivery attempted
///   again: at-least-once). It finds each picked row by the `ctid` its lock returned (the row's
///   current version, which no one else can change before this statement ends): a TID scan at
///   any size of the table, with statistics or without. Joined by primary key, a generic plan
///   made while the table held a few hundred rows and had no statistics (a fresh database with
///   autovacuum off, or before its first analyze) scanned the whole table once per claimed row,
///   and the connection kept it: claims of 32 rows took 100-250 ms at 20,000 rows and a live
///   run fell behind for good (`bench/webhooks-ab.sh` `rate1`, `bench/claim-plan.sh`, issue
///   22). The budget (`$7`) counts attempts since the last resend or recover (`attempts -
///   attempt_base`), and so does the attempt number returned.
///
/// Then one row per claimed delivery with what sending it needs, from the event and the endpoint,
/// with the endpoint row's version (`xmin`: every update of the row writes a new one) for
/// [`ENDPOINT_UNCHANGED_SQL`], and, for a lead's event, the lead as it is now (`lead_*`, null
/// when it is gone: its payload is built from them, without a read of its own, a round trip on
/// every delivery's path; an event whose subject is not a UUID reads none, and fails alone as
/// before); and one last row whose only non-null column is `visited`: the endpoints `ep` listed,
/// in the order they were visited, from which [`split_visited`] tells the markers to advance.
/// (Before, the statement told them itself, by counting the claimed rows per endpoint and
/// numbering the visits in a window: 0.04-0.08 ms of a 0.33-0.43-ms claim of one row, at every
/// claim, for what the returned rows already say; issue 22. Earlier still, the pick and the
/// claim were two statements, each parsed and planned at every claim: four round trips.)
///
/// Whether an endpoint is enabled is a subquery by primary key for each due marker, not a join:
/// the planner, which guesses thousands of due markers, hashed the join and read every endpoint
/// at every claim (20,000 rows, 16 ms a claim on `pp_dataset` with 10 markers due; issue 22,
/// `docs/performance.md` "Webhooks to 10 endpoints among 20,000"), and a prepared statement would
/// keep such a plan. A scalar subquery is never turned into a join, so the cost stays with the
/// due markers.
const CLAIM_SQL: &str = "\
WITH busy AS ( \
  SELECT * FROM unnest($3::uuid[], $4::int4[]) AS b(endpoint_id, room)), \
ep AS MATERIALIZED ( \
  SELECT s.id, s.room, s.due_at, row_number() OVER () AS ord FROM ( \
    SELECT q.endpoint_id AS id, COALESCE(b.room, $5) AS room, q.due_at \
    FROM webhook_endpoint_queue q LEFT JOIN busy b ON b.endpoint_id = q.endpoint_id \
    WHERE q.due_at <= $1 AND COALESCE(b.room, $5) > 0 \
      AND (SELECT e.disabled_at IS NULL FROM webhook_endpoints e WHERE e.id = q.endpoint_id) \
    ORDER BY random() LIMIT $6) s), \
picked AS ( \
  SELECT p.id, p.tid FROM ep CROSS JOIN LATERAL ( \
    SELECT d.id, d.ctid AS tid FROM webhook_deliveries d \
    WHERE d.endpoint_id = ep.id AND d.status = 'pending' AND d.next_attempt_at >= ep.due_at \
      AND d.next_attempt_at <= $1 AND d.attempts - d.attempt_base < $7 \
    ORDER BY d.next_attempt_at LIMIT ep.room \
    FOR UPDATE SKIP LOCKED) p \
  LIMIT $6), \
claimed AS ( \
  UPDATE webhook_deliveries d \
  SET attempts = d.attempts + 1, next_attempt_at = $2, lease_token = gen_random_uuid() \
  FROM picked WHERE d.ctid = picked.tid \
    AND set_config('synchronous_commit', 'off', true) IS NOT NULL \
  RETURNING d.id, d.endpoint_id, d.lease_token, d.ctid::text AS tid, d.attempts - d.attempt_base AS attempts, \
    d.kind, d.event_id) \
SELECT c.id, c.endpoint_id, c.lease_token, c.tid, c.attempts, c.kind, c.event_id, ev.created_at AS event_created_at, \
  ev.subject, ev.extra::text AS extra, w.url, w.secret, \
  CASE WHEN w.previous_secret_expires_at > $1 THEN w.previous_secret END AS previous_secret, \
  COALESCE(w.previous_secret_expires_at <= $1, false) AS previous_expired, \
  w.custom_header_name, w.custom_header_value, w.xmin::text::int8 AS endpoint_version, \
  l.id AS lead_id, l.partner_id AS lead_partner_id, l.sub_id AS lead_sub_id, l.first_name AS lead_first_name, \
  l.last_name AS lead_last_name, l.email AS lead_email, l.email_consent AS lead_email_consent, l.phone AS lead_phone, \
  l.sms_consent AS lead_sms_consent, l.origin AS lead_origin, l.location AS lead_location, \
  l.question_id AS lead_question_id, l.test_source AS lead_test_source, l.created_at AS lead_created_at, \
  l.updated_at AS lead_updated_at, NULL::uuid[] AS visited \
FROM claimed c JOIN domain_events ev ON ev.id = c.event_id JOIN webhook_endpoints w ON w.id = c.endpoint_id \
LEFT JOIN leads l ON c.kind IN ('lead.created', 'lead.enriched') AND l.id = CASE WHEN ev.subject ~ \
  '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$' THEN ev.subject::uuid END \
UNION ALL \
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
  NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
  COALESCE((SELECT array_agg(ep.id ORDER BY ep.ord) FROM ep), '{}')";

/// Moves the markers of the endpoints `$1` (locked by the caller's transaction, in an earlier
/// statement, so this one's snapshot sees every delivery committed by a writer that held the
/// marker) to their earliest pending delivery, due or leased, and removes those with none.
///
/// The earliest is looked for from the marker on (no pending delivery is due before it: the
/// invariant of migration 000011), so an advance steps over the dead versions left since the
/// last one, not over all those left since the last vacuum. Only when nothing is pending from the
/// marker on is the whole endpoint read, before the marker is removed: under the lock a marker
/// may then move either way, so one found later than a pending delivery (which the invariant
/// rules out) heals once its endpoint has nothing due after it.
const ADVANCE_SQL: &str = "\
WITH n AS ( \
  SELECT q.endpoint_id, COALESCE( \
    (SELECT min(d.next_attempt_at) FROM webhook_deliveries d \
      WHERE d.endpoint_id = q.endpoint_id AND d.status = 'pending' AND d.next_attempt_at >= q.due_at), \
    (SELECT min(d.next_attempt_at) FROM webhook_deliveries d \
      WHERE d.endpoint_id = q.endpoint_id AND d.status = 'pending')) AS due \
  FROM webhook_endpoint_queue q WHERE q.endpoint_id = ANY($1::uuid[])), \
gone AS ( \
  DELETE FROM webhook_endpoint_queue q USING n WHERE q.endpoint_id = n.endpoint_id AND n.due IS NULL) \
UPDATE webhook_endpoint_queue q SET due_at = n.due FROM n \
WHERE q.endpoint_id = n.endpoint_id AND n.due <> q.due_at";

/// A row of [`CLAIM_SQL`]: a claimed delivery (with its lead, if it is about one that exists),
/// or the last row, which carries only the endpoints visited.
#[allow(
    clippy::large_enum_variant,
    reason = "every row but the last is a claim: boxing would allocate once more per claimed row"
)]
enum ClaimOrVisited {
    Claim((ClaimRow, Option<LeadRow>)),
    Visited(Vec<Uuid>),
}

impl QueryableByName<diesel::pg::Pg> for ClaimOrVisited {
    fn build<'a>(
        row: &impl diesel::row::NamedRow<'a, diesel::pg::Pg>,
    ) -> diesel::deserialize::Result<Self> {
        let visited = diesel::row::NamedRow::get::<Nullable<Array<diesel::sql_types::Uuid>>, _>(
            row, "visited",
        )?;
        // The last row's delivery columns are all null; a delivery row's are never.
        Ok(match visited {
            Some(v) => Self::Visited(v),
            None => Self::Claim((ClaimRow::build(row)?, LeadRow::prefixed(row)?)),
        })
    }
}

/// Which of the endpoints a claim visited (`visited`, in the order it visited them) may have
/// markers to advance, given the endpoints that gave rows (`gave`) and whether the batch filled;
/// `(stale, trailing)`, both for [`advance`]:
///
/// - `stale`: the visited endpoints that gave no row, whose markers are early (nothing due
///   from them on): [`advance`] raises or removes them afterwards;
/// - `trailing`: the visited endpoints that gave rows, whose markers now trail the dead versions
///   the claim left (and, when the endpoint gave fewer than its room, may be early): advanced
///   too, at most every [`TRAILING_EVERY`] (`PgStore::advance_later`), so that the next claims'
///   scans from the marker do not step over them all (before, a backlog's marker stayed where
///   it was while its claims filled their room, and each claim walked every version left since).
///   A trickle's marker left early makes the next claim visit its endpoint once more (one index
///   probe; it reports it `stale` then).
///
/// When the batch filled, the endpoints after the last one that gave a row were not visited
/// (the pick stopped there), so they are neither. An endpoint misjudged either way costs an
/// advance or a visit, never a delivery: a marker is a lower bound, and the advance reads the
/// deliveries themselves.
fn split_visited(visited: Vec<Uuid>, gave: &HashSet<Uuid>, filled: bool) -> (Vec<Uuid>, Vec<Uuid>) {
    let seen = if filled {
        visited
            .iter()
            .rposition(|id| gave.contains(id))
            .map_or(0, |last| last + 1)
    } else {
        visited.len()
    };
    let (trailing, stale) = visited
        .into_iter()
        .take(seen)
        .partition(|id| gave.contains(id));
    (stale, trailing)
}

/// Locks the markers of `$1` that no writer holds (`FOR UPDATE SKIP LOCKED`), for
/// [`ADVANCE_SQL`], and commits the advance without waiting for the WAL flush (`synchronous_commit`
/// off for this transaction only): a marker is a lower bound, and a crash that loses an advance
/// leaves the markers as they were, early, which is safe (the next claim advances them again).
/// Raw: the DSL cannot put `set_config` beside a locking clause.
const LOCK_MARKERS_SQL: &str = "\
SELECT endpoint_id, set_config('synchronous_commit', 'off', true) IS NOT NULL AS async_commit \
FROM webhook_endpoint_queue WHERE endpoint_id = ANY($1::uuid[]) FOR UPDATE SKIP LOCKED";

#[derive(QueryableByName)]
struct Locked {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    endpoint_id: Uuid,
}

/// Raises or removes the markers of `endpoints` that may be stale (nothing pending, or nothing
/// pending before a later time), in a transaction of its own: the markers are locked first
/// ([`LOCK_MARKERS_SQL`]: one a writer holds until its commit is skipped and stays as it is,
/// early, which is safe), then [`ADVANCE_SQL`] reads the deliveries with a snapshot taken after
/// the locks, so it cannot miss a delivery whose writer marked the endpoint before.
pub(crate) async fn advance(conn: &mut AsyncPgConnection, endpoints: &[Uuid]) -> QueryResult<()> {
    if endpoints.is_empty() {
        return Ok(());
    }
    conn.transaction(async |conn| {
        let locked: Vec<Uuid> = crate::Prepared(diesel::sql_query(LOCK_MARKERS_SQL).bind::<Array<
            diesel::sql_types::Uuid,
        >, _>(
            endpoints
        ))
        .load::<Locked>(conn)
        .await?
        .into_iter()
        .map(|l| l.endpoint_id)
        .collect();
        if !locked.is_empty() {
            crate::Prepared(
                diesel::sql_query(ADVANCE_SQL).bind::<Array<diesel::sql_types::Uuid>, _>(&locked),
            )
            .execute(conn)
            .await?;
        }
        Ok(())
    })
    .await
}

/// The maintenance round's check of the markers (`DeliveryRepo::upkeep`): each endpoint's
/// earliest pending delivery, read by skipping from endpoint to endpoint along
/// `webhook_deliveries_endpoint_due_idx` (one descent per endpoint with entries, not a read of
/// every pending row), against its marker; a marker missing or later than that delivery (which
/// the marking trigger and the advance rule out: a row written with triggers bypassed, a partial
/// restore) is inserted or lowered, in endpoint order as the trigger takes them. Lowering is safe
/// whatever happened since the read (an early marker costs a visit); markers in order are not
/// touched, so none is locked. Returns the markers written.
const HEAL_MARKERS_SQL: &str = "\
WITH RECURSIVE e AS ( \
  (SELECT d.endpoint_id, d.next_attempt_at FROM webhook_deliveries d \
    WHERE d.status = 'pending' AND d.next_attempt_at IS NOT NULL \
    ORDER BY d.endpoint_id, d.next_attempt_at LIMIT 1) \
  UNION ALL \
  SELECT n.endpoint_id, n.next_attempt_at FROM e CROSS JOIN LATERAL ( \
    SELECT d.endpoint_id, d.next_attempt_at FROM webhook_deliveries d \
    WHERE d.status = 'pending' AND d.next_attempt_at IS NOT NULL AND d.endpoint_id > e.endpoint_id \
    ORDER BY d.endpoint_id, d.next_attempt_at LIMIT 1) n), \
late AS ( \
  SELECT e.endpoint_id, e.next_attempt_at AS due_at FROM e \
  LEFT JOIN webhook_endpoint_queue q ON q.endpoint_id = e.endpoint_id \
  WHERE q.endpoint_id IS NULL OR q.due_at > e.next_attempt_at) \
INSERT INTO webhook_endpoint_queue (endpoint_id, due_at) \
SELECT endpoint_id, due_at FROM late ORDER BY endpoint_id \
ON CONFLICT (endpoint_id) DO UPDATE SET due_at = LEAST(webhook_endpoint_queue.due_at, EXCLUDED.due_at)";

/// Inserts or lowers the markers that would hide a pending delivery ([`HEAL_MARKERS_SQL`]).
pub(crate) async fn heal_markers(conn: &mut AsyncPgConnection) -> QueryResult<usize> {
    // Once a maintenance round: not worth a prepared statement on every pooled connection.
    diesel::sql_query(HEAL_MARKERS_SQL).execute(conn).await
}

/// What a claim took (each delivery with its lead, when it is about one that exists), the
/// endpoints whose markers it may have left stale, and those whose markers trail the versions
/// it left (both for [`advance`]).
pub(crate) struct Claimed {
    pub(crate) rows: Vec<(ClaimRow, Option<LeadRow>)>,
    pub(crate) stale: Vec<Uuid>,
    pub(crate) trailing: Vec<Uuid>,
}

/// Picks the endpoints with due work and claims their rows ([`CLAIM_SQL`]: one statement,
/// prepared once per connection). Empty when nothing is due. The caller advances the markers of
/// `stale` afterwards, off the delivery's path.
pub(crate) async fn claim_rows(
    conn: &mut AsyncPgConnection,
    req: &ClaimRequest,
) -> Result<Claimed, RepoError> {
    let clamp = |n: u32| i32::try_from(n).unwrap_or(i32::MAX);
    let (busy_ids, busy_room): (Vec<Uuid>, Vec<i32>) = req
        .room
        .iter()
        .map(|(id, n)| (id.as_uuid(), clamp(*n)))
        .unzip();
    let started = std::time::Instant::now();
    let out: Vec<ClaimOrVisited> = crate::Prepared(
        diesel::sql_query(CLAIM_SQL)
            .bind::<Timestamptz, _>(req.now)
            .bind::<Timestamptz, _>(req.lease_until)
            .bind::<Array<diesel::sql_types::Uuid>, _>(&busy_ids)
            .bind::<Array<Integer>, _>(&busy_room)
            .bind::<Integer, _>(clamp(req.per_endpoint))
            .bind::<diesel::sql_types::BigInt, _>(i64::from(req.limit))
            .bind::<Integer, _>(clamp(req.max_attempts)),
    )
    .load(conn)
    .await
    .map_err(db)?;
    let mut rows = Vec::with_capacity(out.len().saturating_sub(1));
    let mut visited = Vec::new();
    for r in out {
        match r {
            ClaimOrVisited::Claim(row) => rows.push(row),
            ClaimOrVisited::Visited(v) => visited = v,
        }
    }
    let gave: HashSet<Uuid> = rows.iter().map(|(r, _)| r.endpoint_id()).collect();
    let filled = u32::try_from(rows.len()).unwrap_or(u32::MAX) >= req.limit;
    let (stale, trailing) = split_visited(visited, &gave, filled);
    tracing::debug!(
        rows = rows.len(),
        stale = stale.len(),
        trailing = trailing.len(),
        claim_us = started.elapsed().as_micros(),
        "webhook claim statement"
    );
    Ok(Claimed {
        rows,
        stale,
        trailing,
    })
}

/// The domain's batch of a claim's rows: each row read on its own (one that cannot be read
/// fails alone), and the leads it read along.
pub(crate) fn batch(rows: Vec<(ClaimRow, Option<LeadRow>)>) -> ClaimBatch {
    // Each row is read on its own: one that cannot be read fails alone.
    let mut batch = ClaimBatch::default();
    let mut leads = Vec::new();
    // Beside `batch.ready`: whether the claim looked up the delivery's lead, if it has one.
    let mut looked_up = Vec::with_capacity(rows.len());
    for (row, lead) in rows {
        let unreadable = row.unreadable();
        let hyphenated = row.subject_hyphenated();
        match row.into_domain() {
            Ok(d) => {
                looked_up.push(hyphenated);
                batch.ready.push(d);
            }
            Err(e) => {
                tracing::warn!(delivery = %unreadable.id, error = %e, "a claimed webhook delivery cannot be read");
                batch.unreadable.push(unreadable);
            }
        }
        leads.extend(lead);
    }
    // The claim looked up every lead its deliveries are about whose subject is written as
    // `CLAIM_SQL` matches it (found or gone); the worker reads the rest.
    batch.looked_up.leads = SubjectIds::of(
        batch
            .ready
            .iter()
            .zip(looked_up)
            .filter_map(|(d, looked)| looked.then_some(&d.event)),
    )
    .leads;
    let (found, unreadable) = crate::readable(leads, LeadRow::id, LeadRow::into_domain);
    batch.subjects.leads = found.into_iter().map(|l| (l.id(), l)).collect();
    batch.subjects.unreadable.leads = unreadable.into_iter().map(LeadId::from_uuid).collect();
    batch
}

/// How often the markers of endpoints that gave rows are advanced at most (`trailing` in
/// [`CLAIM_SQL`]). Each advance locks the marker (`FOR UPDATE`), which the writers of new
/// deliveries for that endpoint then wait for, and costs a transaction of three statements: a
/// trickle's marker advanced after every claim (paced 200 events a second to one endpoint) made
/// an advance for nearly every delivery. For a backlog: advanced after every claim, 16 writers
/// paced at 1,407 events a second to one endpoint wrote ~12 % fewer in 15 s than with main
/// (issue 22, `bench/webhooks-ab.sh` `rate1`, 2 rounds), at most every 50 ms ~7 % fewer (3
/// rounds); a rerun sampling the waits found the writers waiting on WAL writes and not on a
/// marker, so those gaps may be the machine's noise. The versions a scan then steps over are
/// those of 50 ms of claims (a page at ~4,000 deliveries a second).
pub(crate) const TRAILING_EVERY: std::time::Duration = std::time::Duration::from_millis(50);

/// The markers claims left stale and not advanced yet, whether an advance is under way, and the
/// trailing markers gathered since they were last taken for one (and when that was).
#[derive(Debug, Default)]
pub(crate) struct Advancing {
    pending: std::sync::Mutex<(HashSet<Uuid>, bool)>,
    trailing: std::sync::Mutex<(HashSet<Uuid>, Option<std::time::Instant>)>,
    /// [`TRAILING_EVERY`] unless a test chose another ([`PgStore::with_trailing_every`]).
    every: Option<std::time::Duration>,
    /// `true` while an advance is under way ([`PgStore::claims_settled`] waits for `false`).
    busy: tokio::sync::watch::Sender<bool>,
}

impl Advancing {
    fn pending(&self) -> std::sync::MutexGuard<'_, (HashSet<Uuid>, bool)> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl PgStore {
    /// Advances the markers a claim may have left stale (`claim::advance`) after the claim
    /// returns, on a connection of its own, in a transaction of their own: the deliveries go
    /// out meanwhile, and the next claim does not wait for it either (before, it did: in a
    /// live drain, each claim waited for the previous one's advance, four more round trips).
    /// One advance at a time: the endpoints of the claims made while one runs are advanced
    /// together by the next. A claim made before its markers are advanced may visit an
    /// endpoint with nothing due (one index probe; it reports the endpoint stale again). An
    /// advance that fails leaves the markers early (safe: a later claim advances them again),
    /// so it is only logged.
    pub(crate) fn advance_later(&self, mut stale: Vec<Uuid>, trailing: Vec<Uuid>) {
        if !trailing.is_empty() {
            let now = std::time::Instant::now();
            let mut t = self
                .advancing
                .trailing
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            t.0.extend(trailing);
            // Gathered, not dropped: every trailing marker is advanced by the first claim
            // after the window, whichever endpoints that claim visited.
            let every = self.advancing.every.unwrap_or(TRAILING_EVERY);
            if t.1.is_none_or(|at| now.duration_since(at) >= every) {
                t.1 = Some(now);
                stale.extend(t.0.drain());
            }
        }
        if stale.is_empty() {
            return;
        }
        {
            let mut p = self.advancing.pending();
            p.0.extend(stale);
            if p.1 {
                return;
            }
            p.1 = true;
            self.advancing.busy.send_replace(true);
        }
        let store = self.clone();
        tokio::spawn(async move {
            loop {
                let endpoints: Vec<Uuid> = {
                    let mut p = store.advancing.pending();
                    if p.0.is_empty() {
                        p.1 = false;
                        store.advancing.busy.send_replace(false);
                        return;
                    }
                    p.0.drain().collect()
                };
                let started = std::time::Instant::now();
                let done = match store.pooled().await {
                    Ok(mut conn) => advance(&mut conn, &endpoints).await.map_err(db),
                    Err(e) => Err(e),
                };
                match done {
                    Ok(()) => tracing::debug!(
                        endpoints = endpoints.len(),
                        advance_us = started.elapsed().as_micros(),
                        "webhook markers advanced"
                    ),
                    Err(e) => {
                        tracing::warn!(error = %e, "advancing webhook endpoint markers failed");
                    }
                }
            }
        });
    }

    /// This store with the markers of endpoints that gave rows advanced at most every `every`
    /// instead of [`TRAILING_EVERY`]: for tests that need a window no scheduling delay can
    /// overrun. Call it before the store's first claim.
    #[must_use]
    pub fn with_trailing_every(mut self, every: std::time::Duration) -> Self {
        self.advancing = std::sync::Arc::new(Advancing {
            every: Some(every),
            ..Advancing::default()
        });
        self
    }

    /// Waits until the markers of this store's claims so far are advanced (they are advanced
    /// after the claim returns, see `DeliveryRepo::claim`): for tests that read the markers.
    pub async fn claims_settled(&self) {
        let mut busy = self.advancing.busy.subscribe();
        let _ = busy.wait_for(|b| !b).await;
    }
}

/// Whether endpoint `$1` is enabled and its row still the version `$2` a claim read (`xmin`, the
/// transaction that wrote the row's current version: any change of the endpoint, by a `PATCH`,
/// the operator or a health change, writes a new one). By primary key.
const ENDPOINT_UNCHANGED_SQL: &str = "\
SELECT EXISTS (SELECT 1 FROM webhook_endpoints \
  WHERE id = $1 AND xmin::text::int8 = $2 AND disabled_at IS NULL) AS unchanged";

#[derive(QueryableByName)]
struct Unchanged {
    #[diesel(sql_type = diesel::sql_types::Bool)]
    unchanged: bool,
}

pub(crate) async fn endpoint_unchanged(
    conn: &mut AsyncPgConnection,
    id: Uuid,
    version: i64,
) -> QueryResult<bool> {
    // Prepared: it runs before every attempt (issue 23, N9b'').
    crate::Prepared(
        diesel::sql_query(ENDPOINT_UNCHANGED_SQL)
            .bind::<diesel::sql_types::Uuid, _>(id)
            .bind::<diesel::sql_types::BigInt, _>(version),
    )
    .get_result::<Unchanged>(conn)
    .await
    .map(|r| r.unchanged)
}

/// Gives claims back unattempted (`DeliveryRepo::release`): only rows still pending under their
/// lease; the attempt the claim counted is taken back. The update marks the endpoint due again
/// (trigger `webhook_deliveries_mark_updated`). Raw: an `unnest` of two arrays.
const RELEASE_SQL: &str = "\
UPDATE webhook_deliveries d SET attempts = d.attempts - 1, next_attempt_at = $3, lease_token = NULL \
FROM unnest($1::uuid[], $2::uuid[]) AS r(id, lease) \
WHERE d.id = r.id AND d.lease_token = r.lease AND d.status = 'pending'";

pub(crate) async fn release(
    conn: &mut AsyncPgConnection,
    ids: Vec<Uuid>,
    leases: Vec<Uuid>,
    now: time::OffsetDateTime,
) -> QueryResult<usize> {
    crate::Prepared(
        diesel::sql_query(RELEASE_SQL)
            .bind::<Array<diesel::sql_types::Uuid>, _>(ids)
            .bind::<Array<diesel::sql_types::Uuid>, _>(leases)
            .bind::<Timestamptz, _>(now),
    )
    .execute(conn)
    .await
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use diesel_async::SimpleAsyncConnection;
    use uuid::Uuid;

    use super::split_visited;
    use crate::test_support::{BACKLOG_SQL, cte_part, generic_plan};

    /// The markers a claim reports to advance: every endpoint visited when the batch did not
    /// fill (those that gave rows trailing, the others stale); when it filled, only those up to
    /// the last that gave a row, in the order visited (the pick stopped there).
    #[test]
    fn a_claim_reports_the_visited_endpoints_up_to_where_its_pick_stopped() {
        let ids: Vec<Uuid> = (1..=5u128).map(Uuid::from_u128).collect();
        let (a, b, c, d, e) = (ids[0], ids[1], ids[2], ids[3], ids[4]);
        let gave: HashSet<Uuid> = [b, d].into();
        assert_eq!(
            split_visited(ids.clone(), &gave, false),
            (vec![a, c, e], vec![b, d]),
            "not filled: every visit counts"
        );
        assert_eq!(
            split_visited(ids.clone(), &gave, true),
            (vec![a, c], vec![b, d]),
            "filled: nothing after the last endpoint that gave a row"
        );
        assert_eq!(
            split_visited(ids.clone(), &HashSet::new(), false),
            (ids.clone(), vec![]),
            "nothing claimed: every visited marker is stale"
        );
        assert_eq!(split_visited(vec![], &gave, true), (vec![], vec![]));
    }

    /// The claim's `UPDATE` reaches the rows it picked by the `ctid` their lock returned, in the
    /// generic plan PostgreSQL caches for a prepared statement, on a table without statistics
    /// (a fresh database, or autovacuum off): a TID scan, the one path whose cost does not
    /// depend on the planner's guess. Joined by primary key, the path is the planner's choice by
    /// the table's size when the plan is made (here an index scan; at some sizes a scan of the
    /// whole table once per claimed row, which the worker's connection then kept: issue 22,
    /// `bench/claim-plan.sh`), so this test fails for a claim joined by primary key. The real
    /// PostgreSQL of the tests (`TEST_DATABASE_URL`).
    #[tokio::test]
    async fn the_claims_update_reaches_its_rows_by_tid_in_a_generic_plan_without_statistics() {
        let url = crate::test_support::fresh_test_database("claim_plan").await;
        let mut conn = crate::connect::open(&url).await.expect("connected");
        conn.batch_execute(BACKLOG_SQL).await.expect("filled");
        let plan = generic_plan(
            &mut conn,
            super::CLAIM_SQL,
            "timestamptz, timestamptz, uuid[], int4[], int4, int8, int4",
            "now(), now() + interval '30 s', '{}', '{}', 32, 512, 7",
        )
        .await;
        drop(conn);
        crate::drop_database(&url).await.expect("dropped");
        let text = cte_part(&plan, "claimed");
        assert!(
            text.contains("Update on webhook_deliveries"),
            "no UPDATE found in the plan:\n{}",
            plan.join("\n")
        );
        assert!(
            text.contains("Tid Scan on webhook_deliveries"),
            "the claim's UPDATE does not reach its rows by TID:\n{}",
            plan.join("\n")
        );
        assert!(
            !text.contains("Seq Scan on webhook_deliveries"),
            "the claim's UPDATE scans the table:\n{}",
            plan.join("\n")
        );
    }
}
