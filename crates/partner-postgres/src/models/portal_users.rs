//! `portal_users` rows.

use diesel::prelude::*;
use partner_domain::RepoError;
use partner_domain::account::PortalUser;
use partner_domain::kernel::ids::UserId;
use partner_domain::kernel::values::{Email, PartnerId};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::corrupt;
use crate::schema::portal_users;

/// A live user as operators list it.
pub(crate) type UserRow = (Uuid, String, String, bool, OffsetDateTime);

pub(crate) fn user(
    (id, partner_id, email, admin, created_at): UserRow,
) -> Result<PortalUser, RepoError> {
    Ok(PortalUser::new(
        UserId::from_uuid(id),
        Email::parse(&email).map_err(|_| corrupt("email"))?,
        PartnerId::parse(&partner_id).map_err(|_| corrupt("partner id"))?,
        admin,
        created_at,
    ))
}

/// A new user (never deleted yet).
#[derive(Insertable)]
#[diesel(table_name = portal_users)]
pub(crate) struct NewUser<'a> {
    id: Uuid,
    partner_id: &'a str,
    email: &'a str,
    admin: bool,
    created_at: OffsetDateTime,
}

impl<'a> NewUser<'a> {
    pub(crate) fn new(u: &'a PortalUser) -> Self {
        Self {
            id: u.id().as_uuid(),
            partner_id: u.partner_id().as_str(),
            email: u.email().as_str(),
            admin: u.admin(),
            created_at: u.created_at(),
        }
    }
}
