//! The events feed (extensions.md §8.1): every event of a partner that a webhook subscribed to
//! all four kinds would receive, oldest first, with a cursor that never skips an event.
//!
//! The position of an event is [`FeedPosition`] (its writing transaction's id, then its sequence
//! number). The store returns only events whose transaction id is below the oldest transaction
//! still running when it reads (the xmin of its snapshot): every transaction with a smaller id
//! has ended, so nothing can later appear before a position it returned. Why this and not a
//! timestamp keyset or a counter taken at commit: `docs/decisions.md`, "Events feed position".
//!
//! ```
//! use partner_domain::events::EventKind;
//! use partner_domain::webhook::feed::parse_types;
//!
//! assert_eq!(
//!     parse_types("order.created,lead.created,order.created"),
//!     Ok(vec![EventKind::OrderCreated, EventKind::LeadCreated])
//! );
//! assert!(parse_types("ping").is_err()); // tests are not events of the feed
//! ```

use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use time::OffsetDateTime;

use crate::account::auth::{Sealed, TokenKey};
use crate::events::{Event, EventKind};
use crate::kernel::clock::Clock;
use crate::kernel::cursor::{self, CursorKey, FeedPosition};
use crate::kernel::error::RepoError;
use crate::kernel::ids::EventId;
use crate::kernel::values::{PartnerId, ValueError};
use crate::webhook::payload::{Payload, Subjects};

/// `limit` when none is given.
pub const FEED_DEFAULT_LIMIT: u16 = 50;
/// The largest `limit` accepted.
pub const FEED_MAX_LIMIT: u16 = 200;

/// One event of the feed, with its place in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedEvent {
    /// The event's id.
    pub id: EventId,
    /// What it says.
    pub event: Event,
    /// When it happened.
    pub created_at: OffsetDateTime,
    /// Its place in the feed.
    pub position: FeedPosition,
}

impl FeedEvent {
    /// The event's `data`, from its record in `subjects` as read with the page; `None` when the
    /// record no longer exists.
    pub fn payload<'a>(&'a self, subjects: &'a Subjects) -> Option<Payload<'a>> {
        Payload::of(&self.event, subjects)
    }
}

/// A feed request, parsed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FeedQuery {
    /// The kinds asked for; empty: all of them.
    pub types: Vec<EventKind>,
    /// Only events created at or after this instant.
    pub since: Option<OffsetDateTime>,
    /// Page size.
    pub limit: u16,
    /// The `nextCursor` of the previous page.
    pub cursor: Option<String>,
}

/// `types`: a comma-separated subset of the four event names (never `ping`).
pub fn parse_types(s: &str) -> Result<Vec<EventKind>, ValueError> {
    static REASON: LazyLock<String> = LazyLock::new(|| {
        format!(
            "a comma-separated list of {}",
            EventKind::SUBSCRIBABLE_NAMES.replace(" or ", ", ")
        )
    });
    let mut out = Vec::new();
    for name in s.split(',') {
        let k =
            EventKind::parse(name.trim()).ok_or(ValueError::invalid("types", REASON.as_str()))?;
        if !out.contains(&k) {
            out.push(k);
        }
    }
    Ok(out)
}

/// What the store reads for one page: the partner's events in feed order after `after` (when
/// given), of the kinds `types` (never `ping`), created at or after `since`, at most `limit`,
/// all below the horizon of the read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedFilter {
    /// The kinds asked for; empty: all four.
    pub types: Vec<EventKind>,
    /// Only events created at or after this instant.
    pub since: Option<OffsetDateTime>,
    /// Only events after this position.
    pub after: Option<FeedPosition>,
    /// At most this many events.
    pub limit: u16,
}

/// What the store read for a page (or one event), in one snapshot.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FeedRead {
    /// The events read, in feed order.
    pub events: Vec<FeedEvent>,
    /// The records the events are about, as they are now.
    pub subjects: Subjects,
    /// The xmin of the read's snapshot: every transaction with a smaller id has ended.
    pub horizon: i64,
    /// The last position retention removed from the partner's feed, if any.
    pub pruned: Option<FeedPosition>,
}

/// The events feed's storage, scoped by the token's partner.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait EventFeedRepo: Send + Sync {
    /// The token of `key` and, for its partner when the token is live, the page `filter` asks
    /// for (events whose transaction id is below the snapshot's xmin only), the horizon and the
    /// last pruned position read in one statement, then the records the events are about.
    async fn events_for_token(
        &self,
        key: TokenKey,
        filter: &FeedFilter,
    ) -> Result<Sealed<FeedRead>, RepoError>;
    /// The token of `key` and its partner's event `id` (never a `ping`), with its record.
    async fn event_for_token(
        &self,
        key: TokenKey,
        id: EventId,
    ) -> Result<Sealed<FeedRead>, RepoError>;
}

