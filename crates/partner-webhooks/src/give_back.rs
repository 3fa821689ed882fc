//! Claims given back unattempted (their endpoint changed since the claim, or its row check failed
//! or answered too late: `Worker::attempt`), in batches: one `DeliveryRepo::release` statement
//! for every give-back queued while the previous one ran, instead of one statement each. After an
//! endpoint change every claimed delivery of it is given back within moments of the others; one
//! statement each queued them with the claims, outcome writes and row checks for the worker's few
//! pooled connections (docs/security.md, attack8's re-try of N13 at round trips 40 ms slower).
//!
//! The semantics are the store's, unchanged: only rows still pending under the lease that claimed
//! them lose the lease and the attempt the claim counted, due at once (endpoint changed) or after
//! `GIVEN_BACK_FOR` (check failed or late). Pure bookkeeping here; the worker runs the statements.

use partner_domain::kernel::ids::{DeliveryId, EndpointId};
use uuid::Uuid;

/// One claim to give back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GiveBack {
    pub(crate) id: DeliveryId,
    /// The lease it was claimed under: only the row still under it is given back.
    pub(crate) lease: Uuid,
    pub(crate) endpoint: EndpointId,
    /// Due at once (its endpoint changed: the next claim reads it as it is now), or only after
    /// `GIVEN_BACK_FOR` (its check failed or came too late: no loop against a slow database).
    pub(crate) at_once: bool,
}

/// The give-backs queued and not written yet, and whether a writer is running.
#[derive(Debug, Default)]
pub(crate) struct GiveBacks {
    queued: Vec<GiveBack>,
    writing: bool,
}

impl GiveBacks {
    /// Queues `g`; `true` when no writer runs and the caller must start one.
    pub(crate) fn push(&mut self, g: GiveBack) -> bool {
        self.queued.push(g);
        !std::mem::replace(&mut self.writing, true)
    }

    /// Everything queued since the last take, for one batch; `None` when nothing is (the writer
    /// then stops, and the next [`Self::push`] starts another).
    pub(crate) fn take(&mut self) -> Option<Vec<GiveBack>> {
        if self.queued.is_empty() {
            self.writing = false;
            None
        } else {
            Some(std::mem::take(&mut self.queued))
        }
    }
}

/// A batch's claims, as `DeliveryRepo::release` takes them: those due at once, and those due
/// after `GIVEN_BACK_FOR` (one statement each; usually only one of them is not empty).
pub(crate) fn split(batch: &[GiveBack]) -> [Vec<(DeliveryId, Uuid)>; 2] {
    let mut at_once = Vec::new();
    let mut later = Vec::new();
    for g in batch {
        if g.at_once {
            at_once.push((g.id, g.lease));
        } else {
            later.push((g.id, g.lease));
        }
    }
    [at_once, later]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn give_back(n: u128, at_once: bool) -> GiveBack {
        GiveBack {
            id: DeliveryId::from_uuid(Uuid::from_u128(n)),
            lease: Uuid::from_u128(100 + n),
            endpoint: EndpointId::from_uuid(Uuid::from_u128(1)),
            at_once,
        }
    }

    #[test]
    fn the_give_backs_queued_while_a_batch_is_written_go_in_the_next_one() {
        let mut q = GiveBacks::default();
        assert!(q.push(give_back(1, true)), "the first starts the writer");
        assert!(!q.push(give_back(2, true)), "the writer runs: queued");
        assert_eq!(q.take(), Some(vec![give_back(1, true), give_back(2, true)]));
        // While that batch is written, three more come.
        for n in 3..6 {
            assert!(!q.push(give_back(n, true)));
        }
        assert_eq!(
            q.take(),
            Some((3..6).map(|n| give_back(n, true)).collect()),
            "one batch for the three"
        );
        assert_eq!(q.take(), None, "nothing left: the writer stops");
        assert!(q.push(give_back(6, false)), "and the next starts one again");
    }

    #[test]
    fn a_batch_is_split_by_when_its_claims_are_due_again() {
        let batch = [give_back(1, true), give_back(2, false), give_back(3, true)];
        let [at_once, later] = split(&batch);
        let pair = |n: u128| {
            (
                DeliveryId::from_uuid(Uuid::from_u128(n)),
                Uuid::from_u128(100 + n),
            )
        };
        assert_eq!(at_once, vec![pair(1), pair(3)]);
        assert_eq!(later, vec![pair(2)]);
    }
}
