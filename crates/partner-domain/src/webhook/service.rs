//! Managing a partner's webhook endpoints and its delivery log, for partners and the operator
//! alike.

use std::sync::Arc;

use time::OffsetDateTime;

use crate::account::auth::{Sealed, TokenKey};
use crate::events::{DomainEvent, Requeue, Requeued};
use crate::kernel::clock::Clock;
use crate::kernel::cursor::{self, CursorKey, Position};
use crate::kernel::error::RepoError;
use crate::kernel::ids::{DeliveryId, EndpointId};
use crate::kernel::page::Page;
use crate::kernel::random::Random;
use crate::kernel::uow::UnitOfWork;
use crate::kernel::values::PartnerId;
use crate::webhook::budget::ActionBudget;
use crate::webhook::delivery::{
    ATTEMPT_LOG_LIMIT, DeliveryDetail, DeliveryFilter, DeliveryInfo, DeliveryQuery, RECOVER_LIMIT,
    RECOVER_WINDOW,
};
use crate::webhook::endpoint::{
    EndpointPatch, MAX_ENDPOINTS, NewEndpoint, ShownEndpoint, WebhookEndpoint,
};
use crate::webhook::ports::{AddressCheck, InsertEndpoint, WebhookRepo, WebhookTransaction};
use crate::webhook::signature::WebhookSecret;

/// Errors of the endpoint calls of [`WebhookService`].
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    /// The partner has [`MAX_ENDPOINTS`] endpoints already (400).
    #[error("an account may have at most 10 webhook endpoints")]
    TooMany,
    /// The URL's host resolves to an internal address (400).
    #[error("url must not resolve to a loopback, private or internal address")]
    InternalAddress,
    /// The partner has no endpoint with that id (404).
    #[error("no such webhook endpoint")]
    NotFound,
    /// No partner has that `partnerId` (404).
    #[error("no partner with that partnerId")]
    UnknownPartner,
    /// The partner has no delivery with that id (404).
    #[error("no such webhook delivery")]
    DeliveryNotFound,
    /// The cursor is not one this service signed for the partner (400).
    #[error("cursor is invalid: pass the nextCursor of a previous page unchanged")]
    BadCursor,
    /// `since` is in the future or more than 7 days ago (400).
    #[error("since must be within the last 7 days and not in the future")]
    BadSince,
    #[error(
        "the webhook endpoint is disabled; re-enable it with PATCH {{ \"enabled\": true }} first"
    )]
    /// The endpoint is disabled: nothing is sent to it (409).
    Disabled,
    #[error(
        "at most 20 webhook actions (test, resend, recover) per minute; retry after {retry_after} s"
    )]
    /// Over the action budget (429); `retry_after` seconds until one is free.
    OverBudget {
        /// Seconds until an action is free.
        retry_after: u64,
    },
    /// The store failed.
    #[error(transparent)]
    Repo(#[from] RepoError),
}

/// Managing a partner's endpoints (for partners and the operator alike).
///
/// Creating an endpoint over mocks of the ports (feature `mocks`); no cursor key is needed for
/// that (only the delivery listing signs cursors, [`WebhookService::with_delivery_cursors`]):
///
/// ```
/// # #[cfg(feature = "mocks")] {
/// use std::sync::Arc;
/// use futures_util::FutureExt;
/// use partner_domain::events::EventKind;
/// use partner_domain::kernel::clock::FixedClock;
/// use partner_domain::kernel::random::SeededRandom;
/// use partner_domain::kernel::uow::BeginsOnce;
/// use partner_domain::kernel::values::PartnerId;
/// use partner_domain::webhook::NewEndpoint;
/// use partner_domain::webhook::ports::{InsertEndpoint, MockAddressCheck, MockWebhookRepo};
/// use partner_domain::webhook::WebhookService;
/// use time::macros::datetime;
///
/// let mut repo = MockWebhookRepo::new();
/// repo.expect_insert_endpoint()
///     .returning(|_, _| Ok(InsertEndpoint::Inserted));
/// let mut addresses = MockAddressCheck::new();
/// addresses.expect_resolves_internal().returning(|_, _| false);
/// let webhooks = WebhookService::new(
///     Arc::new(repo),
///     Arc::new(BeginsOnce::never()),
///     Arc::new(addresses),
///     Arc::new(FixedClock::new(datetime!(2026-11-23 12:00 UTC))),
///     Arc::new(SeededRandom::new(7)),
///     false,
/// );
/// let shown = webhooks
///     .create(
///         &PartnerId::parse("acme").unwrap(),
///         NewEndpoint {
///             url: "https://hooks.acme.example/partner".parse().unwrap(),
///             events: vec![EventKind::LeadCreated],
///             lead_created_delay: None,
///             custom_header: None,
///             secret: true,
///         },
///     )
///     .now_or_never()
///     .expect("the mocks answer at once")
///     .unwrap();
/// assert!(shown.secret().is_some_and(|s| s.starts_with("whsec_")), "shown this once");
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct WebhookService {
    repo: Arc<dyn WebhookRepo>,
    uow: Arc<dyn UnitOfWork<dyn WebhookTransaction>>,
    addresses: Arc<dyn AddressCheck>,
    clock: Arc<dyn Clock>,
    rng: Arc<dyn Random>,
    allow_private: bool,
    cursors: CursorKey,
    secret_overlap: time::Duration,
    action_budget: ActionBudget,
}

