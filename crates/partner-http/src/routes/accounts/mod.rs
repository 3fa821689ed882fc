//! Operator API, "Accounts and tokens": partners, Care Services feature flags, portal users
//! and their tokens. Mounted under `/internal/v1` behind the internal guard.

use std::collections::BTreeMap;

use actix_web::{HttpResponse, http::StatusCode, web};
use partner_domain::account::{
    CareServicesAccess, NotFoundOr, PartnerSettings, PartnerSettingsInput,
};
use partner_domain::kernel::ids::{TokenId, UserId};
use partner_domain::kernel::values::{CareService, Email, Lang, PartnerId, ValueError};
use partner_domain::kernel::wire::parse_timestamp_field;
use serde::Deserialize;

use super::{Result, data, ok, ok_true};
use crate::AppState;
use crate::error::ApiError;
use crate::extract::{JsonBody, OptionalJsonBody, uuid};

mod out;

use out::ApiTokenOut;
pub(crate) use out::{ApiTokenList, CareFlagsOut, IssuedTokenOut, PartnerOut, PortalUserOut};

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = CareServicesAccessInput)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct CareServicesBody {
    subscription_active: bool,
    manual_override: bool,
    yearly_bundle: bool,
    services: Vec<String>,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = PartnerSettings)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct PartnerBody {
    name: String,
    email: String,
    active: bool,
    dna_access: bool,
    headless_links: bool,
    default_lang: String,
    enabled_langs: Vec<String>,
    care_services: CareServicesBody,
}

impl TryFrom<PartnerBody> for PartnerSettings {
    type Error = ValueError;

    /// Every refusal is the domain's ([`PartnerSettings::parse`] and the values' parsers).
    fn try_from(b: PartnerBody) -> std::result::Result<Self, ValueError> {
        let services = b
            .care_services
            .services
            .iter()
            .map(|s| CareService::parse_field(s, "careServices.services entries"))
            .collect::<std::result::Result<_, _>>()?;
        PartnerSettings::parse(PartnerSettingsInput {
            name: b.name,
            email: Email::parse(&b.email)?,
            active: b.active,
            dna_access: b.dna_access,
            headless_links: b.headless_links,
            // "entries" though it is one value: the text this field has always answered with.
            default_lang: Lang::parse_field(&b.default_lang, "defaultLang entries")?,
            enabled_langs: b
                .enabled_langs
                .iter()
                .map(|l| Lang::parse_field(l, "enabledLangs entries"))
                .collect::<std::result::Result<_, _>>()?,
            care_services: CareServicesAccess {
                subscription_active: b.care_services.subscription_active,
                manual_override: b.care_services.manual_override,
                yearly_bundle: b.care_services.yearly_bundle,
                services,
            },
        })
    }
}