crate::kernel::debug_port!(EventFeedRepo);

/// Why a feed request is refused.
#[derive(Debug, thiserror::Error)]
pub enum FeedError {
    /// The cursor is not one this feed gave the partner (400).
    #[error("cursor is invalid: pass the nextCursor of a previous page unchanged")]
    BadCursor,
    #[error(
        "events after this position are past the retention and were removed; resynchronise from the listings"
    )]
    /// Retention removed events after the cursor's position, or `since` is older than it (410).
    CursorExpired,
    /// No such event of the partner (404).
    #[error("no such event")]
    NotFound,
    /// The store failed.
    #[error(transparent)]
    Repo(#[from] RepoError),
}

/// A page of the feed.
#[derive(Debug, Clone, PartialEq)]
pub struct FeedPage {
    /// What the store read.
    pub read: FeedRead,
    /// Never empty: where the next poll starts.
    pub next_cursor: String,
    /// The page size used.
    pub limit: u16,
}

/// Reading the events feed.
#[derive(Debug, Clone)]
pub struct EventFeed {
    repo: Arc<dyn EventFeedRepo>,
    clock: Arc<dyn Clock>,
    cursors: CursorKey,
    retention: time::Duration,
}

impl EventFeed {
    /// `cursors` signs the feed's cursors; `retention` is `PARTNER_EVENT_RETENTION`.
    pub fn new(
        repo: Arc<dyn EventFeedRepo>,
        clock: Arc<dyn Clock>,
        cursors: CursorKey,
        retention: std::time::Duration,
    ) -> Self {
        Self {
            repo,
            clock,
            cursors,
            retention: time::Duration::try_from(retention).unwrap_or(time::Duration::MAX),
        }
    }

    /// The page `q` asks for, read with the token's record in one statement and sealed until
    /// authentication passes; then [`Self::finish`] checks the cursor against the authenticated
    /// partner. The cursor's position is read unverified ([`cursor::peek_feed`]), within the
    /// token's own partner's events; a cursor that is not even well-formed reads none.
    pub async fn read_for_token(
        &self,
        key: TokenKey,
        q: &FeedQuery,
    ) -> Result<Sealed<FeedRead>, RepoError> {
        let (after, limit) = match &q.cursor {
            None => (None, q.limit.saturating_add(1)),
            Some(c) => match cursor::peek_feed(c) {
                Some(pos) => (Some(pos), q.limit.saturating_add(1)),
                None => (None, 0),
            },
        };
        let filter = FeedFilter {
            types: if q.types.is_empty() {
                EventKind::SUBSCRIBABLE.to_vec()
            } else {
                q.types.clone()
            },
            since: q.since,
            after,
            limit,
        };
        self.repo.events_for_token(key, &filter).await
    }

    /// The answer for what [`Self::read_for_token`] read, once authenticated as `partner`: 400
    /// unless the cursor verifies for that partner; 410 when retention removed events after the
    /// cursor's position, or `since` is older than the retention.
    pub fn finish(
        &self,
        partner: &PartnerId,
        q: &FeedQuery,
        mut read: FeedRead,
    ) -> Result<FeedPage, FeedError> {
        let after = match &q.cursor {
            Some(c) => Some(
                self.cursors
                    .decode_feed(partner, c)
                    .ok_or(FeedError::BadCursor)?,
            ),
            None => None,
        };
        if let (Some(after), Some(pruned)) = (after, read.pruned)
            && pruned > after
        {
            return Err(FeedError::CursorExpired);
        }
        if let Some(since) = q.since
            && self
                .clock
                .now()
                .checked_sub(self.retention)
                .is_some_and(|oldest| since < oldest)
        {
            return Err(FeedError::CursorExpired);
        }
        read.events.truncate(usize::from(q.limit));
        let next_cursor = match (read.events.last(), &q.cursor) {
            (Some(last), _) => self.cursors.encode_feed(partner, last.position),
            (None, Some(given)) => given.clone(),
            // The current end of the feed: every transaction below the horizon has ended, so
            // every event still to come sorts after this position.
            (None, None) => self.cursors.encode_feed(
                partner,
                FeedPosition {
                    txid: read.horizon.saturating_sub(1),
                    seq: i64::MAX,
                },
            ),
        };
        Ok(FeedPage {
            read,
            next_cursor,
            limit: q.limit,
        })
    }

    /// One event of the token's partner, read with the token's record.
    pub async fn event_for_token(
        &self,
        key: TokenKey,
        id: EventId,
    ) -> Result<Sealed<FeedRead>, RepoError> {
        self.repo.event_for_token(key, id).await
    }

