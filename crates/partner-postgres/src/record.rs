//! The workers' record of their attempts (`DeliveryRepo::record`): a batch of outcomes written in
//! one statement, fenced by each delivery's lease, and the endpoints' health judged from them.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::{Array, Bool, Integer, Nullable, Text, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use partner_domain::RepoError;
use partner_domain::webhook::{
    AttemptOutcome, Attempted, ENDPOINT_DISABLED, EndpointHealth, HealthChange, NextStep, RowHint,
};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::db;
use crate::schema::webhook_endpoints;
use crate::webhooks::fail_disabled;

/// Outcomes of a batch in one statement, fenced by the lease token: a row reclaimed by another
/// worker after this one's lease ran out (new token) or already finished is left alone. Each
/// applied outcome also goes into the attempt log (`webhook_attempts`), stamped with the time
/// the request started.
///
/// Each row is reached by the `ctid` its claim returned (`$9`, the outcome's [`RowHint`]): a TID
/// scan per outcome, whatever the table's size and statistics. Nothing but a claim, a record, a
/// release, a resend or a recover updates a delivery, and each changes or clears its lease, so a
/// row still under the outcome's lease is the version its claim wrote, where the claim found it;
/// a row moved without an update (`VACUUM FULL`, `CLUSTER`), or an outcome without a hint, is
/// not found there, and [`record`] writes it again where the row is ([`LOCATE_SQL`]). The
/// `LIMIT` restates the batch's size in a form the planner cannot read, so that it guesses a
/// tenth of the ten rows it guesses for any `unnest` of a parameter: one TID scan then costs
/// less than any read of the table, at any size. Without it, the generic plan a connection made
/// and kept while the table was small (a fresh database, or no statistics) joined the batch to a
/// scan of the table, or of its pending index: 2,444-4,373 index entries read for 40-132 rows,
/// 19-45 ms a batch under a live load against 3.2 ms in a pre-filled drain (issue 22).
///
/// It answers one row per delivery of the batch found where its hint says, as the statement's
/// snapshot saw it before the update, with its endpoint's health (what [`judge_health`] judges;
/// read by primary key, one probe per row: a join was hashed over a scan of every endpoint),
/// then one row per outcome applied (`applied`), so that each is counted once (a flag per row,
/// by `EXISTS` or a join to `done`, was planned as a scan of the written rows for each row). The
/// snapshot is the one a separate read just after would mostly see; a change committed meanwhile
/// is caught by the health write's compare-and-set either way.
const RECORD_SQL: &str = "\
WITH u AS ( \
  SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::timestamptz[], $5::timestamptz[], $6::int4[], \
    $7::text[], $8::int4[], $9::text[]::tid[]) \
    AS u(id, lease, next, at, retry_at, status_code, error, duration_ms, tid) \
  LIMIT cardinality($1::uuid[])), \
done AS ( \
  UPDATE webhook_deliveries d SET \
    status = CASE u.next WHEN 'delivered' THEN 'delivered' WHEN 'retry' THEN 'pending' ELSE 'failed' END, \
    delivered_at = CASE WHEN u.next = 'delivered' THEN u.at END, \
    next_attempt_at = CASE WHEN u.next = 'retry' THEN u.retry_at END, \
    last_attempt_at = u.at - make_interval(secs => COALESCE(u.duration_ms, 0) / 1000.0::float8), \
    last_status_code = u.status_code, last_error = u.error, lease_token = NULL \
  FROM u \
  WHERE d.ctid = u.tid AND d.id = u.id AND d.lease_token = u.lease AND d.status = 'pending' \
  RETURNING d.id, d.last_attempt_at, u.status_code, u.duration_ms, u.error), \
logged AS ( \
  INSERT INTO webhook_attempts (delivery_id, attempted_at, status_code, duration_ms, error) \
  SELECT id, last_attempt_at, status_code, duration_ms, error FROM done) \
SELECT d.id AS delivery_id, d.endpoint_id, \
  (SELECT w.failing_since FROM webhook_endpoints w WHERE w.id = d.endpoint_id) AS failing_since, \
  (SELECT w.disabled_at IS NOT NULL FROM webhook_endpoints w WHERE w.id = d.endpoint_id) AS disabled, \
  false AS applied \
FROM u JOIN webhook_deliveries d ON d.ctid = u.tid AND d.id = u.id \
UNION ALL \
SELECT id, NULL, NULL, NULL, true FROM done";

