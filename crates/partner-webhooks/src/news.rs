//! How long news (a `NOTIFY` that deliveries were written) may wait for room before the worker
//! claims on it ([`NewsFold`]; issue 22, the live drain's empty claims).

use std::time::Duration;

/// The longest a claim on news waits for room ([`NewsFold`]).
const NEWS_FOLD_MAX: Duration = Duration::from_millis(20);
/// The first wait after a claim on news found nothing (then twice as long each time, up to
/// [`NEWS_FOLD_MAX`]).
const NEWS_FOLD_MIN: Duration = Duration::from_millis(1);

/// How long news (deliveries written, endpoint unknown: `NOTIFY webhook_deliveries` names none)
/// may wait for room before it is claimed on, while every endpoint this worker holds is full.
///
/// Under a backlog to one endpoint, each notification woke the worker, whose only endpoint had
/// no room (it is topped up once half its capacity is free, and then wakes the worker itself):
/// the claim found nothing, three claims in four (issue 22). The news cannot be told apart from
/// another endpoint's first delivery, so it is not ignored: the worker waits for the room, at
/// most this bound, which is zero until a claim on news found nothing, doubles from
/// [`NEWS_FOLD_MIN`] with each one that found nothing, up to [`NEWS_FOLD_MAX`], and is zero
/// again as soon as one found something. So a worker whose news keeps finding work (another
/// endpoint's, or room) claims on it at once, and another endpoint's first delivery waits at
/// most [`NEWS_FOLD_MAX`] longer, only while every endpoint this worker holds is full.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NewsFold {
    bound: Duration,
}

impl NewsFold {
    /// How long news may wait for room; `None`: claim at once.
    pub(crate) fn bound(self) -> Option<Duration> {
        (!self.bound.is_zero()).then_some(self.bound)
    }

    /// A claim round made on news (not folded into one made for room) found deliveries or not.
    pub(crate) fn claimed_on_news(&mut self, found: bool) {
        self.bound = if found {
            Duration::ZERO
        } else {
            (self.bound * 2).clamp(NEWS_FOLD_MIN, NEWS_FOLD_MAX)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn news_waits_for_room_only_after_claims_on_news_found_nothing_and_at_most_the_bound() {
        let mut fold = NewsFold::default();
        assert_eq!(fold.bound(), None, "at first: claim at once");
        let mut bounds = Vec::new();
        for _ in 0..7 {
            fold.claimed_on_news(false);
            bounds.push(fold.bound().map(|b| b.as_millis()));
        }
        assert_eq!(
            bounds,
            [1, 2, 4, 8, 16, 20, 20].map(Some),
            "doubling from 1 ms up to 20 ms"
        );
        fold.claimed_on_news(true);
        assert_eq!(fold.bound(), None, "news that found work: at once again");
    }
}
