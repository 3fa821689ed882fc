//! Middleware: error-body normalisation and panic capture, the request-id header, `no-store` on
//! the authenticated APIs, the partner API's authentication + rate-limit guard, and the operator
//! API's guard.

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::Method;
use actix_web::http::header::{self, HeaderValue};
use actix_web::middleware::Next;
use actix_web::{Error, HttpMessage, HttpRequest, HttpResponse, ResponseError, web};
use futures_util::FutureExt;
use partner_domain::account::auth::{AuthError, Authenticated, Presented, Principal, Sealed};
use partner_domain::idempotency::Caller as IdempotencyCaller;
use partner_domain::kernel::compare::constant_time_eq;
use partner_domain::rate_limit::Decision;

use crate::AppState;
use crate::error::ApiError;
use crate::ratelimit::Group;

/// Turns every non-JSON error response (actix's own 404/405/413/400, errors raised outside
/// handlers) into the contract's error body, and a panic into a 500 `internal_error`.
pub async fn normalize_errors(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    // An `Err` is rendered by actix through the error's own `error_response`, so answering
    // with `Err(ApiError)` needs no handle on the (uniquely owned, routed) request.
    let res = match std::panic::AssertUnwindSafe(next.call(req))
        .catch_unwind()
        .await
    {
        Ok(Ok(res)) => res.map_into_boxed_body(),
        Ok(Err(err)) => {
            let status = err.as_response_error().status_code();
            return Err(ApiError::for_status(status).into());
        }
        Err(_) => {
            tracing::error!("handler panicked");
            return Err(ApiError::generic_internal().into());
        }
    };
    let mut res = res;
    let status = res.status();
    if status == actix_web::http::StatusCode::METHOD_NOT_ALLOWED
        && !res.headers().contains_key(header::ALLOW)
    {
        // RFC 9110 §15.5.6: a 405 names the methods the resource supports.
        let allow = crate::routes::allowed_methods(res.request().match_pattern().as_deref());
        if let Ok(v) = header::HeaderValue::from_str(&allow) {
            res.headers_mut().insert(header::ALLOW, v);
        }
    }
    let is_json = res
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !status.is_client_error() && !status.is_server_error() || is_json {
        return Ok(res);
    }
    let (req, old) = res.into_parts();
    let mut fresh = ApiError::for_status(status).error_response();
    for (name, value) in old.headers() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            fresh.headers_mut().insert(name.clone(), value.clone());
        }
    }
    Ok(ServiceResponse::new(req, fresh))
}

/// Counts and times every request by route template (never the raw path: its segments carry
/// ids), and writes one log line per request with its id, route, status and duration (never
/// the query string, which may carry a token or a partner's data).
pub async fn observe(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let started = std::time::Instant::now();
    let method = match *req.method() {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    };
    let request_id = req
        .extensions()
        .get::<tracing_actix_web::RequestId>()
        .map(|id| id.to_string())
        .unwrap_or_default();
    let res = next.call(req).await;
    let (status, route) = match &res {
        Ok(r) => (r.status(), r.request().match_pattern()),
        Err(e) => (e.as_response_error().status_code(), None),
    };
    let route = route.unwrap_or_else(|| UNMATCHED.to_owned());
    let elapsed = started.elapsed();
    metrics::counter!(
        "http_requests_total",
        "route" => route.clone(),
        "method" => method,
        "status" => status.as_str().to_owned()
    )
    .increment(1);
    metrics::histogram!("http_request_duration_seconds", "route" => route.clone())
        .record(elapsed.as_secs_f64());
    tracing::info!(
        request_id = %request_id,
        method,
        route = %route,
        status = status.as_u16(),
        duration_ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
        "request"
    );
    res
}

/// The root span of every request: its id, method and route template, then its status. Not the
/// path or the query string (ids, coupon codes, filters), the client's address or user agent.
#[derive(Debug)]
pub struct RequestSpan;

impl tracing_actix_web::RootSpanBuilder for RequestSpan {
    fn on_request_start(req: &ServiceRequest) -> tracing::Span {
        let request_id = req
            .extensions()
            .get::<tracing_actix_web::RequestId>()
            .map(|id| id.to_string())
            .unwrap_or_default();
        let route = req.match_pattern().unwrap_or_else(|| UNMATCHED.to_owned());
        tracing::info_span!(
            "request",
            request_id = %request_id,
            method = %req.method(),
            route = %route,
            status = tracing::field::Empty,
        )
    }

