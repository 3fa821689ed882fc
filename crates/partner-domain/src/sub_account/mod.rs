//! Sub-accounts: the staffers and affiliates a partner attributes leads, orders and links to.

pub mod ports;

mod service;

pub use crate::kernel::ids::SubAccountId;
pub use service::{CreateSubAccountError, DeleteSubAccountError, SubAccountService};

use serde::Serialize;
use time::OffsetDateTime;

use crate::kernel::values::SubId;
use crate::kernel::wire;

/// `PortalSubAccount` of the spec. `email` is the owning partner's contact email.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SubAccount {
    id: SubAccountId,
    email: String,
    sub_id: SubId,
    nickname: String,
    #[serde(serialize_with = "wire::ts")]
    created_at: OffsetDateTime,
    #[serde(serialize_with = "wire::ts")]
    updated_at: OffsetDateTime,
}

impl SubAccount {
    /// A sub-account as stored. The email and nickname are the stored text, not re-checked: a
    /// stricter rule later must not make existing rows unreadable.
    pub fn new(
        id: SubAccountId,
        email: String,
        sub_id: SubId,
        nickname: String,
        created_at: OffsetDateTime,
        updated_at: OffsetDateTime,
    ) -> Self {
        Self {
            id,
            email,
            sub_id,
            nickname,
            created_at,
            updated_at,
        }
    }

    #[must_use]
    pub fn sub_id(&self) -> SubId {
        self.sub_id
    }
}