    /// [`Self::event_for_token`]'s answer: 404 when nothing was read.
    pub fn found(read: FeedRead) -> Result<FeedRead, FeedError> {
        if read.events.is_empty() {
            Err(FeedError::NotFound)
        } else {
            Ok(read)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::clock::FixedClock;
    use crate::kernel::ids::PayoutId;
    use time::macros::datetime;
    use uuid::Uuid;

    const NOW: OffsetDateTime = datetime!(2026-11-26 12:00 UTC);

    fn feed() -> EventFeed {
        EventFeed::new(
            Arc::new(MockEventFeedRepo::new()),
            Arc::new(FixedClock::new(NOW)),
            CursorKey::new(b"feed"),
            std::time::Duration::from_secs(30 * 86_400),
        )
    }

    fn acme() -> PartnerId {
        PartnerId::parse("acme").expect("id")
    }

    fn event(txid: i64, seq: i64) -> FeedEvent {
        FeedEvent {
            id: EventId::from_uuid(Uuid::from_u128(u128::try_from(seq).unwrap_or(0))),
            event: Event::PayoutCreated {
                payout: PayoutId::from_uuid(Uuid::nil()),
            },
            created_at: NOW,
            position: FeedPosition { txid, seq },
        }
    }

    fn read(events: Vec<FeedEvent>, pruned: Option<FeedPosition>) -> FeedRead {
        FeedRead {
            events,
            subjects: Subjects::default(),
            horizon: 100,
            pruned,
        }
    }

    fn query(limit: u16, cursor: Option<String>) -> FeedQuery {
        FeedQuery {
            limit,
            cursor,
            ..FeedQuery::default()
        }
    }

    #[test]
    fn the_next_cursor_is_never_empty() {
        let f = feed();
        // A full page: after its last event (the extra row read is dropped).
        let page = f
            .finish(
                &acme(),
                &query(2, None),
                read(vec![event(5, 1), event(6, 2), event(7, 3)], None),
            )
            .expect("page");
        assert_eq!(page.read.events.len(), 2);
        assert_eq!(
            f.cursors.decode_feed(&acme(), &page.next_cursor),
            Some(FeedPosition { txid: 6, seq: 2 })
        );
        // An empty page with a cursor: that cursor, unchanged.
        let given = page.next_cursor.clone();
        let empty = f
            .finish(&acme(), &query(2, Some(given.clone())), read(vec![], None))
            .expect("page");
        assert_eq!(empty.next_cursor, given);
        // An empty page without one: the end of the feed, just below the horizon.
        let end = f
            .finish(&acme(), &query(2, None), read(vec![], None))
            .expect("page");
        assert_eq!(
            f.cursors.decode_feed(&acme(), &end.next_cursor),
            Some(FeedPosition {
                txid: 99,
                seq: i64::MAX
            })
        );
    }

    #[test]
    fn a_cursor_expires_only_when_events_after_it_were_removed() {
        let f = feed();
        let at = FeedPosition { txid: 10, seq: 4 };
        let c = Some(f.cursors.encode_feed(&acme(), at));
        let before = Some(FeedPosition { txid: 9, seq: 50 });
        let after = Some(FeedPosition { txid: 10, seq: 5 });
        assert!(
            f.finish(&acme(), &query(5, c.clone()), read(vec![], before))
                .is_ok()
        );
        assert!(
            f.finish(&acme(), &query(5, c.clone()), read(vec![], Some(at)))
                .is_ok()
        );
        assert!(matches!(
            f.finish(&acme(), &query(5, c), read(vec![], after)),
            Err(FeedError::CursorExpired)
        ));
        // `since` older than the retention.
        let old = FeedQuery {
            since: Some(NOW - time::Duration::days(31)),
            ..query(5, None)
        };
        assert!(matches!(
            f.finish(&acme(), &old, read(vec![], None)),
            Err(FeedError::CursorExpired)
        ));
        let recent = FeedQuery {
            since: Some(NOW - time::Duration::days(29)),
            ..query(5, None)
        };
        assert!(f.finish(&acme(), &recent, read(vec![], None)).is_ok());
    }

    #[test]
    fn a_cursor_is_its_partners_own() {
        let f = feed();
        let c = f
            .cursors
            .encode_feed(&acme(), FeedPosition { txid: 1, seq: 1 });
        let beta = PartnerId::parse("beta").expect("id");
        assert!(matches!(
            f.finish(&beta, &query(5, Some(c)), read(vec![], None)),
            Err(FeedError::BadCursor)
        ));
        assert!(matches!(
            f.finish(
                &acme(),
                &query(5, Some("c1nope".into())),
                read(vec![], None)
            ),
            Err(FeedError::BadCursor)
        ));
    }

    #[test]
    fn types_are_the_four_kinds_never_ping() {
        assert_eq!(
            parse_types("order.created, lead.created,order.created"),
            Ok(vec![EventKind::OrderCreated, EventKind::LeadCreated])
        );
        assert!(parse_types("ping").is_err());
        assert!(parse_types("").is_err());
        assert!(parse_types("lead.created,").is_err());
    }
}