    fn on_request_end<B: MessageBody>(
        span: tracing::Span,
        outcome: &Result<ServiceResponse<B>, Error>,
    ) {
        let status = match outcome {
            Ok(res) => res.status(),
            Err(e) => e.as_response_error().status_code(),
        };
        span.record("status", status.as_u16());
    }
}

/// The route label of a request that matched no route.
pub const UNMATCHED: &str = "unmatched";

/// Echoes the request id that tracing gave this request, so a client can quote it.
pub async fn request_id_header(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let id = req
        .extensions()
        .get::<tracing_actix_web::RequestId>()
        .map(|id| id.to_string());
    let mut res = next.call(req).await?;
    if let Some(v) = id.and_then(|id| HeaderValue::from_str(&id).ok()) {
        res.headers_mut()
            .insert(header::HeaderName::from_static("x-request-id"), v);
    }
    Ok(res)
}

/// `Cache-Control: no-store` on every answer of the authenticated APIs (`/api/v1` and
/// `/internal/v1`, extensions.md §7), successes and errors alike: they carry tenant data, and a
/// shared cache or the browser's must keep none of it. Mounted once on each of the two scopes,
/// outside their guards, so 401/403/404/429 answers get it too. (An error that escapes as an
/// `Err`, such as a panic, is rendered by [`ApiError`], whose body always carries `no-store`.)
pub async fn no_store(
    req: ServiceRequest,
    next: Next<BoxBody>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let mut res = next.call(req).await?;
    res.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(res)
}

fn state(req: &ServiceRequest) -> Result<web::Data<AppState>, Error> {
    req.app_data::<web::Data<AppState>>()
        .cloned()
        .ok_or_else(|| ApiError::internal(&"application state missing").into())
}

/// The partner API's guard for one endpoint group: authentication (401/503), account state
/// (403), then one unit of the group's budget (429). Every answer after the rate-limit step
/// carries the `X-RateLimit-*` headers, whatever its status.
pub fn partner_guard(
    group: Group,
) -> impl Fn(ServiceRequest, Next<BoxBody>) -> GuardFuture + Clone {
    move |req, next| Box::pin(guard(group, None, req, next))
}

/// An account-state condition an endpoint needs beyond an active partner: 403 `forbidden`,
/// checked with the account state, before the rate limit.
#[derive(Debug, Clone, Copy)]
pub struct Requirement {
    pub holds: fn(&Principal) -> bool,
    pub message: &'static str,
}

/// [`partner_guard`] for an endpoint the account may have disabled (DNA links).
pub fn partner_guard_requiring(
    group: Group,
    requirement: Requirement,
) -> impl Fn(ServiceRequest, Next<BoxBody>) -> GuardFuture + Clone {
    move |req, next| Box::pin(guard(group, Some(requirement), req, next))
}

type GuardFuture =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<ServiceResponse<BoxBody>, Error>>>>;

async fn guard(
    group: Group,
    requirement: Option<Requirement>,
    req: ServiceRequest,
    next: Next<BoxBody>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let st = state(&req)?;
    let header = req
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes().to_vec());
    let authed = match st.auth.authenticate(header.as_deref()).await {
        Ok(a) => a,
        Err(e) => return Ok(req.error_response(ApiError::from(e))),
    };
    let (mut res, decision) = match admit(&st, group, requirement, authed).await {
        Admission::Denied(e) => return Ok(req.error_response(e)),
        Admission::Limited(e, decision) => (req.error_response(e), decision),
        Admission::Allowed(principal, decision) => {
            let caller = IdempotencyCaller::Partner(principal.partner_id().clone());
            req.extensions_mut().insert(principal);
            (
                crate::idempotency::run(&st, caller, req, next).await?,
                decision,
            )
        }
    };
    rate_limit_headers(res.headers_mut(), &decision);
    Ok(res)
}

/// What follows a successful authentication, for the guard and for [`one_trip`] alike.
enum Admission {
    /// 403 (an endpoint's requirement), before the rate limit: no budget spent, no headers.
    Denied(ApiError),
    /// 429, with the decision's headers.
    Limited(ApiError, Decision),
    Allowed(Principal, Decision),
}

