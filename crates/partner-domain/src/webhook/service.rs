//! Managing a partner's webhook endpoints and its delivery log, for partners and the operator
//! alike.

use std::sync::Arc;

use time::OffsetDateTime;

use crate::account::auth::{Sealed, TokenKey};
use crate::events::{DomainEvent, Requeue};
use crate::kernel::clock::Clock;
use crate::kernel::cursor::{self, CursorKey, Position};
use crate::kernel::error::RepoError;
use crate::kernel::ids::{DeliveryId, EndpointId};
use crate::kernel::page::Page;
use crate::kernel::random::Random;
use crate::kernel::uow::UnitOfWork;
use crate::kernel::values::PartnerId;
use crate::webhook::delivery::{
    ATTEMPT_LOG_LIMIT, DeliveryDetail, DeliveryFilter, DeliveryInfo, DeliveryQuery, RECOVER_WINDOW,
};
use crate::webhook::endpoint::{
    EndpointPatch, EndpointRow, MAX_ENDPOINTS, NewEndpoint, WebhookEndpoint,
};
use crate::webhook::ports::{AddressCheck, InsertEndpoint, WebhookRepo, WebhookTransaction};
use crate::webhook::signature::WebhookSecret;

/// Errors of the endpoint calls of [`WebhookService`].
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    #[error("an account may have at most 10 webhook endpoints")]
    TooMany,
    #[error("url must not resolve to a loopback, private or internal address")]
    InternalAddress,
    #[error("no such webhook endpoint")]
    NotFound,
    #[error("no partner with that partnerId")]
    UnknownPartner,
    #[error("no such webhook delivery")]
    DeliveryNotFound,
    #[error("cursor is invalid: pass the nextCursor of a previous page unchanged")]
    BadCursor,
    #[error("since must be within the last 7 days and not in the future")]
    BadSince,
    #[error(
        "the webhook endpoint is disabled; re-enable it with PATCH {{ \"enabled\": true }} first"
    )]
    Disabled,
    #[error(transparent)]
    Repo(#[from] RepoError),
}

/// Managing a partner's endpoints (for partners and the operator alike).
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
}

impl WebhookService {
    /// `cursors` signs the delivery listing's cursors (use a key of its own, not the leads').
    pub fn new(
        repo: Arc<dyn WebhookRepo>,
        uow: Arc<dyn UnitOfWork<dyn WebhookTransaction>>,
        addresses: Arc<dyn AddressCheck>,
        clock: Arc<dyn Clock>,
        rng: Arc<dyn Random>,
        allow_private: bool,
        cursors: CursorKey,
    ) -> Self {
        Self {
            repo,
            uow,
            addresses,
            clock,
            rng,
            allow_private,
            cursors,
            secret_overlap: time::Duration::hours(24),
        }
    }

    /// How long a rotated-out secret keeps signing (`PARTNER_WEBHOOK_SECRET_OVERLAP`; zero ends
    /// it at once). 24 hours unless set.
    pub fn with_secret_overlap(mut self, overlap: std::time::Duration) -> Self {
        self.secret_overlap = time::Duration::try_from(overlap).unwrap_or(time::Duration::MAX);
        self
    }

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

    pub async fn list(&self, partner: &PartnerId) -> Result<Vec<EndpointRow>, EndpointError> {
        let now = self.clock.now();
        Ok(self
            .repo
            .endpoints(partner)
            .await?
            .iter()
            .map(|e| e.row(now))
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
    pub fn rows(&self, endpoints: &[WebhookEndpoint]) -> Vec<EndpointRow> {
        let now = self.clock.now();
        endpoints.iter().map(|e| e.row(now)).collect()
    }

    pub async fn create(
        &self,
        partner: &PartnerId,
        new: NewEndpoint,
    ) -> Result<EndpointRow, EndpointError> {
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
            InsertEndpoint::Inserted => Ok(e.row_with_secret(now)),
            InsertEndpoint::TooMany => Err(EndpointError::TooMany),
            InsertEndpoint::UnknownPartner => Err(EndpointError::UnknownPartner),
        }
    }

    pub async fn update(
        &self,
        partner: &PartnerId,
        id: EndpointId,
        patch: EndpointPatch,
    ) -> Result<EndpointRow, EndpointError> {
        let mut e = self
            .repo
            .endpoint(partner, id)
            .await?
            .ok_or(EndpointError::NotFound)?;
        if let Some(u) = &patch.url {
            self.check_address(u).await?;
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
        if patch.expire_previous == Some(true) || e.previous_secret_expires_at.is_none() {
            e.previous_secret = None;
            e.previous_secret_expires_at = None;
        }
        match (patch.enabled, e.disabled_at) {
            (Some(true), Some(_)) => {
                e.disabled_at = None;
                e.disabled_reason = None;
            }
            (Some(false), None) => e.disabled_at = Some(self.clock.now()),
            _ => {}
        }
        e.updated_at = self.clock.now();
        if !self.repo.update_endpoint(&e).await? {
            return Err(EndpointError::NotFound);
        }
        Ok(if new_secret {
            e.row_with_secret(now)
        } else {
            e.row(now)
        })
    }

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

    /// [`Self::delivery`]'s answer for what was read: 404 when nothing was.
    pub fn found(detail: Option<DeliveryDetail>) -> Result<DeliveryDetail, EndpointError> {
        detail.ok_or(EndpointError::DeliveryNotFound)
    }

    /// Sends a delivery again: pending, due now, with a fresh retry budget; same id.
    pub async fn resend(
        &self,
        partner: &PartnerId,
        id: DeliveryId,
    ) -> Result<DeliveryInfo, EndpointError> {
        let now = self.clock.now();
        let mut tx = self.uow.begin().await?;
        tx.requeue(partner, Requeue::Delivery(id), now)
            .await?
            .ok_or(EndpointError::DeliveryNotFound)?;
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
        let id = DeliveryId::generate(self.rng.as_ref());
        let now = self.clock.now();
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
    /// ago, not in the future). Returns how many.
    pub async fn recover(
        &self,
        partner: &PartnerId,
        endpoint: EndpointId,
        since: OffsetDateTime,
    ) -> Result<u64, EndpointError> {
        let now = self.clock.now();
        if since > now || since < now - RECOVER_WINDOW {
            return Err(EndpointError::BadSince);
        }
        self.enabled_endpoint(partner, endpoint).await?;
        let mut tx = self.uow.begin().await?;
        let requeued = tx
            .requeue(partner, Requeue::FailedSince { endpoint, since }, now)
            .await?
            .ok_or(EndpointError::NotFound)?;
        tx.commit().await?;
        Ok(requeued)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::random::SystemRandom;
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
            cursor::CursorKey::new(b"deliveries"),
        );
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
}