impl WebhookService {
    /// The service over its store, unit of work, address check, clock and randomness;
    /// `allow_private` accepts endpoints on internal addresses (tests and closed networks only).
    ///
    /// Creating and changing endpoints needs nothing more. The delivery listing's cursors are
    /// signed with a key drawn from `rng` here, valid in this process only: a deployment with
    /// several instances gives them one shared key with [`Self::with_delivery_cursors`].
    pub fn new(
        repo: Arc<dyn WebhookRepo>,
        uow: Arc<dyn UnitOfWork<dyn WebhookTransaction>>,
        addresses: Arc<dyn AddressCheck>,
        clock: Arc<dyn Clock>,
        rng: Arc<dyn Random>,
        allow_private: bool,
    ) -> Self {
        let mut key = [0u8; 32];
        rng.fill(&mut key);
        Self {
            repo,
            uow,
            addresses,
            clock,
            rng,
            allow_private,
            cursors: CursorKey::new(&key),
            secret_overlap: time::Duration::hours(24),
            action_budget: ActionBudget::default(),
        }
    }

    /// Signs the delivery listing's cursors with `cursors` (use a key of its own, not the
    /// leads', shared by every instance so that one's cursor is good at the others).
    #[must_use]
    pub fn with_delivery_cursors(mut self, cursors: CursorKey) -> Self {
        self.cursors = cursors;
        self
    }

    /// How long a rotated-out secret keeps signing (`PARTNER_WEBHOOK_SECRET_OVERLAP`; zero ends
    /// it at once). 24 hours unless set.
    pub fn with_secret_overlap(mut self, overlap: std::time::Duration) -> Self {
        self.secret_overlap = time::Duration::try_from(overlap).unwrap_or(time::Duration::MAX);
        self
    }

    /// Whether endpoints on internal addresses are accepted.
    pub fn allow_private(&self) -> bool {
        self.allow_private
    }

    /// Refuses a host name that resolves to an internal address now. (One that does not resolve
    /// yet is accepted; every send checks again.)
    async fn check_address(&self, url: &url::Url) -> Result<(), EndpointError> {
        if self.allow_private {
            return Ok(());
        }
        if let Some(url::Host::Domain(host)) = url.host()
            && self
                .addresses
                .resolves_internal(host, url.port_or_known_default().unwrap_or(443))
                .await
        {
            return Err(EndpointError::InternalAddress);
        }
        Ok(())
    }

    /// The partner's endpoints, as the listing shows them (secrets hidden).
    pub async fn list(&self, partner: &PartnerId) -> Result<Vec<ShownEndpoint>, EndpointError> {
        let now = self.clock.now();
        Ok(self
            .repo
            .endpoints(partner)
            .await?
            .into_iter()
            .map(|e| ShownEndpoint::listed(e, now))
            .collect())
    }

    /// What [`Self::list`] reads, for the partner of the token of `key`, read with the token's
    /// record in one round trip and sealed until authentication passes; [`Self::rows`] renders
    /// what it opens to.
    pub async fn list_for_token(
        &self,
        key: TokenKey,
    ) -> Result<Sealed<Vec<WebhookEndpoint>>, RepoError> {
        self.repo.endpoints_for_token(key).await
    }

    /// The listing of `endpoints`, as [`Self::list`] answers it.
    pub fn rows(&self, endpoints: Vec<WebhookEndpoint>) -> Vec<ShownEndpoint> {
        let now = self.clock.now();
        endpoints
            .into_iter()
            .map(|e| ShownEndpoint::listed(e, now))
            .collect()
    }

    /// Creates an endpoint for `partner` (at most [`MAX_ENDPOINTS`]), with a fresh secret when asked
    /// for; the answer shows the secret and the custom header's value, this once.
    pub async fn create(
        &self,
        partner: &PartnerId,
        new: NewEndpoint,
    ) -> Result<ShownEndpoint, EndpointError> {
        self.check_address(&new.url).await?;
        let now = self.clock.now();
        let e = WebhookEndpoint {
            id: EndpointId::generate(self.rng.as_ref()),
            partner_id: partner.clone(),
            url: new.url.into(),
            events: new.events,
            lead_created_delay: new.lead_created_delay,
            custom_header: new.custom_header,
            secret: new
                .secret
                .then(|| WebhookSecret::generate(self.rng.as_ref())),
            previous_secret: None,
            previous_secret_expires_at: None,
            disabled_at: None,
            disabled_reason: None,
            created_at: now,
            updated_at: now,
        };
        match self.repo.insert_endpoint(&e, MAX_ENDPOINTS).await? {
            // The answer to the request that set them shows the secret and the header's value.
            InsertEndpoint::Inserted => Ok(ShownEndpoint::listed(e, now).revealing(true, true)),
            InsertEndpoint::TooMany => Err(EndpointError::TooMany),
            InsertEndpoint::UnknownPartner => Err(EndpointError::UnknownPartner),
        }
    }

    /// Applies `patch` to the endpoint as one atomic change, under the endpoint's row lock: a
    /// concurrent `PATCH` or health change by delivery waits, so each applies to what the other
    /// wrote, and only the fields `patch` names change. An expired previous secret is erased.
    pub async fn update(
        &self,
        partner: &PartnerId,
        id: EndpointId,
        patch: EndpointPatch,
    ) -> Result<ShownEndpoint, EndpointError> {
        // Resolved before the lock is taken: a slow name server holds no row.
        if let Some(u) = &patch.url {
            self.check_address(u).await?;
        }
        let mut tx = self.uow.begin().await?;
        let mut e = tx
            .lock_endpoint(partner, id)
            .await?
            .ok_or(EndpointError::NotFound)?;
        let sets_header_value = matches!(patch.custom_header, Some(Some(_)));
        if let Some(u) = &patch.url {
            e.url = u.to_string();
        }
        if let Some(ev) = patch.events {
            e.events = ev;
        }
        if let Some(d) = patch.lead_created_delay {
            e.lead_created_delay = d;
        }
        if let Some(h) = patch.custom_header {
            e.custom_header = h;
        }
        let now = self.clock.now();
        let new_secret = patch.secret == Some(true);
        match patch.secret {
            Some(true) => {
                // The replaced secret keeps signing for the overlap, next to the new one.
                let old = e.secret.take();
                e.secret = Some(WebhookSecret::generate(self.rng.as_ref()));
                match old {
                    Some(old) if self.secret_overlap > time::Duration::ZERO => {
                        e.previous_secret = Some(old);
                        e.previous_secret_expires_at = now.checked_add(self.secret_overlap);
                    }
                    _ => {
                        e.previous_secret = None;
                        e.previous_secret_expires_at = None;
                    }
                }
            }
            Some(false) => {
                e.secret = None;
                e.previous_secret = None;
                e.previous_secret_expires_at = None;
            }
            None => {}
        }
        let expired = e.previous_secret_expires_at.is_none_or(|at| at <= now);
        if patch.expire_previous == Some(true) || expired {
            e.previous_secret = None;
            e.previous_secret_expires_at = None;
        }
        match (patch.enabled, e.disabled_at) {
            (Some(true), Some(_)) => {
                e.disabled_at = None;
                e.disabled_reason = None;
            }
            (Some(false), None) => e.disabled_at = Some(now),
            _ => {}
        }
        e.updated_at = now;
        tx.write_endpoint(&e).await?;
        tx.commit().await?;
        Ok(ShownEndpoint::listed(e, now).revealing(new_secret, sets_header_value))
    }