/// `lastUsedAt` (off the critical path), the endpoint's requirement (403), then one unit of the
/// group's budget (429).
async fn admit(
    st: &web::Data<AppState>,
    group: Group,
    requirement: Option<Requirement>,
    authed: Authenticated,
) -> Admission {
    touch(st, &authed);
    if let Some(e) = screen(group, requirement, &authed) {
        return Admission::Denied(e);
    }
    let now = st.clock.now().unix_timestamp();
    let decision = if cfg!(feature = "bench-no-limits") {
        unlimited(now)
    } else {
        st.limiter
            .charge(authed.principal.token_id(), group, now)
            .await
    };
    if decision.allowed {
        Admission::Allowed(authed.principal, decision)
    } else {
        Admission::Limited(limited(group, &decision, now), decision)
    }
}

/// The decision of a build without budgets (feature `bench-no-limits`: the baseline of
/// `bench/limiter-overhead.sh`, never a server to run).
fn unlimited(now: i64) -> Decision {
    Decision {
        allowed: true,
        limit: u32::MAX,
        remaining: u32::MAX,
        reset: now + 60,
    }
}

/// Writes `lastUsedAt` when due, off the critical path (the answer does not wait for it).
fn touch(st: &web::Data<AppState>, authed: &Authenticated) {
    if authed.touch_due {
        let st2 = st.clone();
        let token = authed.principal.token_id();
        actix_web::rt::spawn(async move {
            if let Err(e) = st2.auth.touch(token).await {
                tracing::warn!(error = %e, "could not record token use");
            }
        });
    }
}

/// The 403 an authenticated caller gets before the rate limit: the endpoint's requirement, or a
/// portal session outside its scope.
fn screen(
    group: Group,
    requirement: Option<Requirement>,
    authed: &Authenticated,
) -> Option<ApiError> {
    screen_principal(group, requirement, &authed.principal)
}

/// [`screen`] of a principal: that of this request, or the one its token last authenticated as
/// ([`partner_domain::account::auth::Seen::then`]).
fn screen_principal(
    group: Group,
    requirement: Option<Requirement>,
    principal: &Principal,
) -> Option<ApiError> {
    if let Some(r) = requirement
        && !(r.holds)(principal)
    {
        return Some(ApiError::forbidden(r.message));
    }
    // A portal session reaches only the webhook and endpoint calls (extensions §10), all of
    // them in the *webhook endpoints* group; anything else is 403 with the account checks.
    if principal.portal() && group != Group::WebhookEndpoints {
        return Some(ApiError::forbidden(PORTAL_SCOPE));
    }
    None
}

/// The 429 of a refused `decision` (counted).
fn limited(group: Group, decision: &Decision, now: i64) -> ApiError {
    metrics::counter!("rate_limit_rejections_total", "group" => group.as_str()).increment(1);
    ApiError::rate_limited(decision.retry_after(now))
}

/// The 403 of a portal session's call outside its scope.
pub(crate) const PORTAL_SCOPE: &str =
    "a portal session may call only the webhook endpoint and delivery calls";

/// The `X-RateLimit-*` headers every answer after the rate-limit step carries.
fn rate_limit_headers(h: &mut header::HeaderMap, decision: &Decision) {
    for (name, value) in [
        ("x-ratelimit-limit", i64::from(decision.limit)),
        ("x-ratelimit-remaining", i64::from(decision.remaining)),
        ("x-ratelimit-reset", decision.reset),
    ] {
        h.insert(
            header::HeaderName::from_static(name),
            HeaderValue::from(value),
        );
    }
}

