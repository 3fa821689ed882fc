//! Writes domain events into the outbox inside the caller's transaction.

use diesel::sql_types::{Text, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use partner_domain::events::DomainEvent;
use time::OffsetDateTime;

/// Returns the number of deliveries written: after the transaction commits, the caller tells the
/// workers ([`crate::PgStore::deliveries_committed`]).
pub(crate) async fn write(
    conn: &mut AsyncPgConnection,
    events: &[DomainEvent],
    now: OffsetDateTime,
) -> Result<usize, diesel::result::Error> {
    let mut deliveries = 0;
    for e in events {
        // The event, and in the same statement one delivery per endpoint of the partner that
        // subscribed to its kind and is not disabled. Whether the kind waits for the endpoint's
        // stored delay is the domain's rule (`EventKind::honours_endpoint_delay`), bound as $6.
        // Prepared once per connection (ingest runs it for every lead).
        let n = crate::Prepared(diesel::sql_query(
            "WITH ev AS ( \
               INSERT INTO domain_events (id, partner_id, kind, subject, extra, created_at) \
               VALUES (gen_random_uuid(), $1, $2, $3, $4::jsonb, $5) RETURNING id) \
             INSERT INTO webhook_deliveries (id, endpoint_id, partner_id, event_id, kind, status, attempts, \
               next_attempt_at, created_at) \
             SELECT gen_random_uuid(), w.id, w.partner_id, ev.id, $2, 'pending', 0, \
               $5 + make_interval(secs => CASE WHEN $6 \
                                          THEN COALESCE(w.lead_created_delay_seconds, 0) ELSE 0 END), $5 \
             FROM webhook_endpoints w, ev WHERE w.partner_id = $1 AND $2 = ANY (w.events) AND w.disabled_at IS NULL",
        )
        .bind::<Text, _>(e.partner_id().as_str())
        .bind::<Text, _>(e.kind().as_str())
        .bind::<Text, _>(e.subject())
        .bind::<Text, _>(e.extra().to_string())
        .bind::<Timestamptz, _>(now)
        .bind::<diesel::sql_types::Bool, _>(e.kind().honours_endpoint_delay()))
        .execute(conn)
        .await?;
        deliveries += n;
    }
    Ok(deliveries)
}

pub(crate) async fn partner_exists(
    conn: &mut AsyncPgConnection,
    partner: &str,
) -> Result<bool, diesel::result::Error> {
    #[derive(diesel::QueryableByName)]
    struct Found {
        #[diesel(sql_type = diesel::sql_types::Bool)]
        found: bool,
    }
    let f: Found =
        diesel::sql_query("SELECT EXISTS (SELECT 1 FROM partners WHERE partner_id = $1) AS found")
            .bind::<Text, _>(partner)
            .get_result(conn)
            .await?;
    Ok(f.found)
}
