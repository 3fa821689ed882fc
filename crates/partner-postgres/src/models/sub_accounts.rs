//! `sub_accounts` rows.

use diesel::prelude::*;
use diesel::sql_types::{SmallInt, Text, Timestamptz};
use partner_domain::RepoError;
use partner_domain::kernel::ids::SubAccountId;
use partner_domain::kernel::values::SubId;
use partner_domain::sub_account::SubAccount;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::corrupt;

/// A sub-account with its partner's email, read by position from the listing and by name from
/// the insert's statement.
#[derive(Queryable, QueryableByName)]
pub(crate) struct Row {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    id: Uuid,
    #[diesel(sql_type = Text)]
    email: String,
    #[diesel(sql_type = SmallInt)]
    sub_id: i16,
    #[diesel(sql_type = Text)]
    nickname: String,
    #[diesel(sql_type = Timestamptz)]
    created_at: OffsetDateTime,
    #[diesel(sql_type = Timestamptz)]
    updated_at: OffsetDateTime,
}

impl Row {
    pub(crate) fn into_domain(self) -> Result<SubAccount, RepoError> {
        let sub_id = u16::try_from(self.sub_id)
            .ok()
            .and_then(SubId::new)
            .ok_or_else(|| corrupt("sub id"))?;
        Ok(SubAccount::new(
            SubAccountId::from_uuid(self.id),
            self.email,
            sub_id,
            self.nickname,
            self.created_at,
            self.updated_at,
        ))
    }
}