    /// Deletes the partner's endpoint with this id.
    pub async fn delete(&self, partner: &PartnerId, id: EndpointId) -> Result<(), EndpointError> {
        if self.repo.delete_endpoint(partner, id).await? {
            Ok(())
        } else {
            Err(EndpointError::NotFound)
        }
    }

    /// A page of the partner's deliveries, newest first.
    pub async fn deliveries(
        &self,
        partner: &PartnerId,
        q: &DeliveryQuery,
    ) -> Result<Page<DeliveryInfo>, EndpointError> {
        let after = match &q.cursor {
            None => None,
            Some(c) => Some(
                self.cursors
                    .decode(partner, c)
                    .ok_or(EndpointError::BadCursor)?,
            ),
        };
        let filter = DeliveryFilter {
            endpoint_id: q.endpoint_id,
            statuses: q.statuses.clone(),
            event: q.event,
            after,
            limit: q.limit.saturating_add(1),
        };
        let rows = self.repo.deliveries(partner, &filter).await?;
        Ok(self.deliveries_page(partner, q, rows))
    }

    /// The rows [`Self::deliveries`] reads, for the partner of the token of `key`, read with the
    /// token's record in one round trip and sealed until authentication passes; then
    /// [`Self::finish_deliveries`] checks the cursor against the authenticated partner. The
    /// cursor's position is read unverified ([`cursor::peek`]), within the token's own
    /// partner's rows; a cursor that is not even well-formed reads no rows.
    pub async fn deliveries_for_token(
        &self,
        key: TokenKey,
        q: &DeliveryQuery,
    ) -> Result<Sealed<Vec<DeliveryInfo>>, RepoError> {
        let (after, limit) = match &q.cursor {
            None => (None, q.limit.saturating_add(1)),
            Some(c) => match cursor::peek(c) {
                Some(pos) => (Some(pos), q.limit.saturating_add(1)),
                None => (None, 0),
            },
        };
        let filter = DeliveryFilter {
            endpoint_id: q.endpoint_id,
            statuses: q.statuses.clone(),
            event: q.event,
            after,
            limit,
        };
        self.repo.deliveries_for_token(key, &filter).await
    }

    /// The answer of [`Self::deliveries_for_token`] once the request is authenticated as
    /// `partner`: 400 unless the cursor verifies for that partner (a verified cursor names the
    /// position it was read at: the same bytes).
    pub fn finish_deliveries(
        &self,
        partner: &PartnerId,
        q: &DeliveryQuery,
        rows: Vec<DeliveryInfo>,
    ) -> Result<Page<DeliveryInfo>, EndpointError> {
        if let Some(c) = &q.cursor
            && self.cursors.decode(partner, c).is_none()
        {
            return Err(EndpointError::BadCursor);
        }
        Ok(self.deliveries_page(partner, q, rows))
    }

    /// A page of `rows` (read with one more than `q.limit`, to learn whether a next page exists).
    fn deliveries_page(
        &self,
        partner: &PartnerId,
        q: &DeliveryQuery,
        mut rows: Vec<DeliveryInfo>,
    ) -> Page<DeliveryInfo> {
        let more = rows.len() > usize::from(q.limit);
        rows.truncate(usize::from(q.limit));
        let next_cursor = more.then(|| rows.last()).flatten().map(|d| {
            self.cursors.encode(
                partner,
                Position {
                    created_at: d.created_at,
                    id: d.id.as_uuid(),
                },
            )
        });
        Page {
            items: rows,
            next_cursor,
            limit: q.limit,
        }
    }

    /// The partner's endpoint, which must be enabled for anything to be sent to it.
    async fn enabled_endpoint(
        &self,
        partner: &PartnerId,
        id: EndpointId,
    ) -> Result<WebhookEndpoint, EndpointError> {
        let e = self
            .repo
            .endpoint(partner, id)
            .await?
            .ok_or(EndpointError::NotFound)?;
        if e.disabled_at.is_some() {
            return Err(EndpointError::Disabled);
        }
        Ok(e)
    }

    /// One delivery with its last [`ATTEMPT_LOG_LIMIT`] attempts.
    pub async fn delivery(
        &self,
        partner: &PartnerId,
        id: DeliveryId,
    ) -> Result<DeliveryDetail, EndpointError> {
        self.repo
            .delivery(partner, id, ATTEMPT_LOG_LIMIT)
            .await?
            .ok_or(EndpointError::DeliveryNotFound)
    }