/// Where the rows of deliveries are now: for the outcomes [`RECORD_SQL`] did not find where
/// their hints said. Rare (a row moved, or no hint), so planned for the ids it is given.
const LOCATE_SQL: &str = "SELECT id AS delivery_id, ctid::text AS tid FROM webhook_deliveries WHERE id = ANY($1::uuid[])";

/// A row of [`RECORD_SQL`]'s answer: a delivery of the batch as the snapshot saw it, with its
/// endpoint's health (`disabled` null: the endpoint is gone), or (`applied`) an outcome
/// applied, which carries only its delivery's id.
#[derive(QueryableByName)]
struct Recorded {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    delivery_id: Uuid,
    #[diesel(sql_type = Nullable<diesel::sql_types::Uuid>)]
    endpoint_id: Option<Uuid>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    failing_since: Option<OffsetDateTime>,
    #[diesel(sql_type = Nullable<Bool>)]
    disabled: Option<bool>,
    #[diesel(sql_type = Bool)]
    applied: bool,
}

/// A row of [`LOCATE_SQL`].
#[derive(QueryableByName)]
struct Located {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    delivery_id: Uuid,
    #[diesel(sql_type = Text)]
    tid: String,
}

/// The [`RowHint`] of a tuple address as PostgreSQL writes a `ctid` (`(block,offset)`): the
/// block in the high bits, the offset (never 0) in the low 16. [`RowHint::NONE`] for anything
/// else.
pub(crate) fn row_hint(ctid: &str) -> RowHint {
    let parsed = ctid
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .and_then(|s| s.split_once(','))
        .and_then(|(block, offset)| {
            Some((block.parse::<u32>().ok()?, offset.parse::<u16>().ok()?))
        });
    match parsed {
        Some((block, offset)) if offset > 0 => {
            RowHint::new((u64::from(block) << 16) | u64::from(offset))
        }
        _ => RowHint::NONE,
    }
}

/// The `ctid` a [`RowHint`] was made of (`None` for [`RowHint::NONE`] or a hint of another
/// store: [`RECORD_SQL`] then finds no row there).
fn ctid_of(hint: RowHint) -> Option<String> {
    let raw = hint.get();
    let (block, offset) = (raw >> 16, raw & 0xffff);
    (offset > 0 && block <= u64::from(u32::MAX)).then(|| format!("({block},{offset})"))
}

/// How often [`record`] looks again for the rows it did not find where their hints said.
const LOCATE_TRIES: usize = 2;

/// Writes a batch's outcomes ([`RECORD_SQL`]), then judges the health of the endpoints they were
/// attempted at ([`judge_health`]) and ends the pending deliveries of those it disabled. Returns
/// how many outcomes were applied (the others' leases had passed to another worker).
///
/// The outcomes whose rows were not where their hints said are written again where the rows
/// are now ([`LOCATE_SQL`]), at most [`LOCATE_TRIES`] times: a row that moves each time is left
/// to its lease and attempted again, as one whose lease ran out, and a row gone (its endpoint
/// or partner deleted) has no outcome to take.
pub(crate) async fn record(
    conn: &mut AsyncPgConnection,
    outcomes: &[AttemptOutcome],
    disable_after: Option<Duration>,
) -> Result<u64, RepoError> {
    let hints: Vec<Option<String>> = outcomes.iter().map(|o| ctid_of(o.row)).collect();
    let mut recorded = write(conn, outcomes, &hints).await?;
    let mut missing = not_found(outcomes, &recorded);
    for _ in 0..LOCATE_TRIES {
        if missing.is_empty() {
            break;
        }
        let ids: Vec<Uuid> = missing.iter().map(|o| o.id.as_uuid()).collect();
        let located: HashMap<Uuid, String> = diesel::sql_query(LOCATE_SQL)
            .bind::<Array<diesel::sql_types::Uuid>, _>(&ids)
            .load::<Located>(conn)
            .await
            .map_err(db)?
            .into_iter()
            .map(|l| (l.delivery_id, l.tid))
            .collect();
        let (again, hints): (Vec<AttemptOutcome>, Vec<Option<String>>) = missing
            .into_iter()
            .filter_map(|o| {
                let tid = located.get(&o.id.as_uuid())?.clone();
                Some((o, Some(tid)))
            })
            .unzip();
        if again.is_empty() {
            break;
        }
        let rows = write(conn, &again, &hints).await?;
        missing = not_found(&again, &rows);
        recorded.extend(rows);
    }
    let applied = recorded.iter().filter(|r| r.applied).count();
    let attempted: Vec<(Uuid, Attempted)> = outcomes
        .iter()
        .filter_map(|o| Attempted::of(o).map(|a| (o.id.as_uuid(), a)))
        .collect();
    if !attempted.is_empty() {
        let disabled = judge_health(conn, &attempted, &recorded, disable_after).await?;
        if !disabled.is_empty() {
            fail_disabled(conn, &disabled, ENDPOINT_DISABLED)
                .await
                .map_err(db)?;
        }
    }
    Ok(u64::try_from(applied).unwrap_or(u64::MAX))
}

