//! `ApiError`: the one type every failure becomes, rendered as the spec's error body
//! `{ "error": { "code", "message" } }`. 5xx bodies are generic; their cause is logged.

use std::borrow::Cow;
use std::fmt;

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpResponse, ResponseError};
use partner_domain::RepoError;
use partner_domain::account::auth::AuthError;
use partner_domain::account::portal::{ExchangeCodeError, MintCodeError};
use partner_domain::account::{CreateUserError, IssueTokenError, RotateTokenError};
use partner_domain::catalog::PutPriceError;
use partner_domain::coupon::{IssueError, RedeemRefusal, TransitionError};
use partner_domain::kernel::values::ValueError;
use partner_domain::lead::{IngestLeadError, ListLeadsError, PatchLeadError};
use partner_domain::links::{CatalogError, LinkError};
use partner_domain::order::{IngestOrderError, OrderError, RecordEventError};
use partner_domain::payout::RecordPayoutError;
use partner_domain::sub_account::{CreateSubAccountError, DeleteSubAccountError};
use partner_domain::webhook::{EndpointError, FeedError};
use serde::Serialize;

/// An error answer: status, the contract's code, and a human-readable message that never
/// echoes secrets, tokens or SQL.
#[derive(Debug, Clone)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: Cow<'static, str>,
    retry_after: Option<u64>,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<Cow<'static, str>>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    /// 400 `invalid_request`.
    pub fn invalid(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    /// 409 with code `invalid_request` (a conflict with the current state).
    pub fn conflict(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(StatusCode::CONFLICT, "invalid_request", message)
    }

    /// 409 `idempotency_key_in_use` (extensions §8.3).
    pub fn idempotency_key_in_use() -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "idempotency_key_in_use",
            "a request with this Idempotency-Key is still running; retry once it has answered",
        )
    }

    /// 422 `idempotency_key_reused` (extensions §8.3).
    pub fn idempotency_key_reused() -> Self {
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "idempotency_key_reused",
            "this Idempotency-Key was used for another request (method, path or body)",
        )
    }

    /// 422 `idempotency_key_reused` for a kept answer sealed for another token (issue 23, N10).
    pub fn idempotency_answer_sealed() -> Self {
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "idempotency_key_reused",
            "this Idempotency-Key's answer holds a secret shown once and is replayed only to the \
             token that made the request",
        )
    }

    /// 404 `not_found`.
    pub fn not_found(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 403 `forbidden`.
    pub fn forbidden(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    pub fn missing_bearer() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "missing_bearer",
            "Authorization: Bearer <token> is required",
        )
    }

    pub fn invalid_token() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "invalid_token",
            "the bearer token is invalid, revoked or expired",
        )
    }

    /// 429 `rate_limited`, with `Retry-After`.
    pub fn rate_limited(retry_after: u64) -> Self {
        let mut e = Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limited",
            "rate limit exceeded for this token and endpoint group; retry after the reset time",
        );
        e.retry_after = Some(retry_after);
        e
    }

    /// 429 `rate_limited` of the public surfaces (per client address), with `Retry-After`.
    pub fn public_rate_limited(retry_after: u64) -> Self {
        let mut e = Self::rate_limited(retry_after);
        e.message = "too many requests from this address; retry after the Retry-After delay".into();
        e
    }

    /// 503 `api_keys_unavailable`.
    pub fn keys_unavailable() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "api_keys_unavailable",
            "API keys cannot be verified in this environment",
        )
    }

    /// 503 `unavailable` with `Retry-After: 1`: the database cannot be reached right now
    /// (extensions §11). Logged as a warning: it is an outage, not a bug.
    pub fn unavailable() -> Self {
        let mut e = Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "the service is briefly unavailable; retry in a second",
        );
        e.retry_after = Some(1);
        e
    }

    /// A failure of the store: 503 `unavailable` when it cannot be reached, else 500.
    pub(crate) fn storage(e: &(dyn std::error::Error + 'static)) -> Self {
        if partner_domain::idempotency::is_key_taken(e) {
            // Not a failure: the idempotency layer answers the key's holder instead.
            Self::idempotency_key_in_use()
        } else if partner_domain::kernel::error::is_store_unavailable(e) {
            tracing::warn!(error = %e, "the database cannot be reached");
            Self::unavailable()
        } else {
            Self::internal(&e)
        }
    }

    /// 500 `internal_error`. The cause goes to the log, never to the client.
    pub fn internal(cause: &dyn fmt::Display) -> Self {
        tracing::error!(error = %cause, "internal error");
        Self::generic_internal()
    }

    pub(crate) fn generic_internal() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal_error",
            "unexpected server error; safe to retry with backoff",
        )
    }

    /// The error body an actix-generated response of `status` is rewritten to.
    pub(crate) fn for_status(status: StatusCode) -> Self {
        match status {
            StatusCode::NOT_FOUND => Self::not_found("no such resource"),
            StatusCode::METHOD_NOT_ALLOWED => Self::new(
                status,
                "invalid_request",
                "method not allowed on this resource",
            ),
            StatusCode::PAYLOAD_TOO_LARGE => Self::too_large(),
            s if s.is_server_error() => Self::generic_internal(),
            s => Self::new(s, "invalid_request", "the request is invalid"),
        }
    }

    pub(crate) fn too_large() -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request",
            "request body exceeds 1 MiB",
        )
    }

    pub fn code(&self) -> &'static str {
        self.code
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.status.as_u16(),
            self.code,
            self.message
        )
    }
}