#[utoipa::path(
    put, path = "/internal/v1/partners/{partner_id}", tag = "accounts", request_body = PartnerBody,
    params(
        ("partner_id" = String, Path, description = "The partner's id"),
    ),
    responses(
        (status = 200, description = "Updated", body = crate::routes::schemas::PartnerData),
        (status = 201, description = "Created", body = crate::routes::schemas::PartnerData),
        (status = 400, description = "A field is invalid", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn put_partner(
    state: web::Data<AppState>,
    path: web::Path<String>,
    JsonBody(body): JsonBody<PartnerBody>,
) -> Result {
    let id = PartnerId::parse(&path)?;
    let settings = PartnerSettings::try_from(body)?;
    let (partner, created) = state.accounts.put_partner(&id, settings).await?;
    Ok(data(
        if created {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        },
        PartnerOut::from(&partner),
    ))
}

#[utoipa::path(
    get, path = "/internal/v1/partners/{partner_id}", tag = "accounts",
    params(
        ("partner_id" = String, Path, description = "The partner's id"),
    ),
    responses(
        (status = 200, description = "The partner", body = crate::routes::schemas::PartnerData),
        (status = 400, description = "`partner_id` is malformed", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No partner with that `partnerId`", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn get_partner(state: web::Data<AppState>, path: web::Path<String>) -> Result {
    let id = PartnerId::parse(&path)?;
    match state.accounts.partner(&id).await {
        Ok(p) => Ok(ok(PartnerOut::from(&p))),
        Err(NotFoundOr::NotFound) => Err(ApiError::not_found("no partner with that partnerId")),
        Err(NotFoundOr::Repo(e)) => Err(e.into()),
    }
}

#[utoipa::path(
    put, path = "/internal/v1/care-services/feature-flags", tag = "accounts", request_body = crate::routes::schemas::CareFlagsChange,
    responses(
        (status = 200, description = "All switches after the change", body = crate::routes::schemas::CareFlagsData),
        (status = 400, description = "A key is not a service name", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn put_flags(
    state: web::Data<AppState>,
    JsonBody(body): JsonBody<BTreeMap<String, bool>>,
) -> Result {
    let changes = body
        .into_iter()
        .map(|(k, v)| CareService::parse_flag_key(&k).map(|s| (s, v)))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let flags = state.accounts.set_care_flags(&changes).await?;
    Ok(ok(CareFlagsOut::from(&flags)))
}

#[utoipa::path(
    get, path = "/internal/v1/care-services/feature-flags", tag = "accounts",
    responses(
        (status = 200, description = "The switches", body = crate::routes::schemas::CareFlagsData),
    )
)]
pub(super) async fn get_flags(state: web::Data<AppState>) -> Result {
    Ok(ok(CareFlagsOut::from(&state.accounts.care_flags().await?)))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = PortalUserCreate)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct UserBody {
    email: String,
    partner_id: String,
    admin: bool,
}

#[utoipa::path(
    post, path = "/internal/v1/users", tag = "accounts", request_body = UserBody,
    responses(
        (status = 201, description = "Created", body = crate::routes::schemas::PortalUserData),
        (status = 400, description = "A field is invalid", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No partner with that `partnerId`", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn create_user(
    state: web::Data<AppState>,
    JsonBody(body): JsonBody<UserBody>,
) -> Result {
    let email = Email::parse(&body.email)?;
    let partner = PartnerId::parse(&body.partner_id)?;
    let user = state
        .accounts
        .create_user(email, partner, body.admin)
        .await?;
    Ok(data(StatusCode::CREATED, PortalUserOut::from(&user)))
}

fn not_found_or(e: NotFoundOr, what: &'static str) -> ApiError {
    match e {
        NotFoundOr::NotFound => ApiError::not_found(what),
        NotFoundOr::Repo(e) => e.into(),
    }
}

#[utoipa::path(
    delete, path = "/internal/v1/users/{id}", tag = "accounts",
    params(
        ("id" = String, Path, description = "The user's id (a UUID)", format = Uuid),
    ),
    responses(
        (status = 200, description = "Deleted, with its tokens", body = crate::routes::schemas::OkData),
        (status = 400, description = "`id` is not a UUID", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No such user", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn delete_user(state: web::Data<AppState>, path: web::Path<String>) -> Result {
    let id = UserId::from_uuid(uuid(&path, "user id")?);
    state
        .accounts
        .delete_user(id)
        .await
        .map_err(|e| not_found_or(e, "no such user"))?;
    Ok(ok_true())
}

#[derive(Deserialize, Default, utoipa::ToSchema)]
#[schema(as = TokenCreate)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct TokenBody {
    expires_at: Option<String>,
}

#[utoipa::path(
    post, path = "/internal/v1/users/{id}/tokens", tag = "accounts", request_body = inline(Option<TokenBody>),
    params(
        ("id" = String, Path, description = "The user's id (a UUID)", format = Uuid),
    ),
    responses(
        (status = 201, description = "The token; its text is shown this once", body = crate::routes::schemas::IssuedTokenData),
        (status = 400, description = "`expiresAt` is invalid or not in the future", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No such user", body = crate::routes::schemas::ErrorBody),
        (status = 503, description = "API keys cannot be issued in this environment", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn create_token(
    state: web::Data<AppState>,
    path: web::Path<String>,
    OptionalJsonBody(body): OptionalJsonBody<TokenBody>,
) -> Result {
    let user = UserId::from_uuid(uuid(&path, "user id")?);
    let expires_at = body
        .expires_at
        .map(|s| parse_timestamp_field(&s, "expiresAt"))
        .transpose()?;
    let token = state.accounts.issue_token(user, expires_at).await?;
    Ok(crate::idempotency::shown_once(data(
        StatusCode::CREATED,
        IssuedTokenOut::from(&token),
    )))
}

#[utoipa::path(
    get, path = "/internal/v1/users/{id}/tokens", tag = "accounts",
    params(
        ("id" = String, Path, description = "The user's id (a UUID)", format = Uuid),
    ),
    responses(
        (status = 200, description = "The user's tokens, never their text", body = ApiTokenList),
        (status = 400, description = "`id` is not a UUID", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No such user", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn list_tokens(state: web::Data<AppState>, path: web::Path<String>) -> Result {
    let user = UserId::from_uuid(uuid(&path, "user id")?);
    let tokens = state
        .accounts
        .tokens(user)
        .await
        .map_err(|e| not_found_or(e, "no such user"))?;
    Ok(HttpResponse::Ok().json(ApiTokenList {
        data: tokens.iter().map(ApiTokenOut::from).collect(),
    }))
}

#[utoipa::path(
    post, path = "/internal/v1/tokens/{id}/rotate", tag = "accounts",
    params(
        ("id" = String, Path, description = "The token's id (a UUID)", format = Uuid),
    ),
    responses(
        (status = 201, description = "The replacement token; its text is shown this once", body = crate::routes::schemas::IssuedTokenData),
        (status = 400, description = "`id` is not a UUID", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No such token", body = crate::routes::schemas::ErrorBody),
        (status = 409, description = "The token is revoked or expired", body = crate::routes::schemas::ErrorBody),
        (status = 503, description = "API keys cannot be issued in this environment", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn rotate_token(state: web::Data<AppState>, path: web::Path<String>) -> Result {
    let id = TokenId::from_uuid(uuid(&path, "token id")?);
    let token = state.accounts.rotate_token(id).await?;
    Ok(crate::idempotency::shown_once(data(
        StatusCode::CREATED,
        IssuedTokenOut::from(&token),
    )))
}

#[utoipa::path(
    delete, path = "/internal/v1/tokens/{id}", tag = "accounts",
    params(
        ("id" = String, Path, description = "The token's id (a UUID)", format = Uuid),
    ),
    responses(
        (status = 200, description = "Revoked", body = crate::routes::schemas::OkData),
        (status = 400, description = "`id` is not a UUID", body = crate::routes::schemas::ErrorBody),
        (status = 404, description = "No such token", body = crate::routes::schemas::ErrorBody),
    )
)]
pub(super) async fn revoke_token(state: web::Data<AppState>, path: web::Path<String>) -> Result {
    let id = TokenId::from_uuid(uuid(&path, "token id")?);
    state
        .accounts
        .revoke_token(id)
        .await
        .map_err(|e| not_found_or(e, "no such token"))?;
    Ok(ok_true())
}