    /// What [`Self::delivery`] reads, for the partner of the token of `key`, read with the
    /// token's record in one round trip and sealed until authentication passes;
    /// [`Self::found`] answers for what it opens to.
    pub async fn delivery_for_token(
        &self,
        key: TokenKey,
        id: DeliveryId,
    ) -> Result<Sealed<Option<DeliveryDetail>>, RepoError> {
        self.repo
            .delivery_for_token(key, id, ATTEMPT_LOG_LIMIT)
            .await
    }

    /// The start of the 24-hour window of [`Self::hourly_for_token`], now.
    pub fn hour_window(&self) -> OffsetDateTime {
        crate::webhook::hourly::window_start(self.clock.now())
    }

    /// The partner's deliveries (of `endpoint` only, when given) created in each hour since
    /// `since` ([`Self::hour_window`]), by status, for the token of `key`, read with the token's
    /// record in one round trip; [`crate::webhook::hourly::by_hour`] renders what it opens to.
    pub async fn hourly_for_token(
        &self,
        key: TokenKey,
        endpoint: Option<EndpointId>,
        since: OffsetDateTime,
    ) -> Result<Sealed<Vec<crate::webhook::hourly::StatusCount>>, RepoError> {
        self.repo.hourly_for_token(key, endpoint, since).await
    }

    /// [`Self::delivery`]'s answer for what was read: 404 when nothing was.
    pub fn found(detail: Option<DeliveryDetail>) -> Result<DeliveryDetail, EndpointError> {
        detail.ok_or(EndpointError::DeliveryNotFound)
    }

