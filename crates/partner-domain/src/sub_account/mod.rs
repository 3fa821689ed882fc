//! Sub-accounts: the staffers and affiliates a partner attributes leads, orders and links to.
//!
//! ```
//! use partner_domain::kernel::ids::SubAccountId;
//! use partner_domain::kernel::values::SubId;
//! use partner_domain::sub_account::SubAccount;
//! use partner_domain::time::OffsetDateTime;
//! use partner_domain::uuid::Uuid;
//!
//! let at = OffsetDateTime::UNIX_EPOCH;
//! let id = SubAccountId::from_uuid(Uuid::from_u128(1));
//! let s = SubAccount::new(id, "ops@acme.test".into(), SubId::parse("7")?, "Ann".into(), at, at);
//! assert_eq!((s.sub_id().get(), s.nickname()), (7, "Ann"));
//! # Ok::<(), partner_domain::kernel::values::ValueError>(())
//! ```

pub mod ports;

mod service;

pub use crate::kernel::ids::SubAccountId;
pub use service::{CreateSubAccountError, DeleteSubAccountError, SubAccountService};

use time::OffsetDateTime;

use crate::kernel::values::SubId;

/// A partner's sub-account (`PortalSubAccount` of the spec). `email` is the owning partner's
/// contact email.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubAccount {
    id: SubAccountId,
    email: String,
    sub_id: SubId,
    nickname: String,
    created_at: OffsetDateTime,
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

    /// The sub-account's id.
    #[must_use]
    pub fn id(&self) -> SubAccountId {
        self.id
    }

    /// The owning partner's contact e-mail.
    #[must_use]
    pub fn email(&self) -> &str {
        &self.email
    }

    /// Its `subId`, unique within the partner.
    #[must_use]
    pub fn sub_id(&self) -> SubId {
        self.sub_id
    }

    /// Its nickname.
    #[must_use]
    pub fn nickname(&self) -> &str {
        &self.nickname
    }

    /// When it was created.
    #[must_use]
    pub fn created_at(&self) -> OffsetDateTime {
        self.created_at
    }

    /// When it was last changed.
    #[must_use]
    pub fn updated_at(&self) -> OffsetDateTime {
        self.updated_at
    }
}
