//! `GET/POST/DELETE /api/v1/sub-accounts`.

use actix_web::{HttpRequest, HttpResponse, http::StatusCode, web};
use partner_domain::kernel::ids::{SubAccountId, parse_uuid};
use partner_domain::kernel::values::{Nickname, SubId, ValueError};
use partner_domain::kernel::wire;
use partner_domain::sub_account::SubAccount;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::{Result, data, ok, ok_true};
use crate::AppState;
use crate::error::ApiError;
use crate::extract::{JsonBody, uuid};
use crate::middleware::{Caller, one_trip};
use crate::ratelimit::Group;

/// `PortalSubAccount` of the spec. `email` is the owning partner's contact email.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = SubAccount, example = json!({
    "id": "9f3c1e2d-4b5a-4c6d-8e7f-0a1b2c3d4e5f", "email": "partners@demo-clinic.test",
    "subId": "1", "nickname": "Front desk",
    "createdAt": "2026-11-21T10:00:00.000Z", "updatedAt": "2026-11-21T10:00:00.000Z"
}))]
pub(crate) struct SubAccountOut<'a> {
    #[schema(value_type = String, format = Uuid)]
    id: SubAccountId,
    email: &'a str,
    #[schema(value_type = String, pattern = "^[0-9]{1,3}$")]
    sub_id: SubId,
    nickname: &'a str,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String, format = DateTime)]
    created_at: OffsetDateTime,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String, format = DateTime)]
    updated_at: OffsetDateTime,
}

impl<'a> From<&'a SubAccount> for SubAccountOut<'a> {
    fn from(s: &'a SubAccount) -> Self {
        Self {
            id: s.id(),
            email: s.email(),
            sub_id: s.sub_id(),
            nickname: s.nickname(),
            created_at: s.created_at(),
            updated_at: s.updated_at(),
        }
    }
}

#[utoipa::path(
    get, path = "/api/v1/sub-accounts", tag = "sub-accounts",
    responses((status = 200, description = "The partner's sub-accounts", body = crate::routes::schemas::SubAccountList))
)]
pub(super) async fn list(req: HttpRequest) -> HttpResponse {
    // One round trip: the list is read with the token's record ([`one_trip`] stands in for the
    // partner guard and keeps its answers).
    one_trip(
        &req,
        Group::SubAccounts,
        None,
        async |st, token| Ok(st.sub_accounts.list_for_token(st.auth.key(&token)).await?),
        |_, _, subs| Ok(ok(subs.iter().map(SubAccountOut::from).collect::<Vec<_>>())),
    )
    .await
}

/// One sub-account by id (extensions §8.2).
#[utoipa::path(
    get, path = "/api/v1/sub-accounts/{id}", tag = "sub-accounts",
    params(("id" = String, Path, description = "The sub-account's `id` (a UUID)", format = Uuid)),
    responses(
        (status = 200, description = "The sub-account, as the listing shows it", body = crate::routes::schemas::SubAccountData),
        (status = 400, description = "`id` is not a UUID", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "The partner has no sub-account with that id", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn one(req: HttpRequest, path: web::Path<String>) -> HttpResponse {
    // One round trip, as the listing; a malformed id answers 400 after authentication.
    let id = match uuid(&path, "id") {
        Ok(id) => SubAccountId::from_uuid(id),
        Err(e) => return super::refused_after_admission(&req, Group::SubAccounts, e).await,
    };
    one_trip(
        &req,
        Group::SubAccounts,
        None,
        async move |st, token| {
            Ok(st
                .sub_accounts
                .find_for_token(st.auth.key(&token), id)
                .await?)
        },
        |_, _, sub| match sub {
            Some(s) => Ok(ok(SubAccountOut::from(&s))),
            None => Err(ApiError::not_found("no such sub-account")),
        },
    )
    .await
}

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = SubAccountCreate)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct CreateBody {
    /// 1-250, as a string.
    #[schema(
        required = true,
        nullable = false,
        pattern = "^([1-9]|[1-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|250)$"
    )]
    sub_id: Option<String>,
    /// 1-64 characters after trimming, no control characters.
    #[schema(
        required = true,
        nullable = false,
        min_length = 1,
        max_length = 64,
        pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
    )]
    nickname: Option<String>,
}

#[utoipa::path(
    post, path = "/api/v1/sub-accounts", tag = "sub-accounts", request_body = CreateBody,
    responses(
        (status = 201, description = "Created", body = crate::routes::schemas::SubAccountData),
        (status = 400, description = "Invalid `subId` or `nickname`", body = crate::routes::schemas::ErrorBody),
        (status = 409, description = "That `subId` exists already", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn create(
    state: web::Data<AppState>,
    Caller(me): Caller,
    JsonBody(body): JsonBody<CreateBody>,
) -> Result {
    let (sub_id, nickname) = body.try_into()?;
    let created = state
        .sub_accounts
        .create(me.partner_id(), sub_id, nickname)
        .await?;
    Ok(data(StatusCode::CREATED, SubAccountOut::from(&created)))
}

impl TryFrom<CreateBody> for (SubId, Nickname) {
    type Error = ValueError;

    /// An absent field is parsed as empty text, so it answers as the empty value does.
    fn try_from(b: CreateBody) -> std::result::Result<Self, ValueError> {
        Ok((
            SubId::parse(b.sub_id.as_deref().unwrap_or_default())?,
            Nickname::parse(b.nickname.as_deref().unwrap_or_default())?,
        ))
    }
}

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = SubAccountDelete)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct DeleteBody {
    /// The sub-account's `id`.
    #[schema(required = true, nullable = false, format = Uuid)]
    record_id: Option<String>,
}

#[utoipa::path(
    delete, path = "/api/v1/sub-accounts", tag = "sub-accounts", request_body = DeleteBody,
    responses(
        (status = 200, description = "Deleted", body = crate::routes::schemas::OkData),
        (status = 400, description = "`recordId` is missing or not a UUID", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No such sub-account", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn delete(
    state: web::Data<AppState>,
    Caller(me): Caller,
    JsonBody(body): JsonBody<DeleteBody>,
) -> Result {
    let id = SubAccountId::try_from(body)?;
    state.sub_accounts.delete(me.partner_id(), id).await?;
    Ok(ok_true())
}

impl TryFrom<DeleteBody> for SubAccountId {
    type Error = ValueError;

    /// `recordId` absent or empty is missing; otherwise a UUID.
    fn try_from(b: DeleteBody) -> std::result::Result<Self, ValueError> {
        match b.record_id.as_deref() {
            None | Some("") => Err(ValueError::Missing("recordId")),
            Some(s) => Ok(SubAccountId::from_uuid(parse_uuid(s, "recordId")?)),
        }
    }
}
