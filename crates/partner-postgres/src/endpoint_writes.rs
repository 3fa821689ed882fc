//! A partner's change of a webhook endpoint, inside the service's transaction: the row is read
//! under its lock and written back before the commit, so concurrent changes of one endpoint (a
//! `PATCH`, a worker's health change) apply one after another (extensions.md §12).

use diesel::dsl::case_when;
use diesel::prelude::*;
use diesel::sql_types::{Nullable, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use partner_domain::RepoError;
use partner_domain::kernel::ids::EndpointId;
use partner_domain::kernel::values::PartnerId;
use partner_domain::webhook::{ENDPOINT_DISABLED, WebhookEndpoint};
use time::OffsetDateTime;

use crate::db;
use crate::models::webhook_endpoints::{Changes, EndpointRow};
use crate::schema::webhook_endpoints;
use crate::webhooks::fail_disabled;

/// The partner's endpoint, its row locked until the caller's transaction ends
/// (`EndpointWrites::lock_endpoint`).
pub(crate) async fn lock_endpoint(
    conn: &mut AsyncPgConnection,
    partner: &PartnerId,
    id: EndpointId,
) -> Result<Option<WebhookEndpoint>, RepoError> {
    let row: Option<EndpointRow> = webhook_endpoints::table
        .filter(webhook_endpoints::partner_id.eq(partner.as_str()))
        .filter(webhook_endpoints::id.eq(id.as_uuid()))
        .select(EndpointRow::as_select())
        .for_update()
        .get_result(conn)
        .await
        .optional()
        .map_err(db)?;
    row.map(EndpointRow::into_domain).transpose()
}

/// Replaces the endpoint locked by [`lock_endpoint`] (`EndpointWrites::write_endpoint`).
pub(crate) async fn write_endpoint(
    conn: &mut AsyncPgConnection,
    e: &WebhookEndpoint,
) -> QueryResult<()> {
    // Re-enabling starts the health count afresh.
    let re_enabled = e
        .disabled_at()
        .into_sql::<Nullable<Timestamptz>>()
        .is_null()
        .and(webhook_endpoints::disabled_at.is_not_null());
    let n = diesel::update(webhook_endpoints::table)
        .filter(webhook_endpoints::partner_id.eq(e.partner_id().as_str()))
        .filter(webhook_endpoints::id.eq(e.id().as_uuid()))
        .set((
            Changes::of(e),
            webhook_endpoints::failing_since.eq(case_when(
                re_enabled,
                None::<OffsetDateTime>.into_sql::<Nullable<Timestamptz>>(),
            )
            .otherwise(webhook_endpoints::failing_since)),
        ))
        .execute(conn)
        .await?;
    if n == 1 && e.disabled_at().is_some() {
        fail_disabled(conn, &[e.id().as_uuid()], ENDPOINT_DISABLED).await?;
    }
    if n == 1 {
        crate::notify::announce_endpoint_changed(conn, e.id().as_uuid()).await?;
    }
    Ok(())
}
