//! The workers' record of their attempts (`DeliveryRepo::record`): a batch of outcomes written in
//! one statement, fenced by each delivery's lease, and the endpoints' health judged from them.

use std::collections::HashMap;
use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Bool, Integer, Nullable, Text, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use partner_domain::RepoError;
use partner_domain::webhook::{
    AttemptOutcome, Attempted, ENDPOINT_DISABLED, EndpointHealth, HealthChange, NextStep,
};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::db;
use crate::schema::webhook_endpoints;
use crate::webhooks::fail_disabled;

/// Outcomes of a batch in one statement, fenced by the lease token: a row reclaimed by another
/// worker after this one's lease ran out (new token) or already finished is left alone. The
/// `ANY($1)` restates the join so the primary key is used whatever the planner guesses of
/// `unnest`. Each applied outcome also goes into the attempt log (`webhook_attempts`), stamped
/// with the time the request started.
///
/// It answers one row per delivery of the batch that still exists: its endpoint's health as the
/// statement's snapshot saw it (what [`judge_health`] judges, read before in a statement of its
/// own: a round trip per batch, 0.2 ms, issue 22), and on every row how many outcomes were
/// applied (counted once: a flag per row, by `EXISTS` or a join to `done`, was planned as a scan
/// of the written rows for each row on a small table). The snapshot is the one a separate read
/// just after would mostly see; a change committed meanwhile is caught by the health write's
/// compare-and-set either way. No row at all: none of the batch's deliveries exists any more,
/// and none was applied.
const RECORD_SQL: &str = "\
WITH u AS ( \
  SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::timestamptz[], $5::timestamptz[], $6::int4[], \
    $7::text[], $8::int4[]) AS u(id, lease, next, at, retry_at, status_code, error, duration_ms)), \
done AS ( \
  UPDATE webhook_deliveries d SET \
    status = CASE u.next WHEN 'delivered' THEN 'delivered' WHEN 'retry' THEN 'pending' ELSE 'failed' END, \
    delivered_at = CASE WHEN u.next = 'delivered' THEN u.at END, \
    next_attempt_at = CASE WHEN u.next = 'retry' THEN u.retry_at END, \
    last_attempt_at = u.at - make_interval(secs => COALESCE(u.duration_ms, 0) / 1000.0::float8), \
    last_status_code = u.status_code, last_error = u.error, lease_token = NULL \
  FROM u \
  WHERE d.id = ANY($1::uuid[]) AND d.id = u.id AND d.lease_token = u.lease AND d.status = 'pending' \
  RETURNING d.id, d.last_attempt_at, u.status_code, u.duration_ms, u.error), \
logged AS ( \
  INSERT INTO webhook_attempts (delivery_id, attempted_at, status_code, duration_ms, error) \
  SELECT id, last_attempt_at, status_code, duration_ms, error FROM done) \
SELECT d.id AS delivery_id, w.id AS endpoint_id, w.failing_since, w.disabled_at IS NOT NULL AS disabled, \
  (SELECT count(*) FROM done) AS applied \
FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id \
WHERE d.id = ANY($1::uuid[])";

/// A row of [`RECORD_SQL`]'s answer.
#[derive(QueryableByName)]
struct Recorded {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    delivery_id: Uuid,
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    endpoint_id: Uuid,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    failing_since: Option<OffsetDateTime>,
    #[diesel(sql_type = Bool)]
    disabled: bool,
    /// The same on every row: the outcomes applied.
    #[diesel(sql_type = BigInt)]
    applied: i64,
}

/// Writes a batch's outcomes ([`RECORD_SQL`]), then judges the health of the endpoints they were
/// attempted at ([`judge_health`]) and ends the pending deliveries of those it disabled. Returns
/// how many outcomes were applied (the others' leases had passed to another worker).
pub(crate) async fn record(
    conn: &mut AsyncPgConnection,
    outcomes: &[AttemptOutcome],
    disable_after: Option<Duration>,
) -> Result<u64, RepoError> {
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
    let recorded: Vec<Recorded> = crate::Prepared(
        diesel::sql_query(RECORD_SQL)
            .bind::<Array<diesel::sql_types::Uuid>, _>(&ids)
            .bind::<Array<diesel::sql_types::Uuid>, _>(&leases)
            .bind::<Array<Text>, _>(&next)
            .bind::<Array<Timestamptz>, _>(&at)
            .bind::<Array<Nullable<Timestamptz>>, _>(&retry_at)
            .bind::<Array<Nullable<Integer>>, _>(&codes)
            .bind::<Array<Nullable<Text>>, _>(&errors)
            .bind::<Array<Nullable<Integer>>, _>(&durations),
    )
    .load(conn)
    .await
    .map_err(db)?;
    let applied = <[Recorded]>::first(&recorded).map_or(0, |r| r.applied);
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
    Ok(u64::try_from(applied).unwrap_or(0))
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
        let Some(attempts) = by_delivery.get(&r.delivery_id) else {
            continue;
        };
        let health = EndpointHealth {
            failing_since: r.failing_since,
            disabled: r.disabled,
        };
        endpoints
            .entry(r.endpoint_id)
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
    use partner_domain::webhook::{AttemptOutcome, ENDPOINT_DISABLED, NextStep};
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
            at: OffsetDateTime::now_utc(),
            status_code: Some(code),
            error: None,
            duration_ms: Some(3),
            next,
        }
    }

    #[derive(diesel::QueryableByName, Debug, PartialEq)]
    struct State {
        #[diesel(sql_type = Text)]
        status: String,
        #[diesel(sql_type = diesel::sql_types::Nullable<Text>)]
        last_error: Option<String>,
        #[diesel(sql_type = BigInt)]
        logged: i64,
    }

    /// One statement writes the outcomes still leased and answers what the health judgment
    /// needs: the outcome of a delivery whose lease passed to another worker is not applied nor
    /// logged, yet its answer (here `410 Gone`) is an attempt the endpoint did answer, and still
    /// disables it, as when the health was read in a statement of its own; the endpoint's other
    /// pending deliveries then end `failed`. The real PostgreSQL of the tests.
    #[tokio::test]
    async fn outcomes_apply_only_under_their_lease_and_every_answer_counts_for_health() {
        let url = crate::fresh_test_database("record").await;
        let mut conn = crate::connect::open(&url).await.expect("connected");
        conn.batch_execute(FILL_SQL).await.expect("filled");
        let outcomes = [
            outcome(1, 1, 200, NextStep::Delivered),
            outcome(2, 9, 410, NextStep::GiveUp),
        ];
        let applied = super::record(&mut conn, &outcomes, None)
            .await
            .expect("recorded");
        let states: Vec<State> = diesel::sql_query(
            "SELECT d.status, d.last_error, \
               (SELECT count(*) FROM webhook_attempts a WHERE a.delivery_id = d.id) AS logged \
             FROM webhook_deliveries d ORDER BY d.id",
        )
        .load(&mut conn)
        .await
        .expect("read");
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
}
