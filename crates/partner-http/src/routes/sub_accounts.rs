//! `GET/POST/DELETE /api/v1/sub-accounts`.

use actix_web::{http::StatusCode, web};
use partner_domain::ids::SubAccountId;
use partner_domain::sub_account::{CreateSubAccountError, DeleteSubAccountError};
use partner_domain::values::{Nickname, SubId};
use serde::Deserialize;

use super::{Result, data, ok, ok_true};
use crate::AppState;
use crate::error::ApiError;
use crate::extract::{JsonBody, uuid};
use crate::middleware::Caller;

pub(super) fn resource() -> actix_web::Resource {
    super::resource("/sub-accounts")
        .route(web::get().to(list))
        .route(web::post().to(create))
        .route(web::delete().to(delete))
}

async fn list(state: web::Data<AppState>, Caller(me): Caller) -> Result {
    Ok(ok(state.sub_accounts.list(&me.partner_id).await?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CreateBody {
    sub_id: Option<String>,
    nickname: Option<String>,
}

async fn create(
    state: web::Data<AppState>,
    Caller(me): Caller,
    JsonBody(body): JsonBody<CreateBody>,
) -> Result {
    let sub_id = SubId::parse(body.sub_id.as_deref().unwrap_or_default())?;
    let nickname = Nickname::parse(body.nickname.as_deref().unwrap_or_default())?;
    match state
        .sub_accounts
        .create(&me.partner_id, sub_id, nickname)
        .await
    {
        Ok(s) => Ok(data(StatusCode::CREATED, s)),
        Err(CreateSubAccountError::Duplicate) => Err(ApiError::conflict(format!(
            "a sub-account with subId {sub_id} already exists"
        ))),
        Err(CreateSubAccountError::Repo(e)) => Err(e.into()),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct DeleteBody {
    record_id: Option<String>,
}

async fn delete(
    state: web::Data<AppState>,
    Caller(me): Caller,
    JsonBody(body): JsonBody<DeleteBody>,
) -> Result {
    let id = match body.record_id.as_deref() {
        None | Some("") => return Err(ApiError::invalid("recordId is required")),
        Some(s) => SubAccountId::from_uuid(uuid(s, "recordId")?),
    };
    match state.sub_accounts.delete(&me.partner_id, id).await {
        Ok(()) => Ok(ok_true()),
        Err(DeleteSubAccountError::NotFound) => Err(ApiError::not_found("sub-account not found")),
        Err(DeleteSubAccountError::Repo(e)) => Err(e.into()),
    }
}