/// The outcomes whose rows [`RECORD_SQL`] (its answer: `recorded`) did not find where their
/// hints said.
fn not_found(outcomes: &[AttemptOutcome], recorded: &[Recorded]) -> Vec<AttemptOutcome> {
    let found: HashSet<Uuid> = recorded
        .iter()
        .filter(|r| !r.applied)
        .map(|r| r.delivery_id)
        .collect();
    outcomes
        .iter()
        .filter(|o| !found.contains(&o.id.as_uuid()))
        .cloned()
        .collect()
}

/// One run of [`RECORD_SQL`] over `outcomes`, each looked for at its `hints` entry.
async fn write(
    conn: &mut AsyncPgConnection,
    outcomes: &[AttemptOutcome],
    hints: &[Option<String>],
) -> Result<Vec<Recorded>, RepoError> {
    let n = outcomes.len();
    let mut durations = Vec::with_capacity(n);
    let (mut ids, mut leases, mut next, mut at, mut retry_at, mut codes, mut errors) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for o in outcomes {
        ids.push(o.id.as_uuid());
        leases.push(o.lease);
        let (step, when) = match o.next {
            NextStep::Delivered => ("delivered", None),
            NextStep::RetryAt(t) => ("retry", Some(t)),
            NextStep::GiveUp => ("failed", None),
        };
        next.push(step);
        at.push(o.at);
        retry_at.push(when);
        codes.push(o.status_code.map(i32::from));
        durations.push(o.duration_ms.map(|d| i32::try_from(d).unwrap_or(i32::MAX)));
        errors.push(o.error.as_deref().map(|e| {
            e.chars()
                .filter(|c| !c.is_control())
                .take(200)
                .collect::<String>()
        }));
    }
    // Prepared once per connection: parsed and planned at every batch before.
    crate::Prepared(
        diesel::sql_query(RECORD_SQL)
            .bind::<Array<diesel::sql_types::Uuid>, _>(&ids)
            .bind::<Array<diesel::sql_types::Uuid>, _>(&leases)
            .bind::<Array<Text>, _>(&next)
            .bind::<Array<Timestamptz>, _>(&at)
            .bind::<Array<Nullable<Timestamptz>>, _>(&retry_at)
            .bind::<Array<Nullable<Integer>>, _>(&codes)
            .bind::<Array<Nullable<Text>>, _>(&errors)
            .bind::<Array<Nullable<Integer>>, _>(&durations)
            .bind::<Array<Nullable<Text>>, _>(hints),
    )
    .load(conn)
    .await
    .map_err(db)
}

/// How often an endpoint's health is read again when another worker changed it between this
/// worker's read and its write.
const HEALTH_TRIES: usize = 3;

