//! actix-web adapter of the Partner Portal API.
//!
//! Turns HTTP into calls on the `partner-domain` services and renders their results in the
//! contract's shapes: the `{ data }` envelope, the `{ error: { code, message } }` body for every
//! failure (including actix's own 404/405/413 and panics), bearer authentication, per-token rate
//! limits, and the operator API under `/internal/v1`. Everything is mounted by [`configure`].

#![cfg_attr(test, allow(clippy::expect_used, clippy::indexing_slicing))]

pub mod audit;
pub mod client_addr;
mod csv_export;
mod error;
mod extract;
mod idempotency;
mod middleware;
mod params;
pub mod ratelimit;
mod routes;

pub use routes::WebhookData;

/// The gauge `/readyz` sets: 1 when the database answers, else 0 (extensions §5's metrics).
pub const READY_GAUGE: &str = "partner_ready";

/// The OpenAPI 3.1 documents (extensions.md §6).
pub mod openapi {
    pub use crate::routes::{
        internal_document as internal, mounted_paths, partner_document as partner, to_json,
    };
    pub use utoipa::openapi::OpenApi as Document;
}

use std::sync::Arc;

use actix_web::web;
use partner_domain::account::AccountService;
use partner_domain::account::auth::AuthService;
use partner_domain::account::portal::PortalService;
use partner_domain::catalog::CatalogService;
use partner_domain::coupon::CouponService;
use partner_domain::kernel::clock::Clock;
use partner_domain::kernel::readiness::Readiness;
use partner_domain::lead::LeadService;
use partner_domain::links::LinkService;
use partner_domain::order::OrderService;
use partner_domain::payout::PayoutService;
use partner_domain::sub_account::SubAccountService;
use partner_domain::webhook::WebhookService;

pub use client_addr::TrustedProxies;
pub use error::ApiError;
pub use extract::MAX_BODY;
pub use ratelimit::{
    PublicLimitStore, PublicLimiter, PublicQuota, Quota, RateLimitStore, RateLimiter,
};

/// Everything the handlers need, built once by the server and shared by all workers.
#[derive(Debug)]
pub struct AppState {
    pub auth: AuthService,
    pub accounts: AccountService,
    pub sub_accounts: SubAccountService,
    pub leads: LeadService,
    pub orders: OrderService,
    pub payouts: PayoutService,
    pub links: LinkService,
    pub catalog: CatalogService,
    pub coupons: CouponService,
    pub webhooks: WebhookService,
    /// Idempotency keys and their kept answers (extensions §8.3).
    pub idempotency: partner_domain::idempotency::IdempotencyService,
    /// The partner's webhook portal: codes and sessions (extensions §10).
    pub portal: PortalService,
    /// Where the portal's links point (`PARTNER_BASE_URL`): `{base}/portal#code=…`.
    pub base_url: url::Url,
    /// `PARTNER_CATALOG_URL`: where the catalog and the embedded view are served
    /// (`GET /api/v1/embed` answers the view's address under it).
    pub catalog_url: url::Url,
    /// The events feed (extensions.md §8.1).
    pub feed: partner_domain::webhook::EventFeed,
    pub readiness: Arc<dyn Readiness>,
    /// Set when the process begins to stop (SIGTERM): from then on `/readyz` answers 503.
    pub stopping: Arc<std::sync::atomic::AtomicBool>,
    pub clock: Arc<dyn Clock>,
    /// Where rate-limit budgets live (in-process, or shared through Redis).
    pub limiter: Arc<dyn RateLimitStore>,
    /// The public surfaces' budgets per client address (`PARTNER_PUBLIC_RATE`), in-process or
    /// shared through Redis like [`AppState::limiter`].
    pub public_limiter: Arc<dyn PublicLimitStore>,
    /// `PARTNER_TRUSTED_PROXIES`: peers whose `X-Forwarded-For` names the client.
    pub trusted_proxies: TrustedProxies,
    /// How long a refused public request waits before its 429 is sent: a client that floods
    /// the public surfaces on a few connections then gets a few answers a second, not
    /// thousands, and takes no CPU from the partner API.
    pub public_refusal_hold: std::time::Duration,
    /// `CARE_SERVICES_API_ENABLED`: when false the Care Services endpoints answer 404.
    pub care_services_enabled: bool,
    /// Bearer of the operator API; `None` turns `/internal` into 404s.
    pub internal_token: Option<OperatorToken>,
}

/// The operator API's bearer; its `Debug` does not show it.
#[derive(Clone)]
pub struct OperatorToken(String);

impl OperatorToken {
    pub fn new(token: String) -> Self {
        Self(token)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for OperatorToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OperatorToken(..)")
    }
}

/// Mounts every route, the error-body normalisation and request tracing on `cfg`.
pub fn configure(cfg: &mut web::ServiceConfig, state: web::Data<AppState>) {
    configure_surface(cfg, state, Surface::Full);
}

/// Which routes a process serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    /// The partner API, the operator API, the public catalog and the embedded view.
    Full,
    /// Only `/healthz` and `/readyz` (a process that runs the delivery worker alone).
    HealthOnly,
    /// [`Surface::Full`] without the operator API (it has a listener of its own).
    Public,
    /// The operator API and the health checks (the operator API's own listener).
    Internal,
}

/// As [`configure`], serving `surface`; every other path is the contract's 404.
pub fn configure_surface(
    cfg: &mut web::ServiceConfig,
    state: web::Data<AppState>,
    surface: Surface,
) {
    cfg.app_data(state)
        .app_data(web::PayloadConfig::new(MAX_BODY))
        .service(
            web::scope("")
                .configure(|c| match surface {
                    Surface::Full => routes::configure(c),
                    Surface::HealthOnly => routes::configure_health(c),
                    Surface::Public => routes::configure_public(c),
                    Surface::Internal => {
                        routes::configure_health(c);
                        routes::configure_internal(c);
                    }
                })
                .default_service(web::to(routes::no_route))
                .wrap(actix_web::middleware::from_fn(middleware::normalize_errors))
                .wrap(actix_web::middleware::from_fn(
                    middleware::request_id_header,
                ))
                .wrap(actix_web::middleware::from_fn(middleware::observe))
                .wrap(tracing_actix_web::TracingLogger::<middleware::RequestSpan>::new()),
        );
}
