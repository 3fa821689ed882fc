//! Operator API, "Accounts and tokens": partners, Care Services feature flags, portal users
//! and their tokens. Mounted under `/internal/v1` behind the internal guard.

use std::collections::BTreeMap;

use actix_web::{http::StatusCode, web};
use partner_domain::account::{
    CareServicesAccess, CreateUserError, IssueTokenError, NotFoundOr, PartnerSettings,
    RotateTokenError,
};
use partner_domain::values::{CareService, Email, Lang, PartnerId};
use partner_domain::wire::parse_timestamp;
use serde::Deserialize;

use super::{Result, data, ok, ok_true, resource};
use crate::AppState;
use crate::error::ApiError;
use crate::extract::{JsonBody, OptionalJsonBody, uuid};

pub(super) fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        resource("/partners/{partner_id}")
            .route(web::put().to(put_partner))
            .route(web::get().to(get_partner)),
    )
    .service(
        resource("/care-services/feature-flags")
            .route(web::put().to(put_flags))
            .route(web::get().to(get_flags)),
    )
    .service(resource("/users").route(web::post().to(create_user)))
    .service(resource("/users/{id}").route(web::delete().to(delete_user)))
    .service(
        resource("/users/{id}/tokens")
            .route(web::post().to(create_token))
            .route(web::get().to(list_tokens)),
    )
    .service(resource("/tokens/{id}/rotate").route(web::post().to(rotate_token)))
    .service(resource("/tokens/{id}").route(web::delete().to(revoke_token)));
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CareServicesBody {
    subscription_active: bool,
    manual_override: bool,
    yearly_bundle: bool,
    services: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PartnerBody {
    name: String,
    email: String,
    active: bool,
    dna_access: bool,
    headless_links: bool,
    default_lang: String,
    enabled_langs: Vec<String>,
    care_services: CareServicesBody,
}

fn lang(s: &str, field: &str) -> std::result::Result<Lang, ApiError> {
    Lang::parse(s).ok_or_else(|| ApiError::invalid(format!("{field} entries must be en or es")))
}

impl PartnerBody {
    fn into_settings(self) -> std::result::Result<PartnerSettings, ApiError> {
        let services = self
            .care_services
            .services
            .iter()
            .map(|s| {
                CareService::parse(s).ok_or_else(|| {
                    ApiError::invalid(
                        "careServices.services entries must be primary-care, urgent-care, mental-health, dermatology or veterinary-care",
                    )
                })
            })
            .collect::<std::result::Result<_, _>>()?;
        let settings = PartnerSettings {
            name: self.name,
            email: Email::parse(&self.email)?,
            active: self.active,
            dna_access: self.dna_access,
            headless_links: self.headless_links,
            default_lang: lang(&self.default_lang, "defaultLang")?,
            enabled_langs: self
                .enabled_langs
                .iter()
                .map(|l| lang(l, "enabledLangs"))
                .collect::<std::result::Result<_, _>>()?,
            care_services: CareServicesAccess {
                subscription_active: self.care_services.subscription_active,
                manual_override: self.care_services.manual_override,
                yearly_bundle: self.care_services.yearly_bundle,
                services,
            },
        };
        Ok(settings.checked()?)
    }
}

async fn put_partner(
    state: web::Data<AppState>,
    path: web::Path<String>,
    JsonBody(body): JsonBody<PartnerBody>,
) -> Result {
    let id = PartnerId::parse(&path)?;
    let settings = body.into_settings()?;
    let (partner, created) = state.accounts.put_partner(&id, settings).await?;
    Ok(data(
        if created {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        },
        partner,
    ))
}

async fn get_partner(state: web::Data<AppState>, path: web::Path<String>) -> Result {
    let id = PartnerId::parse(&path)?;
    match state.accounts.partner(&id).await {
        Ok(p) => Ok(ok(p)),
        Err(NotFoundOr::NotFound) => Err(ApiError::not_found("no partner with that partnerId")),
        Err(NotFoundOr::Repo(e)) => Err(e.into()),
    }
}

async fn put_flags(
    state: web::Data<AppState>,
    JsonBody(body): JsonBody<BTreeMap<String, bool>>,
) -> Result {
    let changes = body
        .into_iter()
        .map(|(k, v)| {
            CareService::parse(&k).map(|s| (s, v)).ok_or_else(|| {
                ApiError::invalid("feature flag keys must be Care Services service names")
            })
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(ok(state.accounts.set_care_flags(&changes).await?))
}

async fn get_flags(state: web::Data<AppState>) -> Result {
    Ok(ok(state.accounts.care_flags().await?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct UserBody {
    email: String,
    partner_id: String,
    admin: bool,
}

async fn create_user(state: web::Data<AppState>, JsonBody(body): JsonBody<UserBody>) -> Result {
    let email = Email::parse(&body.email)?;
    let partner = PartnerId::parse(&body.partner_id)?;
    match state.accounts.create_user(email, partner, body.admin).await {
        Ok(u) => Ok(data(StatusCode::CREATED, u)),
        Err(CreateUserError::UnknownPartner) => {
            Err(ApiError::not_found("no partner with that partnerId"))
        }
        Err(CreateUserError::Repo(e)) => Err(e.into()),
    }
}

fn not_found_or(e: NotFoundOr, what: &'static str) -> ApiError {
    match e {
        NotFoundOr::NotFound => ApiError::not_found(what),
        NotFoundOr::Repo(e) => e.into(),
    }
}

async fn delete_user(state: web::Data<AppState>, path: web::Path<String>) -> Result {
    let id = uuid(&path, "user id")?;
    state
        .accounts
        .delete_user(id)
        .await
        .map_err(|e| not_found_or(e, "no such user"))?;
    Ok(ok_true())
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TokenBody {
    expires_at: Option<String>,
}

async fn create_token(
    state: web::Data<AppState>,
    path: web::Path<String>,
    OptionalJsonBody(body): OptionalJsonBody<TokenBody>,
) -> Result {
    let user = uuid(&path, "user id")?;
    let expires_at = body
        .expires_at
        .map(|s| {
            parse_timestamp(&s)
                .ok_or_else(|| ApiError::invalid("expiresAt must be an RFC 3339 timestamp"))
        })
        .transpose()?;
    match state.accounts.issue_token(user, expires_at).await {
        Ok(t) => Ok(data(StatusCode::CREATED, t)),
        Err(IssueTokenError::UserNotFound) => Err(ApiError::not_found("no such user")),
        Err(IssueTokenError::ExpiryNotInFuture) => {
            Err(ApiError::invalid("expiresAt must be in the future"))
        }
        Err(IssueTokenError::KeysUnavailable) => Err(ApiError::keys_unavailable()),
        Err(IssueTokenError::Repo(e)) => Err(e.into()),
    }
}

async fn list_tokens(state: web::Data<AppState>, path: web::Path<String>) -> Result {
    let user = uuid(&path, "user id")?;
    let tokens = state
        .accounts
        .tokens(user)
        .await
        .map_err(|e| not_found_or(e, "no such user"))?;
    Ok(ok(tokens))
}

async fn rotate_token(state: web::Data<AppState>, path: web::Path<String>) -> Result {
    let id = uuid(&path, "token id")?;
    match state.accounts.rotate_token(id).await {
        Ok(t) => Ok(data(StatusCode::CREATED, t)),
        Err(RotateTokenError::NotFound) => Err(ApiError::not_found("no such token")),
        Err(RotateTokenError::NotLive) => Err(ApiError::conflict(
            "the token is revoked or expired; create a new one instead",
        )),
        Err(RotateTokenError::KeysUnavailable) => Err(ApiError::keys_unavailable()),
        Err(RotateTokenError::Repo(e)) => Err(e.into()),
    }
}

async fn revoke_token(state: web::Data<AppState>, path: web::Path<String>) -> Result {
    let id = uuid(&path, "token id")?;
    state
        .accounts
        .revoke_token(id)
        .await
        .map_err(|e| not_found_or(e, "no such token"))?;
    Ok(ok_true())
}