#[derive(Serialize)]
struct Body<'a> {
    error: Inner<'a>,
}

#[derive(Serialize)]
struct Inner<'a> {
    code: &'a str,
    message: &'a str,
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse {
        let mut res = HttpResponse::build(self.status);
        // An error answer is never worth caching, and on the authenticated APIs it must not be
        // (extensions.md §7); routes with their own caching headers (the catalog) override it.
        res.insert_header((header::CACHE_CONTROL, HeaderValue::from_static("no-store")));
        if let Some(secs) = self.retry_after {
            res.insert_header(("Retry-After", secs.to_string()));
        }
        res.json(Body {
            error: Inner {
                code: self.code,
                message: &self.message,
            },
        })
    }
}

impl From<RepoError> for ApiError {
    fn from(e: RepoError) -> Self {
        Self::storage(&e)
    }
}

impl From<ValueError> for ApiError {
    fn from(e: ValueError) -> Self {
        Self::invalid(e.to_string())
    }
}

impl From<AuthError> for ApiError {
    fn from(e: AuthError) -> Self {
        match e {
            AuthError::MissingBearer => Self::missing_bearer(),
            AuthError::InvalidToken => Self::invalid_token(),
            AuthError::UnknownUser => Self::new(
                StatusCode::UNAUTHORIZED,
                "unknown_user",
                "no portal user matches this token",
            ),
            AuthError::Forbidden => Self::forbidden("the partner account is inactive"),
            AuthError::KeysUnavailable => Self::keys_unavailable(),
            AuthError::Repo(e) => Self::storage(&e),
        }
    }
}

/// The domain's errors as answers. The message is always the domain error's own text, so it is
/// written once (in the domain) and cannot drift; this table decides only status and code.
macro_rules! domain_errors {
    ($($error:ty { $($variant:pat => $status:ident),* $(,)? })*) => {$(
        impl From<$error> for ApiError {
            fn from(e: $error) -> Self {
                match &e {
                    $($variant => Self::$status(&e),)*
                }
            }
        }
    )*};
}

impl ApiError {
    fn msg_invalid(e: &dyn fmt::Display) -> Self {
        Self::invalid(e.to_string())
    }

    fn msg_not_found(e: &dyn fmt::Display) -> Self {
        Self::not_found(e.to_string())
    }

    fn msg_forbidden(e: &dyn fmt::Display) -> Self {
        Self::forbidden(e.to_string())
    }

    fn msg_conflict(e: &dyn fmt::Display) -> Self {
        Self::conflict(e.to_string())
    }

    /// 503 `api_keys_unavailable`, whose message is the contract's own.
    fn msg_unavailable(_: &dyn fmt::Display) -> Self {
        Self::keys_unavailable()
    }
}

