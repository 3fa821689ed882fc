//! The lead service: ingest, progressive enrichment, and the keyset listing.

use std::sync::Arc;

use crate::account::auth::{Presented, Sealed, TokenKey};
use crate::kernel::clock::Clock;
use crate::kernel::cursor::{self, CursorKey, Position};
use crate::kernel::error::RepoError;
use crate::kernel::ids::LeadId;
use crate::kernel::page::Page;
use crate::kernel::random::Random;
use crate::kernel::uow::UnitOfWork;
use crate::kernel::values::PartnerId;
use crate::lead::ports::{LeadRepo, LeadTransaction};
use crate::lead::{Lead, LeadError, LeadParts, LeadPatch, NewLead, creation_events, update_events};

/// What a leads listing asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeadQuery {
    /// At most this many leads (the page reads one more to learn whether a next page exists).
    pub limit: u16,
    /// The `nextCursor` of the previous page, if any.
    pub cursor: Option<String>,
    /// Whether test leads are listed too.
    pub include_test: bool,
}

/// Errors of [`LeadService::ingest`].
#[derive(Debug, thiserror::Error)]
pub enum IngestLeadError {
    /// No partner has the lead's `partnerId`.
    #[error("no partner with that partnerId")]
    UnknownPartner,
    /// The lead is one the contract rules out (a test flag outside `headless_intake`).
    #[error(transparent)]
    Invalid(#[from] LeadError),
    /// The store failed.
    #[error(transparent)]
    Repo(#[from] RepoError),
}

/// Errors of [`LeadService::list`].
#[derive(Debug, thiserror::Error)]
pub enum ListLeadsError {
    /// The cursor is not one this service signed for the partner (400).
    #[error("cursor is invalid: pass the nextCursor of a previous page unchanged")]
    BadCursor,
    /// The store failed.
    #[error(transparent)]
    Repo(#[from] RepoError),
}

/// Errors of [`LeadService::patch`].
#[derive(Debug, thiserror::Error)]
pub enum PatchLeadError {
    /// No lead has that id (404).
    #[error("no such lead")]
    NotFound,
    /// The store failed.
    #[error(transparent)]
    Repo(#[from] RepoError),
}

/// Lead ingest and listing.
#[derive(Debug, Clone)]
pub struct LeadService {
    repo: Arc<dyn LeadRepo>,
    uow: Arc<dyn UnitOfWork<dyn LeadTransaction>>,
    clock: Arc<dyn Clock>,
    rng: Arc<dyn Random>,
    cursors: CursorKey,
}

impl LeadService {
    /// The service over its reads, its unit of work, the clock, the randomness ids are drawn from and
    /// the key that signs the listing's cursors.
    pub fn new(
        repo: Arc<dyn LeadRepo>,
        uow: Arc<dyn UnitOfWork<dyn LeadTransaction>>,
        clock: Arc<dyn Clock>,
        rng: Arc<dyn Random>,
        cursors: CursorKey,
    ) -> Self {
        Self {
            repo,
            uow,
            clock,
            rng,
            cursors,
        }
    }

    /// Stores a lead and, in the same transaction, the events it causes.
    pub async fn ingest(&self, new: NewLead) -> Result<Lead, IngestLeadError> {
        let now = self.clock.now();
        let lead = Lead::new(LeadParts {
            id: LeadId::generate_at(self.rng.as_ref(), now),
            partner_id: new.partner_id,
            sub_id: new.sub_id,
            first_name: new.first_name,
            last_name: new.last_name,
            email: new.email.as_str().to_owned(),
            email_consent: new.email_consent,
            phone: new.phone.map(|p| p.as_str().to_owned()),
            sms_consent: new.sms_consent,
            origin: new.origin,
            location: new.location,
            question_id: new.question_id,
            test: new.test,
            created_at: now,
            updated_at: now,
        })?;
        let mut tx = self.uow.begin().await?;
        if !tx.insert_lead(&lead).await? {
            return Err(IngestLeadError::UnknownPartner);
        }
        tx.publish(&creation_events(&lead), now).await?;
        tx.commit().await?;
        Ok(lead)
    }

    /// Applies a patch to the locked lead and publishes [`update_events`], in one transaction.
    pub async fn patch(&self, id: LeadId, patch: &LeadPatch) -> Result<Lead, PatchLeadError> {
        let now = self.clock.now();
        let mut tx = self.uow.begin().await?;
        let before = tx.lock_lead(id).await?.ok_or(PatchLeadError::NotFound)?;
        let after = patch.apply(&before, now);
        tx.update_lead(&after).await?;
        tx.publish(&update_events(&before, &after), now).await?;
        tx.commit().await?;
        Ok(after)
    }

    /// A page of the partner's leads, newest first.
    pub async fn list(
        &self,
        partner: &PartnerId,
        q: &LeadQuery,
    ) -> Result<Page<Lead>, ListLeadsError> {
        let after = match &q.cursor {
            None => None,
            Some(c) => Some(
                self.cursors
                    .decode(partner, c)
                    .ok_or(ListLeadsError::BadCursor)?,
            ),
        };
        let leads = self
            .repo
            .page_leads(partner, after, q.include_test, q.limit.saturating_add(1))
            .await?;
        Ok(self.page(partner, q.limit, leads))
    }

    /// The page [`Self::list`] answers, read in the same round trip as the presented token's
    /// record, and sealed until authentication has passed ([`crate::account::auth::AuthService::open`]);
    /// then [`Self::finish`] checks the cursor against the authenticated partner. A cursor that
    /// is not even well-formed reads no rows (the answer will be 400 after authentication).
    pub async fn list_for_token(
        &self,
        token: &Presented,
        q: &LeadQuery,
    ) -> Result<Sealed<Vec<Lead>>, RepoError> {
        let (after, limit) = match &q.cursor {
            None => (None, q.limit.saturating_add(1)),
            Some(c) => match cursor::peek(c) {
                Some(pos) => (Some(pos), q.limit.saturating_add(1)),
                None => (None, 0),
            },
        };
        self.repo
            .page_leads_for_token(token.hash(), self.clock.now(), after, q.include_test, limit)
            .await
    }

    /// The lead with this id of the partner of the token of `key`, test leads included
    /// (extensions §8.2: as the listing with `includeTest=true`), read with the token's record
    /// in one round trip and sealed until authentication passes.
    pub async fn find_for_token(
        &self,
        key: TokenKey,
        id: LeadId,
    ) -> Result<Sealed<Option<Lead>>, RepoError> {
        self.repo.lead_for_token(key, id).await
    }

    /// The answer of [`Self::list_for_token`] once the request is authenticated as `partner`:
    /// 400 unless the cursor verifies for that partner (a verified cursor names the position
    /// [`cursor::peek`] read at: the same bytes).
    pub fn finish(
        &self,
        partner: &PartnerId,
        q: &LeadQuery,
        leads: Vec<Lead>,
    ) -> Result<Page<Lead>, ListLeadsError> {
        if let Some(c) = &q.cursor
            && self.cursors.decode(partner, c).is_none()
        {
            return Err(ListLeadsError::BadCursor);
        }
        // The statement filtered by the token's partner; this keeps a faulty adapter honest.
        if leads.iter().any(|l| l.partner_id != *partner) {
            return Err(RepoError::new("a page for the token held another partner's lead").into());
        }
        Ok(self.page(partner, q.limit, leads))
    }

    /// Up to `limit` of `leads` (read with one more to learn whether a next page exists).
    fn page(&self, partner: &PartnerId, limit: u16, mut leads: Vec<Lead>) -> Page<Lead> {
        let more = leads.len() > usize::from(limit);
        leads.truncate(usize::from(limit));
        let next_cursor = more.then(|| leads.last()).flatten().map(|l| {
            self.cursors.encode(
                partner,
                Position {
                    created_at: l.created_at,
                    id: l.id.as_uuid(),
                },
            )
        });
        Page {
            items: leads,
            next_cursor,
            limit,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lead::tests::lead;
    use time::macros::datetime;
    use uuid::Uuid;

    /// The largest limit a caller can ask for does not overflow (it reads one more to learn
    /// whether a next page exists).
    #[test]
    fn the_largest_limit_reads_without_overflowing() {
        use crate::kernel::clock::FixedClock;
        use crate::kernel::random::SystemRandom;
        use crate::kernel::uow::BeginsOnce;
        use crate::lead::ports::MockLeadRepo;
        use futures_util::FutureExt;

        let mut repo = MockLeadRepo::new();
        repo.expect_page_leads()
            .withf(|_, _, _, limit| *limit == u16::MAX)
            .returning(|_, _, _, _| Ok(vec![]));
        let svc = LeadService::new(
            Arc::new(repo),
            Arc::new(BeginsOnce::never()),
            Arc::new(FixedClock::new(datetime!(2026-11-21 10:00 UTC))),
            Arc::new(SystemRandom::new()),
            CursorKey::new(b"k"),
        );
        let q = LeadQuery {
            limit: u16::MAX,
            cursor: None,
            include_test: false,
        };
        let page = svc
            .list(&PartnerId::parse("acme").expect("id"), &q)
            .now_or_never()
            .expect("ready")
            .expect("listed");
        assert!(page.items.is_empty());
    }

    /// The one-round-trip listing: a malformed cursor reads nothing; a cursor of another
    /// partner (or key) is refused after authentication even though a page was read for it.
    #[test]
    fn list_for_token_checks_the_cursor_against_the_authenticated_partner() {
        use crate::account::auth::AuthService;
        use crate::account::ports::MockTokenRepo;
        use crate::account::token::TokenPepper;
        use crate::kernel::clock::FixedClock;
        use crate::kernel::random::SystemRandom;
        use crate::kernel::uow::BeginsOnce;
        use crate::lead::ports::MockLeadRepo;
        use futures_util::FutureExt;

        let now = datetime!(2026-11-21 10:00 UTC);
        let clock = Arc::new(FixedClock::new(now));
        let key = CursorKey::new(b"k");
        let acme = PartnerId::parse("acme").expect("id");
        let beta = PartnerId::parse("beta").expect("id");
        let pos = Position {
            created_at: now,
            id: Uuid::from_u128(7),
        };
        let mut repo = MockLeadRepo::new();
        repo.expect_page_leads_for_token()
            .returning(move |_, at, after, _, limit| {
                assert_eq!(at, now);
                // A malformed cursor reads no rows; a well-formed one reads at its position.
                assert!(after.is_none() && limit == 0 || after == Some(pos) && limit == 3);
                Ok(Sealed::new(
                    None,
                    vec![lead("managed-website", None, false)],
                ))
            });
        let svc = LeadService::new(
            Arc::new(repo),
            Arc::new(BeginsOnce::never()),
            clock.clone(),
            Arc::new(SystemRandom::new()),
            key.clone(),
        );
        let auth = AuthService::new(
            Arc::new(MockTokenRepo::new()),
            Some(TokenPepper::new(b"p")),
            clock,
        );
        let header = format!("Bearer pk_live_{}", "K".repeat(43));
        let token = auth.present(Some(header.as_bytes())).expect("shape");
        let q = |cursor: Option<String>| LeadQuery {
            limit: 2,
            cursor,
            include_test: false,
        };
        for cursor in [Some("c1zz".to_owned()), Some(key.encode(&acme, pos))] {
            svc.list_for_token(&token, &q(cursor))
                .now_or_never()
                .expect("ready")
                .expect("read");
        }
        let rows = || vec![lead("managed-website", None, false)];
        assert!(matches!(
            svc.finish(&acme, &q(Some(key.encode(&beta, pos))), rows()),
            Err(ListLeadsError::BadCursor)
        ));
        assert!(matches!(
            svc.finish(&acme, &q(Some("c1zz".to_owned())), rows()),
            Err(ListLeadsError::BadCursor)
        ));
        let page = svc
            .finish(&acme, &q(Some(key.encode(&acme, pos))), rows())
            .expect("verified");
        assert_eq!(page.items.len(), 1);
        // A row of another partner is an adapter fault, never shown.
        let mut foreign = lead("managed-website", None, false);
        foreign.partner_id = beta.clone();
        assert!(matches!(
            svc.finish(&acme, &q(None), vec![foreign]),
            Err(ListLeadsError::Repo(_))
        ));
    }
}

/// The service's rules over the unit-of-work port, with no database: what it writes, publishes
/// and commits, and what it leaves uncommitted.
#[cfg(test)]
mod service_tests {
    use super::*;
    use crate::events::{DomainEvent, Event};
    use crate::kernel::clock::FixedClock;
    use crate::kernel::random::SystemRandom;
    use crate::kernel::uow::BeginsOnce;
    use crate::kernel::values::Email;
    use crate::lead::ports::MockLeadRepo;
    use crate::lead::ports::MockLeadTransaction;
    use crate::lead::{Origin, Phone, TestFlag};
    use futures_util::FutureExt;
    use mockall::Sequence;
    use time::OffsetDateTime;
    use time::macros::datetime;
    use uuid::Uuid;

    const NOW: OffsetDateTime = datetime!(2026-11-23 12:00 UTC);

    fn service(uow: BeginsOnce<dyn LeadTransaction>) -> LeadService {
        LeadService::new(
            Arc::new(MockLeadRepo::new()),
            Arc::new(uow),
            Arc::new(FixedClock::new(NOW)),
            Arc::new(SystemRandom::new()),
            CursorKey::new(b"k"),
        )
    }

    fn new_lead(origin: &str) -> NewLead {
        NewLead {
            partner_id: PartnerId::parse("acme").expect("id"),
            sub_id: None,
            first_name: "Ann".into(),
            last_name: "Lee".into(),
            email: Email::parse("ann@x.co").expect("email"),
            email_consent: true,
            phone: None,
            sms_consent: false,
            origin: Origin::parse(origin).expect("origin"),
            location: "Austin".into(),
            question_id: None,
            test: TestFlag::REAL,
        }
    }

    #[test]
    fn ingest_inserts_publishes_the_creation_events_then_commits() {
        let mut seq = Sequence::new();
        let mut tx = MockLeadTransaction::new();
        tx.expect_insert_lead()
            .times(1)
            .in_sequence(&mut seq)
            .returning(|_| Ok(true));
        tx.expect_publish()
            .withf(|events, now| {
                *now == NOW
                    && matches!(
                        events,
                        [DomainEvent {
                            event: Event::LeadCreated { .. },
                            ..
                        }]
                    )
            })
            .times(1)
            .in_sequence(&mut seq)
            .returning(|_, _| Ok(1));
        tx.expect_commit()
            .times(1)
            .in_sequence(&mut seq)
            .returning(|| Ok(()));
        let row = service(BeginsOnce::new(Box::new(tx)))
            .ingest(new_lead("managed-website"))
            .now_or_never()
            .expect("ready")
            .expect("ingested");
        assert_eq!(row.created_at, NOW);
    }

    #[test]
    fn ingest_for_an_unknown_partner_publishes_and_commits_nothing() {
        let mut tx = MockLeadTransaction::new();
        tx.expect_insert_lead().times(1).returning(|_| Ok(false));
        tx.expect_publish().never();
        tx.expect_commit().never();
        let r = service(BeginsOnce::new(Box::new(tx)))
            .ingest(new_lead("managed-website"))
            .now_or_never()
            .expect("ready");
        assert!(matches!(r, Err(IngestLeadError::UnknownPartner)));
    }

    /// Issue 21: a `NewLead` pairing a test flag with an origin that cannot carry one is
    /// refused before the store is asked (it used to reach the table's constraint).
    #[test]
    fn ingest_refuses_a_test_lead_outside_headless_intake() {
        let mut tx = MockLeadTransaction::new();
        tx.expect_insert_lead().never();
        tx.expect_commit().never();
        let headless = Origin::parse(crate::lead::HEADLESS_INTAKE).expect("origin");
        let mut lead = new_lead("managed-website");
        lead.test = TestFlag::parse(Some(true), Some("simulation"), &headless).expect("flag");
        let r = service(BeginsOnce::new(Box::new(tx)))
            .ingest(lead)
            .now_or_never()
            .expect("ready");
        assert!(matches!(
            r,
            Err(IngestLeadError::Invalid(
                crate::lead::LeadError::TestOutsideHeadlessIntake
            ))
        ));
    }

    fn stored(phone: Option<&str>) -> Lead {
        let mut l = crate::lead::tests::lead("managed-website", phone, true);
        l.id = LeadId::from_uuid(Uuid::from_u128(7));
        l
    }

    #[test]
    fn patch_locks_applies_stores_publishes_the_enrichment_and_commits() {
        let mut seq = Sequence::new();
        let mut tx = MockLeadTransaction::new();
        tx.expect_lock_lead()
            .times(1)
            .in_sequence(&mut seq)
            .returning(|_| Ok(Some(stored(None))));
        tx.expect_update_lead()
            .withf(|l| l.phone.as_deref() == Some("555-1") && l.updated_at == NOW)
            .times(1)
            .in_sequence(&mut seq)
            .returning(|_| Ok(()));
        tx.expect_publish()
            .withf(|events, _| matches!(events, [DomainEvent { event: Event::LeadEnriched { current_phone, .. }, .. }] if current_phone == "555-1"))
            .times(1)
            .in_sequence(&mut seq)
            .returning(|_, _| Ok(1));
        tx.expect_commit()
            .times(1)
            .in_sequence(&mut seq)
            .returning(|| Ok(()));
        let patch = LeadPatch {
            phone: Some(Some(Phone::parse("555-1").expect("phone"))),
            ..LeadPatch::default()
        };
        let row = service(BeginsOnce::new(Box::new(tx)))
            .patch(LeadId::from_uuid(Uuid::from_u128(7)), &patch)
            .now_or_never()
            .expect("ready")
            .expect("patched");
        assert_eq!(row.visible_phone(), "555-1");
    }

    #[test]
    fn patch_of_an_unknown_lead_writes_nothing() {
        let mut tx = MockLeadTransaction::new();
        tx.expect_lock_lead().times(1).returning(|_| Ok(None));
        tx.expect_update_lead().never();
        tx.expect_commit().never();
        let r = service(BeginsOnce::new(Box::new(tx)))
            .patch(LeadId::from_uuid(Uuid::from_u128(7)), &LeadPatch::default())
            .now_or_never()
            .expect("ready");
        assert!(matches!(r, Err(PatchLeadError::NotFound)));
    }

    #[test]
    fn a_failed_publish_is_not_committed() {
        let mut tx = MockLeadTransaction::new();
        tx.expect_lock_lead()
            .returning(|_| Ok(Some(stored(Some("555-0")))));
        tx.expect_update_lead().returning(|_| Ok(()));
        tx.expect_publish()
            .returning(|_, _| Err(RepoError::new("outbox down")));
        tx.expect_commit().never();
        let patch = LeadPatch {
            phone: Some(Some(Phone::parse("555-1").expect("phone"))),
            ..LeadPatch::default()
        };
        let r = service(BeginsOnce::new(Box::new(tx)))
            .patch(LeadId::from_uuid(Uuid::from_u128(7)), &patch)
            .now_or_never()
            .expect("ready");
        assert!(matches!(r, Err(PatchLeadError::Repo(_))));
    }
}