/// Applies the domain's health rule ([`EndpointHealth::after`]) to the endpoints of a batch's
/// attempts (`attempted`: delivery id and attempt), given each delivery's endpoint and its health
/// as [`RECORD_SQL`] read it (`read`): asks the rule, and writes what it answers only over the
/// health it read (compare-and-set, read again when another worker changed it meanwhile). A write
/// only when the health changes. Returns the endpoints left disabled, whose pending deliveries
/// end `failed`.
async fn judge_health(
    conn: &mut AsyncPgConnection,
    attempted: &[(Uuid, Attempted)],
    read: &[Recorded],
    disable_after: Option<Duration>,
) -> Result<Vec<Uuid>, RepoError> {
    let mut by_delivery: HashMap<Uuid, Vec<Attempted>> = HashMap::new();
    for (id, a) in attempted {
        by_delivery.entry(*id).or_default().push(*a);
    }
    // Per endpoint: its health as read, and the batch's attempts at it.
    let mut endpoints: HashMap<Uuid, (EndpointHealth, Vec<Attempted>)> = HashMap::new();
    for r in read {
        let (Some(endpoint), Some(disabled)) = (r.endpoint_id, r.disabled) else {
            continue; // an applied outcome's row, or an endpoint gone
        };
        let Some(attempts) = by_delivery.get(&r.delivery_id) else {
            continue;
        };
        let health = EndpointHealth {
            failing_since: r.failing_since,
            disabled,
        };
        endpoints
            .entry(endpoint)
            .or_insert_with(|| (health, Vec::new()))
            .1
            .extend_from_slice(attempts);
    }
    let mut disabled = Vec::new();
    for (endpoint, (mut health, attempts)) in endpoints {
        for _ in 0..HEALTH_TRIES {
            let Some(change) = health.after(&attempts, disable_after) else {
                break;
            };
            if write_health(conn, endpoint, health, change).await? {
                if change.disabled {
                    disabled.push(endpoint);
                }
                break;
            }
            // Changed by another worker since it was read (or deleted): judge it again.
            let now: Option<(Option<OffsetDateTime>, bool)> = webhook_endpoints::table
                .find(endpoint)
                .select((
                    webhook_endpoints::failing_since,
                    webhook_endpoints::disabled_at.is_not_null(),
                ))
                .get_result(conn)
                .await
                .optional()
                .map_err(db)?;
            let Some((failing_since, is_disabled)) = now else {
                break;
            };
            health = EndpointHealth {
                failing_since,
                disabled: is_disabled,
            };
        }
    }
    Ok(disabled)
}

/// Writes `change` over the endpoint's health `before`, only while the row still holds it.
async fn write_health(
    conn: &mut AsyncPgConnection,
    endpoint: Uuid,
    before: EndpointHealth,
    change: HealthChange,
) -> Result<bool, RepoError> {
    let (disabled_at, reason) = change.disable.unzip();
    let n = diesel::update(webhook_endpoints::table)
        .filter(webhook_endpoints::id.eq(endpoint))
        .filter(webhook_endpoints::failing_since.is_not_distinct_from(before.failing_since))
        .filter(
            webhook_endpoints::disabled_at
                .is_not_null()
                .eq(before.disabled),
        )
        .set((
            webhook_endpoints::failing_since.eq(change.failing_since),
            disabled_at.map(|at| webhook_endpoints::disabled_at.eq(at)),
            reason.map(|r| webhook_endpoints::disabled_reason.eq(r.as_str())),
        ))
        .execute(conn)
        .await
        .map_err(db)?;
    Ok(n == 1)
}

#[cfg(test)]
mod tests {
    use diesel::sql_types::{BigInt, Text};
    use diesel_async::{RunQueryDsl, SimpleAsyncConnection};
    use partner_domain::kernel::ids::DeliveryId;
    use partner_domain::webhook::{AttemptOutcome, ENDPOINT_DISABLED, NextStep, RowHint};
    use time::OffsetDateTime;
    use uuid::Uuid;

    /// A partner with one endpoint and two pending deliveries of one event, each leased under
    /// the token its number names (`…01`, `…02`).
    const FILL_SQL: &str = "\
INSERT INTO partners (partner_id, name, email, active, dna_access, headless_links, default_lang, enabled_langs,
  cs_subscription_active, cs_manual_override, cs_yearly_bundle, cs_services, created_at, updated_at)
VALUES ('wh-1', 'Record', 'ops@record.test', true, false, true, 'en', '{en}', false, false, false, '{}', now(), now());
INSERT INTO webhook_endpoints (id, partner_id, url, events, secret, created_at, updated_at)
VALUES ('00000000-0000-0000-0000-0000000000e1', 'wh-1', 'https://127.0.0.1:1/hook', '{lead.created}',
  'whsec_record0123456789abcdefghijklmnopqrstuvwxyzABC', now(), now());
INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at)
VALUES ('00000000-0000-0000-0000-0000000000a1', 'wh-1', 'lead.created', 'gone', '{}', now());
INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, attempts, next_attempt_at,
  lease_token, created_at)
SELECT ('00000000-0000-0000-0000-0000000000d' || g)::uuid, '00000000-0000-0000-0000-0000000000e1', 'wh-1',
  '00000000-0000-0000-0000-0000000000a1', 'lead.created', 'pending', 1, now() + interval '30 s',
  ('00000000-0000-0000-0000-00000000000' || g)::uuid, now()
FROM generate_series(1, 2) g;";

    fn outcome(n: u128, lease: u128, code: u16, next: NextStep) -> AttemptOutcome {
        AttemptOutcome {
            id: DeliveryId::from_uuid(Uuid::from_u128(0xd0 + n)),
            lease: Uuid::from_u128(lease),
            row: RowHint::NONE,
            at: OffsetDateTime::now_utc(),
            status_code: Some(code),
            error: None,
            duration_ms: Some(3),
            next,
        }
    }

    #[derive(diesel::QueryableByName, Debug, Clone, PartialEq)]
    struct State {
        #[diesel(sql_type = Text)]
        status: String,
        #[diesel(sql_type = diesel::sql_types::Nullable<Text>)]
        last_error: Option<String>,
        #[diesel(sql_type = BigInt)]
        logged: i64,
    }

    /// Each delivery's status, last error and attempts logged, in id order.
    async fn states(conn: &mut diesel_async::AsyncPgConnection) -> Vec<State> {
        diesel::sql_query(
            "SELECT d.status, d.last_error, \
               (SELECT count(*) FROM webhook_attempts a WHERE a.delivery_id = d.id) AS logged \
             FROM webhook_deliveries d ORDER BY d.id",
        )
        .load(conn)
        .await
        .expect("read")
    }

    /// The outcomes still leased are written, and the statement answers what the health
    /// judgment needs: the outcome of a delivery whose lease passed to another worker is not
    /// applied nor logged, yet its answer (here `410 Gone`) is an attempt the endpoint did
    /// answer, and still disables it, as when the health was read in a statement of its own;
    /// the endpoint's other pending deliveries then end `failed`. Without hints
    /// ([`RowHint::NONE`]) the rows are located by id and written there. The real PostgreSQL of
    /// the tests.
    #[tokio::test]
    async fn outcomes_apply_only_under_their_lease_and_every_answer_counts_for_health() {
        let url = crate::test_support::fresh_test_database("record").await;
        let mut conn = crate::connect::open(&url).await.expect("connected");
        conn.batch_execute(FILL_SQL).await.expect("filled");
        let outcomes = [
            outcome(1, 1, 200, NextStep::Delivered),
            outcome(2, 9, 410, NextStep::GiveUp),
        ];
        let applied = super::record(&mut conn, &outcomes, None)
            .await
            .expect("recorded");
        let states = states(&mut conn).await;
        let disabled: Vec<State> = diesel::sql_query(
            "SELECT disabled_reason AS status, NULL::text AS last_error, 0::int8 AS logged \
             FROM webhook_endpoints WHERE disabled_at IS NOT NULL",
        )
        .load(&mut conn)
        .await
        .expect("read");
        drop(conn);
        crate::drop_database(&url).await.expect("dropped");
        assert_eq!(applied, 1);
        assert_eq!(
            states,
            [
                State {
                    status: "delivered".into(),
                    last_error: None,
                    logged: 1
                },
                State {
                    status: "failed".into(),
                    last_error: Some(ENDPOINT_DISABLED.into()),
                    logged: 0
                },
            ]
        );
        assert_eq!(
            disabled,
            [State {
                status: "gone".into(),
                last_error: None,
                logged: 0
            }]
        );
    }

    #[derive(diesel::QueryableByName)]
    struct Tid {
        #[diesel(sql_type = Text)]
        tid: String,
    }

    async fn tids(conn: &mut diesel_async::AsyncPgConnection) -> Vec<RowHint> {
        diesel::sql_query("SELECT ctid::text AS tid FROM webhook_deliveries ORDER BY id")
            .load::<Tid>(conn)
            .await
            .expect("read")
            .iter()
            .map(|t| super::row_hint(&t.tid))
            .collect()
    }

    /// An outcome is written where its claim left the row (its hint), and only there: a row
    /// that moved since under the same lease (here by an update that keeps it, as `VACUUM FULL`
    /// moves rows) is not found by the first statement, and [`super::record`] writes it where
    /// it is now. The real PostgreSQL of the tests.
    #[tokio::test]
    async fn an_outcome_is_written_where_its_claim_left_the_row_and_a_moved_row_where_it_is() {
        let url = crate::test_support::fresh_test_database("record_moved").await;
        let mut conn = crate::connect::open(&url).await.expect("connected");
        conn.batch_execute(FILL_SQL).await.expect("filled");
        let claimed = tids(&mut conn).await;
        conn.batch_execute(
            "UPDATE webhook_deliveries SET created_at = created_at \
             WHERE id = '00000000-0000-0000-0000-0000000000d2'",
        )
        .await
        .expect("moved");
        let now = tids(&mut conn).await;
        let outcomes: Vec<AttemptOutcome> = [1, 2]
            .into_iter()
            .zip(&claimed)
            .map(|(n, row)| AttemptOutcome {
                row: *row,
                ..outcome(n, n, 200, NextStep::Delivered)
            })
            .collect();
        let hints: Vec<Option<String>> = outcomes.iter().map(|o| super::ctid_of(o.row)).collect();
        let first = super::write(&mut conn, &outcomes, &hints)
            .await
            .expect("written");
        let applied: Vec<Uuid> = first
            .iter()
            .filter(|r| r.applied)
            .map(|r| r.delivery_id)
            .collect();
        let missing: Vec<Uuid> = super::not_found(&outcomes, &first)
            .iter()
            .map(|o| o.id.as_uuid())
            .collect();
        let again = super::record(&mut conn, &outcomes[1..], None)
            .await
            .expect("recorded");
        let states = states(&mut conn).await;
        drop(conn);
        crate::drop_database(&url).await.expect("dropped");
        assert_ne!(claimed[1], now[1], "the update moved the row");
        assert_eq!(
            applied,
            [Uuid::from_u128(0xd1)],
            "written where the claim left it"
        );
        assert_eq!(missing, [Uuid::from_u128(0xd2)], "not found where it was");
        assert_eq!(again, 1, "the moved row is written where it is");
        let delivered = State {
            status: "delivered".into(),
            last_error: None,
            logged: 1,
        };
        assert_eq!(states, [delivered.clone(), delivered]);
    }

    /// The outcomes' statement reaches its rows by TID, and their endpoints by primary key, in
    /// the generic plan PostgreSQL caches for the prepared statement on tables without
    /// statistics: by the deliveries' primary key, it read the pending index or the whole
    /// table, and the endpoints were hashed from a scan of them all (issue 22). The real
    /// PostgreSQL of the tests.
    #[tokio::test]
    async fn the_outcomes_update_reaches_its_rows_by_tid_in_a_generic_plan_without_statistics() {
        let url = crate::test_support::fresh_test_database("record_plan").await;
        let mut conn = crate::connect::open(&url).await.expect("connected");
        conn.batch_execute(crate::test_support::BACKLOG_SQL)
            .await
            .expect("filled");
        let plan = crate::test_support::generic_plan(
            &mut conn,
            super::RECORD_SQL,
            "uuid[], uuid[], text[], timestamptz[], timestamptz[], int4[], text[], int4[], text[]",
            "'{00000000-0000-0000-0000-000000000001}', '{00000000-0000-0000-0000-000000000002}', \
             '{delivered}', ARRAY[now()], '{NULL}', '{200}', '{NULL}', '{3}', '{\"(0,1)\"}'",
        )
        .await;
        drop(conn);
        crate::drop_database(&url).await.expect("dropped");
        let text = crate::test_support::cte_part(&plan, "done");
        let all = plan.join("\n");
        assert!(
            text.contains("Update on webhook_deliveries"),
            "no UPDATE found in the plan:\n{all}"
        );
        assert!(
            text.contains("Tid Scan on webhook_deliveries"),
            "the outcomes' UPDATE does not reach its rows by TID:\n{all}"
        );
        assert!(
            !all.contains("Scan on webhook_deliveries_") && !all.contains("Seq Scan"),
            "the statement reads an index of the deliveries, or a whole table:\n{all}"
        );
    }
}
