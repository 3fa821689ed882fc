//! The stored times of each partner's admitted webhook actions (`webhook_action_budgets`), read
//! under a row lock inside the caller's transaction so every instance shares one budget. Which
//! call is admitted is the domain's rule (`ActionBudget`); this module only stores.

use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use partner_domain::kernel::values::PartnerId;
use time::OffsetDateTime;

use crate::schema::webhook_action_budgets;

/// The partner's stored call times, its row locked until the transaction ends (created empty on
/// the first call: a concurrent first call waits on the insert, then on the lock).
pub(crate) async fn lock(
    conn: &mut AsyncPgConnection,
    partner: &PartnerId,
) -> QueryResult<Vec<OffsetDateTime>> {
    diesel::insert_into(webhook_action_budgets::table)
        .values((
            webhook_action_budgets::partner_id.eq(partner.as_str()),
            webhook_action_budgets::calls.eq(Vec::<Option<OffsetDateTime>>::new()),
        ))
        .on_conflict_do_nothing()
        .execute(conn)
        .await?;
    let calls: Vec<Option<OffsetDateTime>> = webhook_action_budgets::table
        .find(partner.as_str())
        .select(webhook_action_budgets::calls)
        .for_update()
        .get_result(conn)
        .await?;
    Ok(calls.into_iter().flatten().collect())
}

/// Replaces the partner's stored call times.
pub(crate) async fn store(
    conn: &mut AsyncPgConnection,
    partner: &PartnerId,
    calls: &[OffsetDateTime],
) -> QueryResult<()> {
    let calls: Vec<Option<OffsetDateTime>> = calls.iter().copied().map(Some).collect();
    diesel::update(webhook_action_budgets::table.find(partner.as_str()))
        .set(webhook_action_budgets::calls.eq(calls))
        .execute(conn)
        .await?;
    Ok(())
}
