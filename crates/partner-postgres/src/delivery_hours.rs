//! The last 24 hours of a partner's deliveries by hour and status (the portal's chart).

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Bytea, Int4, Nullable, Text, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use partner_domain::RepoError;
use partner_domain::account::auth::TokenKey;
use partner_domain::kernel::ids::EndpointId;
use partner_domain::webhook::DeliveryStatus;
use partner_domain::webhook::hourly::StatusCount;
use time::OffsetDateTime;

use crate::tokens::TokenPartner;
use crate::{corrupt, db};

#[derive(QueryableByName)]
struct Row {
    #[diesel(sql_type = Int4)]
    hour: i32,
    #[diesel(sql_type = Text)]
    status: String,
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// The counts, with the partner taken from the token in SQL (to be pipelined with the token
/// lookup). Raw: the hour is the whole hours since `$3` (`floor(epoch / 3600)`), which does not
/// depend on the session's time zone as `date_trunc` would, and the DSL has no `extract`. The
/// range on `created_at` after the partner is `webhook_deliveries_partner_idx`'s order.
pub(crate) async fn for_token(
    mut conn: &AsyncPgConnection,
    key: TokenKey,
    endpoint: Option<EndpointId>,
    since: OffsetDateTime,
) -> Result<Vec<StatusCount>, RepoError> {
    let partner = TokenPartner::of(key);
    let (hash, now) = partner.binds();
    let rows: Vec<Row> = crate::Prepared(
        diesel::sql_query(format!(
            "SELECT floor(extract(epoch FROM created_at - $3) / 3600)::int4 AS hour, status, \
               count(*) AS n \
             FROM webhook_deliveries \
             WHERE partner_id = {} AND created_at >= $3 \
               AND ($4::uuid IS NULL OR endpoint_id = $4) \
             GROUP BY 1, 2",
            TokenPartner::sql(1, 2)
        ))
        .bind::<Bytea, _>(hash)
        .bind::<Timestamptz, _>(now)
        .bind::<Timestamptz, _>(since)
        .bind::<Nullable<diesel::sql_types::Uuid>, _>(endpoint.map(|e| e.as_uuid())),
    )
    .load(&mut conn)
    .await
    .map_err(db)?;
    rows.into_iter()
        .map(|r| {
            Ok(StatusCount {
                hour: u8::try_from(r.hour).map_err(|_| corrupt("delivery hour"))?,
                status: DeliveryStatus::parse(&r.status)
                    .ok_or_else(|| corrupt("delivery status"))?,
                count: u32::try_from(r.n).unwrap_or(u32::MAX),
            })
        })
        .collect()
}