/// A partner read that costs ONE database round trip: `read` gets the presented token and
/// returns the token's record together with the data, read in the same round trip (one
/// statement, or statements pipelined with the token lookup on one connection) ([`Sealed`]);
/// `respond` gets the data only once [`partner_domain::account::auth::AuthService::open`] has
/// authenticated the request. Every answer is the one [`partner_guard`] gives, in the same order
/// (401/503, 403, the endpoint's `requirement` 403 as [`partner_guard_requiring`], 429 with
/// `X-RateLimit-*`), so a route uses this instead of the guard, not beside it.
///
/// A request over budget reads no partner data (extensions §12), whatever runs beside it: the
/// budget is charged BEFORE the read, with the token id the presented token authenticated as
/// earlier in this process ([`AuthService::seen`]), so of any number of concurrent requests only
/// those the budget admits read (issue 23, N8: a burst at a window's turn used to pass a peek
/// together and read before being refused). A refused request gets the token check alone
/// ([`AuthService::lookup`]), answered 401/403/429 from it. A 403 (a portal session outside its
/// scope, the endpoint's requirement) is decided before any read and charges nothing: from the
/// principal the token last authenticated as, confirmed by the token check alone (issue 23,
/// N11). When the read's own token check fails after all (the token was revoked, the partner
/// deactivated since), or the endpoint's requirement does (the account changed since the token
/// was last seen), the unit is given back ([`crate::RateLimitStore::refund`]): authentication
/// failures and 403s cost no budget. A token whose check failed is no longer seen, so its next
/// request takes the token check alone (issue 23, N11b: a revoked token, or one of a deactivated
/// partner, used to run a full read on every request). A token not seen yet in this process is
/// checked alone first, then charged, then read: two round trips, once per token and process.
///
/// [`AuthService::seen`]: partner_domain::account::auth::AuthService::seen
/// [`AuthService::lookup`]: partner_domain::account::auth::AuthService::lookup
pub(crate) async fn one_trip<T, Fut>(
    req: &HttpRequest,
    group: Group,
    requirement: Option<Requirement>,
    read: impl FnOnce(web::Data<AppState>, Presented) -> Fut,
    respond: impl FnOnce(&web::Data<AppState>, Principal, T) -> Result<HttpResponse, ApiError>,
) -> HttpResponse
where
    Fut: std::future::Future<Output = Result<Sealed<T>, AuthError>>,
{
    let Some(st) = req.app_data::<web::Data<AppState>>().cloned() else {
        return ApiError::internal(&"application state missing").error_response();
    };
    let header = req
        .headers()
        .get(header::AUTHORIZATION)
        .map(HeaderValue::as_bytes);
    let presented = match st.auth.present(header) {
        Ok(p) => p,
        Err(e) => return ApiError::from(e).error_response(),
    };
    let Some(seen) = st.auth.seen(&presented) else {
        return checked_first(&st, group, requirement, presented, read, respond).await;
    };
    // A 403 the token's last authentication already gives (a portal session outside its scope,
    // an endpoint the account may not use) is decided from the token check alone, before any
    // read and without a charge, as for a token not seen yet (issue 23, N11: it used to be
    // decided after a full read whose charge was then refunded, so a portal session could read
    // without end). Should the account have changed since (the requirement holds now), that
    // check admits it and reads: two round trips, once per change.
    if screen_principal(group, requirement, seen.then()).is_some() {
        return checked_first(&st, group, requirement, presented, read, respond).await;
    }
    let token = seen.token_id();
    let now = st.clock.now().unix_timestamp();
    let decision = if cfg!(feature = "bench-no-limits") {
        unlimited(now)
    } else {
        st.limiter.charge(token, group, now).await
    };
    if !decision.allowed {
        return refused(&st, group, requirement, &presented, &decision, now).await;
    }
    let opened = match read(st.clone(), presented.clone()).await {
        Ok(sealed) => st.auth.open(&presented, sealed),
        Err(e) => Err(e),
    };
    let (authed, content) = match opened {
        Ok(o) => o,
        Err(e) => {
            // An authentication failure costs no budget; a storage failure keeps its unit (the
            // request was admitted and ran its read).
            if !matches!(e, AuthError::Repo(_)) {
                st.limiter.refund(token, group, now).await;
            }
            return ApiError::from(e).error_response();
        }
    };
    if let Some(e) = screen(group, requirement, &authed) {
        // The account changed between the token's last authentication and this read (the
        // requirement held then): the read ran, once per change; the 403 costs no budget, as
        // the order of checks says (rulings.md: 403 comes before the rate limit).
        st.limiter.refund(token, group, now).await;
        return e.error_response();
    }
    touch(&st, &authed);
    let mut res = respond(&st, authed.principal, content).unwrap_or_else(|e| e.error_response());
    rate_limit_headers(res.headers_mut(), &decision);
    res
}

/// [`one_trip`] for a request its budget refused: the token check alone, then 401/403 when it
/// fails, else the endpoint's 403, else the 429 with the decision's headers. No partner data is
/// read.
async fn refused(
    st: &web::Data<AppState>,
    group: Group,
    requirement: Option<Requirement>,
    presented: &Presented,
    decision: &Decision,
    now: i64,
) -> HttpResponse {
    let checked = match st.auth.lookup(presented).await {
        Ok(sealed) => st.auth.open(presented, sealed),
        Err(e) => Err(e),
    };
    let authed = match checked {
        Ok((authed, ())) => authed,
        Err(e) => return ApiError::from(e).error_response(),
    };
    touch(st, &authed);
    if let Some(e) = screen(group, requirement, &authed) {
        return e.error_response();
    }
    let mut res = limited(group, decision, now).error_response();
    rate_limit_headers(res.headers_mut(), decision);
    res
}