    /// Spends one of the partner's webhook actions ([`ActionBudget`]): call it before a
    /// partner's `test`, `resend` or `recover` (never for the operator's), whatever that call
    /// then answers. Over budget: [`EndpointError::OverBudget`], and nothing is stored.
    pub async fn spend_action(&self, partner: &PartnerId) -> Result<(), EndpointError> {
        let now = self.clock.now();
        let mut tx = self.uow.begin().await?;
        let calls = tx.lock_action_calls(partner).await?;
        let calls = self
            .action_budget
            .admit(&calls, now)
            .map_err(|retry_after| EndpointError::OverBudget { retry_after })?;
        tx.store_action_calls(partner, &calls).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Sends a delivery again: pending, due now, with a fresh retry budget; same id. Refused
    /// while its endpoint is disabled.
    pub async fn resend(
        &self,
        partner: &PartnerId,
        id: DeliveryId,
    ) -> Result<DeliveryInfo, EndpointError> {
        let now = self.clock.now();
        let mut tx = self.uow.begin().await?;
        let done = tx
            .requeue(partner, Requeue::Delivery(id), now)
            .await?
            .ok_or(EndpointError::DeliveryNotFound)?;
        if done.requeued == 0 {
            return Err(EndpointError::Disabled);
        }
        let info = tx
            .delivery(partner, id)
            .await?
            .ok_or_else(|| RepoError::new("a requeued delivery vanished inside its transaction"))?;
        tx.commit().await?;
        Ok(info)
    }

    /// Queues a `ping` delivery to the endpoint.
    pub async fn ping(
        &self,
        partner: &PartnerId,
        endpoint: EndpointId,
    ) -> Result<DeliveryInfo, EndpointError> {
        self.enabled_endpoint(partner, endpoint).await?;
        let now = self.clock.now();
        let id = DeliveryId::generate_at(self.rng.as_ref(), now);
        let mut tx = self.uow.begin().await?;
        let ping = DomainEvent::ping(partner.clone(), endpoint, id);
        if tx.publish(std::slice::from_ref(&ping), now).await? == 0 {
            // The endpoint was deleted since it was read: nothing is committed.
            return Err(EndpointError::NotFound);
        }
        tx.commit().await?;
        Ok(DeliveryInfo::queued(id, endpoint, ping.kind(), now))
    }

    /// Requeues the endpoint's failed deliveries created at or after `since` (at most 7 days
    /// ago, not in the future): at most [`RECOVER_LIMIT`], oldest first. Returns how many, and
    /// how many more match.
    pub async fn recover(
        &self,
        partner: &PartnerId,
        endpoint: EndpointId,
        since: OffsetDateTime,
    ) -> Result<Requeued, EndpointError> {
        let now = self.clock.now();
        // Checked: a clock near the start of time has no window's start to fall before.
        let earliest = now.checked_sub(RECOVER_WINDOW);
        if since > now || earliest.is_some_and(|e| since < e) {
            return Err(EndpointError::BadSince);
        }
        self.enabled_endpoint(partner, endpoint).await?;
        let mut tx = self.uow.begin().await?;
        let requeued = tx
            .requeue(
                partner,
                Requeue::FailedSince {
                    endpoint,
                    since,
                    limit: RECOVER_LIMIT,
                },
                now,
            )
            .await?
            .ok_or(EndpointError::NotFound)?;
        tx.commit().await?;
        Ok(requeued)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{Event, EventKind, Recipients};
    use crate::kernel::clock::FixedClock;
    use crate::kernel::random::{MockRandom, SystemRandom};
    use crate::kernel::uow::BeginsOnce;
    use crate::webhook::DeliveryStatus;
    use crate::webhook::endpoint::{EndpointParts, LeadCreatedDelay};
    use crate::webhook::ports::{MockAddressCheck, MockWebhookRepo, MockWebhookTransaction};
    use futures_util::FutureExt;
    use mockall::Sequence;
    use time::macros::datetime;
    use uuid::Uuid;

    /// A delivery page read for a token at a cursor's unverified position is used only when the
    /// cursor verifies for the authenticated partner.
    #[test]
    fn a_delivery_page_read_for_a_token_needs_the_partners_own_cursor() {
        let svc = WebhookService::new(
            std::sync::Arc::new(crate::webhook::ports::MockWebhookRepo::new()),
            std::sync::Arc::new(crate::kernel::uow::BeginsOnce::never()),
            std::sync::Arc::new(crate::webhook::ports::MockAddressCheck::new()),
            std::sync::Arc::new(crate::kernel::clock::FixedClock::new(
                OffsetDateTime::UNIX_EPOCH,
            )),
            std::sync::Arc::new(SystemRandom::new()),
            false,
        )
        .with_delivery_cursors(cursor::CursorKey::new(b"deliveries"));
        let acme = PartnerId::parse("acme").expect("id");
        let beta = PartnerId::parse("beta").expect("id");
        let pos = cursor::Position {
            created_at: OffsetDateTime::UNIX_EPOCH,
            id: Uuid::nil(),
        };
        let cursor = cursor::CursorKey::new(b"deliveries").encode(&acme, pos);
        let q = DeliveryQuery {
            limit: 2,
            cursor: Some(cursor),
            ..DeliveryQuery::default()
        };
        assert_eq!(
            svc.finish_deliveries(&acme, &q, Vec::new())
                .expect("its own cursor")
                .items,
            Vec::new()
        );
        assert!(matches!(
            svc.finish_deliveries(&beta, &q, Vec::new()),
            Err(EndpointError::BadCursor)
        ));
        let forged = DeliveryQuery {
            cursor: Some(cursor::CursorKey::new(b"leads").encode(&acme, pos)),
            ..q
        };
        assert!(matches!(
            svc.finish_deliveries(&acme, &forged, Vec::new()),
            Err(EndpointError::BadCursor)
        ));
    }

    const NOW: OffsetDateTime = datetime!(2026-11-23 12:00 UTC);

    fn acme() -> PartnerId {
        PartnerId::parse("acme").expect("id")
    }

    fn endpoint_id() -> EndpointId {
        EndpointId::from_uuid(Uuid::from_u128(1))
    }

    /// Random bytes that are all `7`: ids and secrets are known in advance.
    fn sevens() -> MockRandom {
        let mut rng = MockRandom::new();
        rng.expect_fill().returning(|buf| buf.fill(7));
        rng
    }

    /// The service's ports: by default nothing may be called.
    struct Ports {
        repo: MockWebhookRepo,
        tx: Option<MockWebhookTransaction>,
        addresses: MockAddressCheck,
        allow_private: bool,
    }

    impl Ports {
        fn new() -> Self {
            Self {
                repo: MockWebhookRepo::new(),
                tx: None,
                addresses: MockAddressCheck::new(),
                allow_private: false,
            }
        }

        /// The partner's endpoint is `e` (any other id: none).
        fn with_endpoint(mut self, e: WebhookEndpoint) -> Self {
            self.repo
                .expect_endpoint()
                .returning(move |p, id| Ok((*p == acme() && id == e.id()).then(|| e.clone())));
            self
        }

        fn service(self) -> WebhookService {
            let uow: BeginsOnce<dyn WebhookTransaction> = match self.tx {
                Some(tx) => BeginsOnce::new(Box::new(tx)),
                None => BeginsOnce::never(),
            };
            WebhookService::new(
                Arc::new(self.repo),
                Arc::new(uow),
                Arc::new(self.addresses),
                Arc::new(FixedClock::new(NOW)),
                Arc::new(sevens()),
                self.allow_private,
            )
            .with_delivery_cursors(CursorKey::new(b"deliveries"))
        }
    }

    fn endpoint(disabled: bool, secret: Option<&str>) -> WebhookEndpoint {
        WebhookEndpoint::new(EndpointParts {
            id: endpoint_id(),
            partner_id: acme(),
            url: "https://hooks.acme.test/x".into(),
            events: vec![EventKind::LeadCreated],
            lead_created_delay: None,
            custom_header: None,
            secret: secret.map(|s| WebhookSecret::from_stored(s.into())),
            previous_secret: None,
            disabled: disabled.then_some((NOW - time::Duration::hours(1), None)),
            created_at: NOW - time::Duration::days(1),
            updated_at: NOW - time::Duration::days(1),
        })
    }

    fn new_endpoint(url: &str, secret: bool) -> NewEndpoint {
        NewEndpoint {
            url: url::Url::parse(url).expect("url"),
            events: vec![EventKind::OrderCreated, EventKind::LeadCreated],
            lead_created_delay: Some(LeadCreatedDelay::FiveMinutes),
            custom_header: None,
            secret,
        }
    }

    fn ready<T>(f: impl std::future::Future<Output = T>) -> T {
        f.now_or_never().expect("ready")
    }

    #[test]
    fn creating_stores_the_endpoint_and_shows_its_new_secret_once() {
        let mut ports = Ports::new();
        ports
            .addresses
            .expect_resolves_internal()
            .withf(|host, port| host == "hooks.acme.test" && *port == 443)
            .returning(|_, _| false);
        ports
            .repo
            .expect_insert_endpoint()
            .withf(|e, max| {
                *e.partner_id() == acme()
                    && e.created_at() == NOW
                    && e.secret().is_some()
                    && e.lead_created_delay() == Some(LeadCreatedDelay::FiveMinutes)
                    && *max == MAX_ENDPOINTS
            })
            .times(1)
            .returning(|_, _| Ok(InsertEndpoint::Inserted));
        let row = ready(
            ports
                .service()
                .create(&acme(), new_endpoint("https://hooks.acme.test/x", true)),
        )
        .expect("created");
        assert!(row.secret().is_some_and(|s| s.starts_with("whsec_")));
        assert!(row.is_enabled());
        assert_eq!(row.endpoint.created_at(), NOW);
    }

    #[test]
    fn creating_is_refused_for_an_internal_address_the_limit_or_an_unknown_partner() {
        let mut ports = Ports::new();
        ports
            .addresses
            .expect_resolves_internal()
            .returning(|_, _| true);
        ports.repo.expect_insert_endpoint().never();
        let r = ready(
            ports
                .service()
                .create(&acme(), new_endpoint("https://internal.acme.test/x", false)),
        );
        assert!(matches!(r, Err(EndpointError::InternalAddress)), "{r:?}");
        // Allowed private addresses (tests, development) are not resolved at all.
        let mut ports = Ports::new();
        ports.allow_private = true;
        ports.addresses.expect_resolves_internal().never();
        ports
            .repo
            .expect_insert_endpoint()
            .returning(|_, _| Ok(InsertEndpoint::TooMany));
        let r = ready(
            ports
                .service()
                .create(&acme(), new_endpoint("https://internal.acme.test/x", false)),
        );
        assert!(matches!(r, Err(EndpointError::TooMany)), "{r:?}");
        let mut ports = Ports::new();
        ports
            .addresses
            .expect_resolves_internal()
            .returning(|_, _| false);
        ports
            .repo
            .expect_insert_endpoint()
            .returning(|_, _| Ok(InsertEndpoint::UnknownPartner));
        let r = ready(
            ports
                .service()
                .create(&acme(), new_endpoint("https://hooks.acme.test/x", false)),
        );
        assert!(matches!(r, Err(EndpointError::UnknownPartner)), "{r:?}");
    }

    /// A transaction that locks `e` (the partner's only endpoint), expects one write that
    /// `check` accepts, and commits.
    fn locking(
        e: WebhookEndpoint,
        check: impl Fn(&WebhookEndpoint) + Send + Sync + 'static,
    ) -> MockWebhookTransaction {
        let mut seq = Sequence::new();
        let mut tx = MockWebhookTransaction::new();
        tx.expect_lock_endpoint()
            .times(1)
            .in_sequence(&mut seq)
            .returning(move |p, id| Ok((*p == acme() && id == e.id()).then(|| e.clone())));
        tx.expect_write_endpoint()
            .times(1)
            .in_sequence(&mut seq)
            .returning(move |e| {
                check(e);
                Ok(())
            });
        tx.expect_commit()
            .times(1)
            .in_sequence(&mut seq)
            .returning(|| Ok(()));
        tx
    }

    /// Updates `endpoint(false, secret)` with `patch` and returns what was stored and answered.
    fn update(
        secret: Option<&str>,
        overlap: std::time::Duration,
        patch: EndpointPatch,
    ) -> (WebhookEndpoint, ShownEndpoint) {
        let stored = Arc::new(std::sync::Mutex::new(None));
        let keep = stored.clone();
        let mut ports = Ports::new();
        ports.tx = Some(locking(endpoint(false, secret), move |e| {
            *keep.lock().expect("lock") = Some(e.clone());
        }));
        let row = ready(ports.service().with_secret_overlap(overlap).update(
            &acme(),
            endpoint_id(),
            patch,
        ))
        .expect("updated");
        let e = stored.lock().expect("lock").take().expect("stored");
        (e, row)
    }

    #[test]
    fn a_rotated_secret_keeps_signing_for_the_overlap_and_the_new_one_is_shown_once() {
        let day = std::time::Duration::from_secs(86_400);
        let rotate = EndpointPatch {
            secret: Some(true),
            ..EndpointPatch::default()
        };
        let (e, row) = update(Some("whsec_old"), day, rotate.clone());
        assert_eq!(
            e.previous_secret().map(WebhookSecret::expose),
            Some("whsec_old")
        );
        assert_eq!(
            e.previous_secret_expires_at(),
            Some(NOW + time::Duration::DAY)
        );
        assert_ne!(e.secret().map(WebhookSecret::expose), Some("whsec_old"));
        assert_eq!(row.secret(), e.secret().map(WebhookSecret::expose));
        assert_eq!(
            row.previous_secret_expires_at(),
            Some(NOW + time::Duration::DAY)
        );
        assert_eq!(e.updated_at(), NOW);
        // No overlap: the old secret stops at once.
        let (e, _) = update(Some("whsec_old"), std::time::Duration::ZERO, rotate);
        assert_eq!(e.previous_secret(), None);
        // Removing the secret removes both; a patch without `secret` shows none.
        let (e, row) = update(
            Some("whsec_old"),
            day,
            EndpointPatch {
                secret: Some(false),
                ..EndpointPatch::default()
            },
        );
        assert_eq!((e.secret(), e.previous_secret()), (None, None));
        assert_eq!(row.secret(), None);
    }

    #[test]
    fn a_change_erases_an_expired_previous_secret_and_keeps_a_live_one() {
        let with_previous = |until: OffsetDateTime| {
            let mut e = endpoint(false, Some("whsec_new"));
            e.previous_secret = Some(WebhookSecret::from_stored("whsec_old".into()));
            e.previous_secret_expires_at = Some(until);
            e
        };
        let events = EndpointPatch {
            events: Some(vec![EventKind::PayoutCreated]),
            ..EndpointPatch::default()
        };
        for (until, kept) in [
            (NOW - time::Duration::SECOND, false),
            (NOW, false),
            (NOW + time::Duration::HOUR, true),
        ] {
            let mut ports = Ports::new();
            ports.tx = Some(locking(with_previous(until), move |e| {
                assert_eq!(e.previous_secret().is_some(), kept, "{until}");
                assert_eq!(e.previous_secret_expires_at().is_some(), kept, "{until}");
                assert_eq!(e.secret().map(WebhookSecret::expose), Some("whsec_new"));
                assert_eq!(e.events(), [EventKind::PayoutCreated]);
            }));
            ready(
                ports
                    .service()
                    .update(&acme(), endpoint_id(), events.clone()),
            )
            .expect("updated");
        }
    }

    #[test]
    fn disabling_and_re_enabling_an_endpoint() {
        let (e, row) = update(
            None,
            std::time::Duration::ZERO,
            EndpointPatch {
                enabled: Some(false),
                events: Some(vec![EventKind::PayoutCreated]),
                ..EndpointPatch::default()
            },
        );
        assert_eq!(e.disabled_at(), Some(NOW));
        assert_eq!(e.disabled_reason(), None, "disabled by its partner");
        assert_eq!(e.events(), [EventKind::PayoutCreated]);
        assert!(!row.is_enabled());
        let mut ports = Ports::new();
        ports.tx = Some(locking(endpoint(true, None), |e| {
            assert!(e.disabled_at().is_none() && e.disabled_reason().is_none());
        }));
        let patch = EndpointPatch {
            enabled: Some(true),
            ..EndpointPatch::default()
        };
        let row = ready(ports.service().update(&acme(), endpoint_id(), patch)).expect("enabled");
        assert!(row.is_enabled());
    }

    #[test]
    fn an_endpoint_that_is_not_the_partners_is_not_found() {
        let other = EndpointId::from_uuid(Uuid::from_u128(9));
        let mut ports = Ports::new();
        let mut tx = MockWebhookTransaction::new();
        tx.expect_lock_endpoint().returning(|p, id| {
            Ok((*p == acme() && id == endpoint_id()).then(|| endpoint(false, None)))
        });
        tx.expect_write_endpoint().never();
        tx.expect_commit().never();
        ports.tx = Some(tx);
        ports
            .repo
            .expect_delete_endpoint()
            .returning(|_, id| Ok(id == endpoint_id()));
        let svc = ports.service();
        let r = ready(svc.update(&acme(), other, EndpointPatch::default()));
        assert!(matches!(r, Err(EndpointError::NotFound)), "{r:?}");
        assert!(matches!(
            ready(svc.delete(&acme(), other)),
            Err(EndpointError::NotFound)
        ));
        assert!(ready(svc.delete(&acme(), endpoint_id())).is_ok());
    }

    fn info(id: u128, at: OffsetDateTime) -> DeliveryInfo {
        DeliveryInfo {
            created_at: at,
            ..DeliveryInfo::queued(
                DeliveryId::from_uuid(Uuid::from_u128(id)),
                endpoint_id(),
                EventKind::LeadCreated,
                at,
            )
        }
    }

    #[test]
    fn the_delivery_log_is_paged_with_the_partners_own_cursor() {
        let mut ports = Ports::new();
        let mut seq = Sequence::new();
        ports
            .repo
            .expect_deliveries()
            .withf(|p, f| *p == acme() && f.after.is_none() && f.limit == 3)
            .times(1)
            .in_sequence(&mut seq)
            .returning(|_, _| Ok((1..=3).map(|n| info(n, NOW)).collect()));
        ports
            .repo
            .expect_deliveries()
            .withf(|_, f| {
                f.after
                    == Some(Position {
                        created_at: NOW,
                        id: Uuid::from_u128(2),
                    })
                    && f.statuses == [DeliveryStatus::Failed]
            })
            .times(1)
            .in_sequence(&mut seq)
            .returning(|_, _| Ok(vec![info(3, NOW)]));
        let svc = ports.service();
        let q = DeliveryQuery {
            limit: 2,
            ..DeliveryQuery::default()
        };
        let first = ready(svc.deliveries(&acme(), &q)).expect("page");
        assert_eq!(first.items.len(), 2);
        let cursor = first.next_cursor.expect("a next page");
        let next = DeliveryQuery {
            cursor: Some(cursor.clone()),
            statuses: vec![DeliveryStatus::Failed],
            ..q.clone()
        };
        let second = ready(svc.deliveries(&acme(), &next)).expect("page");
        assert_eq!(second.items.len(), 1);
        assert_eq!(second.next_cursor, None);
        // Another partner's cursor (or a forged one) reads nothing.
        let beta = PartnerId::parse("beta").expect("id");
        assert!(matches!(
            ready(svc.deliveries(&beta, &next)),
            Err(EndpointError::BadCursor)
        ));
    }

    #[test]
    fn a_resend_requeues_through_the_outbox_and_answers_the_delivery_as_requeued() {
        let id = DeliveryId::from_uuid(Uuid::from_u128(5));
        let mut seq = Sequence::new();
        let mut tx = MockWebhookTransaction::new();
        tx.expect_requeue()
            .withf(move |p, which, now| {
                *p == acme() && *which == Requeue::Delivery(id) && *now == NOW
            })
            .times(1)
            .in_sequence(&mut seq)
            .returning(|_, _, _| {
                Ok(Some(Requeued {
                    requeued: 1,
                    remaining: 0,
                }))
            });
        tx.expect_delivery()
            .times(1)
            .in_sequence(&mut seq)
            .returning(|_, _| Ok(Some(info(5, NOW - time::Duration::HOUR))));
        tx.expect_commit()
            .times(1)
            .in_sequence(&mut seq)
            .returning(|| Ok(()));
        let mut ports = Ports::new();
        ports.tx = Some(tx);
        let d = ready(ports.service().resend(&acme(), id)).expect("resent");
        assert_eq!(d.id, id);
        // Another partner's delivery: nothing committed.
        let mut tx = MockWebhookTransaction::new();
        tx.expect_requeue().returning(|_, _, _| Ok(None));
        tx.expect_delivery().never();
        tx.expect_commit().never();
        let mut ports = Ports::new();
        ports.tx = Some(tx);
        assert!(matches!(
            ready(ports.service().resend(&acme(), id)),
            Err(EndpointError::DeliveryNotFound)
        ));
        // Its endpoint is disabled: nothing made pending, nothing committed.
        let mut tx = MockWebhookTransaction::new();
        tx.expect_requeue()
            .returning(|_, _, _| Ok(Some(Requeued::default())));
        tx.expect_delivery().never();
        tx.expect_commit().never();
        let mut ports = Ports::new();
        ports.tx = Some(tx);
        assert!(matches!(
            ready(ports.service().resend(&acme(), id)),
            Err(EndpointError::Disabled)
        ));
    }

    #[test]
    fn an_action_is_admitted_within_the_budget_and_its_time_stored() {
        let mut seq = Sequence::new();
        let mut tx = MockWebhookTransaction::new();
        tx.expect_lock_action_calls()
            .withf(|p| *p == acme())
            .times(1)
            .in_sequence(&mut seq)
            .returning(|_| Ok(vec![NOW - time::Duration::minutes(5)]));
        tx.expect_store_action_calls()
            .withf(|p, calls| *p == acme() && calls == [NOW])
            .times(1)
            .in_sequence(&mut seq)
            .returning(|_, _| Ok(()));
        tx.expect_commit()
            .times(1)
            .in_sequence(&mut seq)
            .returning(|| Ok(()));
        let mut ports = Ports::new();
        ports.tx = Some(tx);
        ready(ports.service().spend_action(&acme())).expect("admitted");
        // Twenty within the minute: refused, nothing stored.
        let mut tx = MockWebhookTransaction::new();
        tx.expect_lock_action_calls()
            .returning(|_| Ok(vec![NOW - time::Duration::seconds(30); 20]));
        tx.expect_store_action_calls().never();
        tx.expect_commit().never();
        let mut ports = Ports::new();
        ports.tx = Some(tx);
        assert!(matches!(
            ready(ports.service().spend_action(&acme())),
            Err(EndpointError::OverBudget { retry_after: 30 })
        ));
    }

    #[test]
    fn a_ping_is_published_to_its_endpoint_only_and_answered_as_queued() {
        let id = DeliveryId::generate_at(&sevens(), NOW);
        let mut seq = Sequence::new();
        let mut tx = MockWebhookTransaction::new();
        tx.expect_publish()
            .withf(move |events, now| {
                *now == NOW
                    && events == [DomainEvent::ping(acme(), endpoint_id(), id)]
                    && events[0].to
                        == Recipients::Endpoint {
                            endpoint: endpoint_id(),
                            delivery: id,
                        }
                    && events[0].event
                        == Event::Ping {
                            endpoint: endpoint_id(),
                        }
            })
            .times(1)
            .in_sequence(&mut seq)
            .returning(|_, _| Ok(1));
        tx.expect_commit()
            .times(1)
            .in_sequence(&mut seq)
            .returning(|| Ok(()));
        let mut ports = Ports::new().with_endpoint(endpoint(false, None));
        ports.tx = Some(tx);
        let d = ready(ports.service().ping(&acme(), endpoint_id())).expect("queued");
        assert_eq!(
            d,
            DeliveryInfo::queued(id, endpoint_id(), EventKind::Ping, NOW)
        );
    }

    #[test]
    fn a_ping_needs_an_enabled_endpoint_that_still_exists() {
        // Disabled or unknown: no transaction is begun.
        let ports = Ports::new().with_endpoint(endpoint(true, None));
        let svc = ports.service();
        assert!(matches!(
            ready(svc.ping(&acme(), endpoint_id())),
            Err(EndpointError::Disabled)
        ));
        assert!(matches!(
            ready(svc.ping(&acme(), EndpointId::from_uuid(Uuid::nil()))),
            Err(EndpointError::NotFound)
        ));
        // Deleted between the read and the write: nothing written, nothing committed.
        let mut tx = MockWebhookTransaction::new();
        tx.expect_publish().returning(|_, _| Ok(0));
        tx.expect_commit().never();
        let mut ports = Ports::new().with_endpoint(endpoint(false, None));
        ports.tx = Some(tx);
        assert!(matches!(
            ready(ports.service().ping(&acme(), endpoint_id())),
            Err(EndpointError::NotFound)
        ));
    }

    #[test]
    fn recover_requeues_the_failed_deliveries_of_the_last_seven_days() {
        let since = NOW - time::Duration::days(2);
        let mut tx = MockWebhookTransaction::new();
        tx.expect_requeue()
            .withf(move |p, which, now| {
                *p == acme()
                    && *which
                        == Requeue::FailedSince {
                            endpoint: endpoint_id(),
                            since,
                            limit: RECOVER_LIMIT,
                        }
                    && *now == NOW
            })
            .times(1)
            .returning(|_, _, _| {
                Ok(Some(Requeued {
                    requeued: 4,
                    remaining: 2,
                }))
            });
        tx.expect_commit().times(1).returning(|| Ok(()));
        let mut ports = Ports::new().with_endpoint(endpoint(false, None));
        ports.tx = Some(tx);
        assert_eq!(
            ready(ports.service().recover(&acme(), endpoint_id(), since)).expect("recovered"),
            Requeued {
                requeued: 4,
                remaining: 2
            }
        );
    }

    #[test]
    fn recover_is_refused_outside_its_window_and_for_a_disabled_endpoint() {
        let mut ports = Ports::new();
        ports.repo.expect_endpoint().never();
        let svc = ports.service();
        for since in [NOW + time::Duration::SECOND, NOW - time::Duration::days(8)] {
            assert!(matches!(
                ready(svc.recover(&acme(), endpoint_id(), since)),
                Err(EndpointError::BadSince)
            ));
        }
        let svc = Ports::new().with_endpoint(endpoint(true, None)).service();
        assert!(matches!(
            ready(svc.recover(&acme(), endpoint_id(), NOW)),
            Err(EndpointError::Disabled)
        ));
        // Deleted meanwhile: the outbox finds no such endpoint; nothing committed.
        let mut tx = MockWebhookTransaction::new();
        tx.expect_requeue().returning(|_, _, _| Ok(None));
        tx.expect_commit().never();
        let mut ports = Ports::new().with_endpoint(endpoint(false, None));
        ports.tx = Some(tx);
        assert!(matches!(
            ready(ports.service().recover(&acme(), endpoint_id(), NOW)),
            Err(EndpointError::NotFound)
        ));
    }
}