domain_errors! {
    ListLeadsError { ListLeadsError::Repo(_) => storage, ListLeadsError::BadCursor => msg_invalid }
    IngestLeadError {
        IngestLeadError::Repo(_) => storage,
        IngestLeadError::UnknownPartner => msg_not_found,
        IngestLeadError::Invalid(_) => msg_invalid,
    }
    // The body's parse (`parse_order_id`) refuses it first, with the field's own message.
    OrderError { OrderError::SimulatedId => msg_invalid }
    PatchLeadError { PatchLeadError::Repo(_) => storage, PatchLeadError::NotFound => msg_not_found }
    IngestOrderError {
        IngestOrderError::Repo(_) => storage,
        IngestOrderError::UnknownPartner => msg_not_found,
        IngestOrderError::Conflict => msg_conflict,
    }
    RecordEventError {
        RecordEventError::Repo(_) => storage,
        RecordEventError::UnknownPartner => msg_not_found,
        RecordEventError::Invalid(_) => msg_invalid,
    }
    RecordPayoutError { RecordPayoutError::Repo(_) => storage, RecordPayoutError::UnknownPartner => msg_not_found }
    CreateUserError { CreateUserError::Repo(_) => storage, CreateUserError::UnknownPartner => msg_not_found }
    CreateSubAccountError {
        CreateSubAccountError::Repo(_) => storage,
        CreateSubAccountError::Duplicate(_) => msg_conflict,
    }
    DeleteSubAccountError { DeleteSubAccountError::Repo(_) => storage, DeleteSubAccountError::NotFound => msg_not_found }
    CatalogError { CatalogError::Repo(_) => storage, CatalogError::UnknownPartner => msg_not_found }
    LinkError {
        LinkError::Repo(_) => storage,
        LinkError::UnknownSub => msg_invalid,
    }
    PutPriceError {
        PutPriceError::Repo(_) => storage,
        PutPriceError::UnknownPartner | PutPriceError::UnknownProduct => msg_not_found,
        PutPriceError::Invalid(_) => msg_invalid,
    }
    IssueError {
        IssueError::Repo(_) => storage,
        IssueError::UnknownPartner => msg_not_found,
        IssueError::UnknownSubAccount | IssueError::ExpiryPast => msg_invalid,
        IssueError::Invalid(_) => msg_invalid,
    }
    TransitionError {
        TransitionError::Repo(_) => storage,
        TransitionError::NotFound => msg_not_found,
        TransitionError::Refused(RedeemRefusal::NotActive(_)) => msg_conflict,
        TransitionError::Refused(RedeemRefusal::Mismatch) => msg_invalid,
    }
    IssueTokenError {
        IssueTokenError::Repo(_) => storage,
        IssueTokenError::KeysUnavailable => msg_unavailable,
        IssueTokenError::UserNotFound => msg_not_found,
        IssueTokenError::ExpiryNotInFuture => msg_invalid,
    }
    RotateTokenError {
        RotateTokenError::Repo(_) => storage,
        RotateTokenError::KeysUnavailable => msg_unavailable,
        RotateTokenError::NotFound => msg_not_found,
        RotateTokenError::NotLive => msg_conflict,
    }
    MintCodeError {
        MintCodeError::Repo(_) => storage,
        MintCodeError::KeysUnavailable => msg_unavailable,
        MintCodeError::FromPortal => msg_forbidden,
    }
    ExchangeCodeError {
        ExchangeCodeError::Repo(_) => storage,
        ExchangeCodeError::KeysUnavailable => msg_unavailable,
        ExchangeCodeError::InvalidCode => msg_invalid,
    }
}

/// Beside the table: over the action budget carries its own `Retry-After`.
impl From<FeedError> for ApiError {
    fn from(e: FeedError) -> Self {
        match &e {
            FeedError::Repo(_) => Self::storage(&e),
            FeedError::NotFound => Self::msg_not_found(&e),
            FeedError::BadCursor => Self::msg_invalid(&e),
            FeedError::CursorExpired => {
                Self::new(StatusCode::GONE, "cursor_expired", e.to_string())
            }
        }
    }
}

impl From<EndpointError> for ApiError {
    fn from(e: EndpointError) -> Self {
        match &e {
            EndpointError::Repo(_) => Self::storage(&e),
            EndpointError::NotFound
            | EndpointError::UnknownPartner
            | EndpointError::DeliveryNotFound => Self::msg_not_found(&e),
            EndpointError::TooMany
            | EndpointError::InternalAddress
            | EndpointError::BadCursor
            | EndpointError::Disabled
            | EndpointError::BadSince => Self::msg_invalid(&e),
            EndpointError::OverBudget { retry_after } => {
                // The bound of test, resend and recover (extensions §12) is a 429 of the
                // *webhook endpoints* group too, counted with the budgets' 429s.
                metrics::counter!(
                    "rate_limit_rejections_total",
                    "group" => partner_domain::rate_limit::Group::WebhookEndpoints.as_str()
                )
                .increment(1);
                let mut a = Self::rate_limited(*retry_after);
                a.message = e.to_string().into();
                a
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_body_is_no_store() {
        for e in [
            ApiError::generic_internal(),
            ApiError::invalid("x"),
            ApiError::rate_limited(3),
            ApiError::for_status(StatusCode::METHOD_NOT_ALLOWED),
        ] {
            let res = e.error_response();
            assert_eq!(
                res.headers()
                    .get(header::CACHE_CONTROL)
                    .map(HeaderValue::as_bytes),
                Some(&b"no-store"[..]),
                "{e}"
            );
        }
    }
}