/// [`one_trip`] for a token this process has not seen authenticate: the token check alone, then
/// the admission, in the contract's order; partner data is read only for an admitted request, in
/// a round trip of its own.
async fn checked_first<T, Fut>(
    st: &web::Data<AppState>,
    group: Group,
    requirement: Option<Requirement>,
    presented: Presented,
    read: impl FnOnce(web::Data<AppState>, Presented) -> Fut,
    respond: impl FnOnce(&web::Data<AppState>, Principal, T) -> Result<HttpResponse, ApiError>,
) -> HttpResponse
where
    Fut: std::future::Future<Output = Result<Sealed<T>, AuthError>>,
{
    let checked = match st.auth.lookup(&presented).await {
        Ok(sealed) => st.auth.open(&presented, sealed),
        Err(e) => Err(e),
    };
    let authed = match checked {
        Ok((authed, ())) => authed,
        Err(e) => return ApiError::from(e).error_response(),
    };
    let (mut res, decision) = match admit(st, group, requirement, authed).await {
        Admission::Denied(e) => return e.error_response(),
        Admission::Limited(e, decision) => (e.error_response(), decision),
        Admission::Allowed(principal, decision) => {
            let opened = match read(st.clone(), presented.clone()).await {
                Ok(sealed) => st.auth.open(&presented, sealed),
                Err(e) => Err(e),
            };
            match opened {
                Ok((_, content)) => (
                    respond(st, principal, content).unwrap_or_else(|e| e.error_response()),
                    decision,
                ),
                Err(e) => {
                    if !matches!(e, AuthError::Repo(_)) {
                        let now = st.clock.now().unix_timestamp();
                        st.limiter.refund(principal.token_id(), group, now).await;
                    }
                    return ApiError::from(e).error_response();
                }
            }
        }
    };
    rate_limit_headers(res.headers_mut(), &decision);
    res
}

/// The limit of the public surfaces (extensions.md §12): one budget per client address
/// ([`crate::client_addr`]), shared by every route this wraps — the catalog and the embedded
/// view; a public portal page is mounted behind it too (`.wrap(from_fn(public_limit))`). Beyond
/// it, 429 `rate_limited` with `Retry-After`, before anything else runs for the request, sent
/// after [`AppState::public_refusal_hold`] (the connection's next request waits for it too).
pub async fn public_limit(
    req: ServiceRequest,
    next: Next<BoxBody>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    if cfg!(feature = "bench-no-limits") {
        return next.call(req).await;
    }
    let st = state(&req)?;
    // A request always has a peer on a TCP listener; without one (an in-memory test service)
    // every such request shares one budget.
    let peer = req
        .peer_addr()
        .map_or(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), |a| {
            a.ip()
        });
    let client = st.trusted_proxies.client(
        peer,
        req.headers()
            .get_all(header::X_FORWARDED_FOR)
            .map(HeaderValue::as_bytes),
    );
    let now_us = i64::try_from(st.clock.now().unix_timestamp_nanos() / 1_000).unwrap_or(i64::MAX);
    let decision = st.public_limiter.charge_public(client, now_us).await;
    if decision.allowed {
        next.call(req).await
    } else {
        metrics::counter!("rate_limit_rejections_total", "group" => "public").increment(1);
        if !st.public_refusal_hold.is_zero() {
            actix_web::rt::time::sleep(st.public_refusal_hold).await;
        }
        Ok(req.error_response(ApiError::public_rate_limited(decision.retry_after())))
    }
}

/// The first check of the Care Services endpoints: 404 `not_found` when
/// `CARE_SERVICES_API_ENABLED` is false, before authentication.
pub async fn care_services_enabled(
    req: ServiceRequest,
    next: Next<BoxBody>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    if state(&req)?.care_services_enabled {
        next.call(req).await
    } else {
        Ok(req.error_response(ApiError::not_found("the Care Services API is disabled")))
    }
}

/// The operator API's guard: 404 for everything when no internal token is configured,
/// else the bearer must equal it (compared in constant time).
pub async fn internal_guard(
    req: ServiceRequest,
    next: Next<BoxBody>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let st = state(&req)?;
    let Some(expected) = st.internal_token.as_ref().map(crate::OperatorToken::expose) else {
        return Ok(req.error_response(ApiError::not_found("no such resource")));
    };
    let header = req
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    match partner_domain::account::auth::bearer(header) {
        None => Ok(req.error_response(ApiError::missing_bearer())),
        Some(t) if !same_secret(t, expected.as_bytes()) => {
            Ok(req.error_response(ApiError::invalid_token()))
        }
        Some(_) => crate::idempotency::run(&st, IdempotencyCaller::Operator, req, next).await,
    }
}

/// Whether `presented` is `expected`, in time independent of both: the SHA-256 digests (always
/// 32 bytes) are compared in constant time, so neither a length mismatch nor a common prefix
/// answers sooner.
fn same_secret(presented: &[u8], expected: &[u8]) -> bool {
    let a = ring::digest::digest(&ring::digest::SHA256, presented);
    let b = ring::digest::digest(&ring::digest::SHA256, expected);
    constant_time_eq(a.as_ref(), b.as_ref())
}

/// The authenticated caller, put in the request by [`partner_guard`].
#[derive(Debug, Clone)]
pub struct Caller(pub Principal);

impl actix_web::FromRequest for Caller {
    type Error = ApiError;
    type Future = std::future::Ready<Result<Self, ApiError>>;

    fn from_request(req: &actix_web::HttpRequest, _: &mut actix_web::dev::Payload) -> Self::Future {
        std::future::ready(
            req.extensions()
                .get::<Principal>()
                .cloned()
                .map(Caller)
                .ok_or_else(|| ApiError::internal(&"route is not behind the partner guard")),
        )
    }
}

#[cfg(test)]
mod tests {
    use actix_web::body::MessageBody;
    use actix_web::http::StatusCode;
    use actix_web::middleware::from_fn;
    use actix_web::{App, HttpResponse, test, web};

    use super::{normalize_errors, same_secret};

    #[::core::prelude::v1::test]
    fn secrets_compare_by_digest() {
        assert!(same_secret(
            b"a-token-of-some-length",
            b"a-token-of-some-length"
        ));
        assert!(!same_secret(
            b"a-token-of-some-length",
            b"a-token-of-some-lengtH"
        ));
        assert!(!same_secret(b"a-token", b"a-token-of-some-length"));
        assert!(!same_secret(b"", b"a-token-of-some-length"));
    }

    async fn boom() -> HttpResponse {
        panic!("a bug");
    }

    #[actix_web::test]
    async fn a_panic_becomes_500_internal_error_and_the_server_keeps_serving() {
        let app = test::init_service(
            App::new().service(
                web::scope("")
                    .route("/boom", web::get().to(boom))
                    .route(
                        "/ok",
                        web::get().to(|| async { HttpResponse::Ok().finish() }),
                    )
                    .wrap(from_fn(normalize_errors)),
            ),
        )
        .await;
        // The server's dispatcher renders an `Err` through the error's own response.
        let err = test::try_call_service(&app, test::TestRequest::get().uri("/boom").to_request())
            .await
            .expect_err("the panic is turned into an error");
        let res = err.error_response();
        assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body = res.into_body().try_into_bytes().expect("bytes");
        let v: serde_json::Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(v["error"]["code"], "internal_error");
        assert!(
            !v["error"]["message"]
                .as_str()
                .expect("message")
                .contains("a bug"),
            "the cause is not echoed"
        );
        let ok = test::call_service(&app, test::TestRequest::get().uri("/ok").to_request()).await;
        assert_eq!(ok.status(), StatusCode::OK);
    }

    #[actix_web::test]
    async fn actix_own_errors_get_the_error_body() {
        let app = test::init_service(
            App::new().service(
                web::scope("")
                    .service(web::resource("/only-get").route(web::get().to(HttpResponse::Ok)))
                    .wrap(from_fn(normalize_errors)),
            ),
        )
        .await;
        let res =
            test::call_service(&app, test::TestRequest::get().uri("/nowhere").to_request()).await;
        assert_eq!(res.status(), StatusCode::NOT_FOUND);
        let v: serde_json::Value = test::read_body_json(res).await;
        assert_eq!(v["error"]["code"], "not_found");
        let res = test::call_service(
            &app,
            test::TestRequest::post().uri("/only-get").to_request(),
        )
        .await;
        assert_eq!(res.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert!(
            res.headers().get("allow").is_some(),
            "actix's Allow header is kept"
        );
        let v: serde_json::Value = test::read_body_json(res).await;
        assert_eq!(v["error"]["code"], "invalid_request");
    }
}
