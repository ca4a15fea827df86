//! What one acquisition knows, shared by the round that makes it, the
//! calls still in flight, the guard that holds it, the keeper that refreshes
//! it and the releases that end it: its uid and arguments, and how each
//! locker answered.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::time::Instant;

use crate::coordinator::Coordinator;
use crate::quorum::Answer;
use crate::{LockArgs, LockMode};

/// What one acquisition knows about each locker, shared by the caller, the
/// calls still in flight and, once granted, the guard.
pub(crate) struct Acquisition {
    pub(crate) coord: Arc<Coordinator>,
    pub(crate) args: LockArgs,
    pub(crate) mode: LockMode,
    /// When the lock calls were sent. Every grant happened after this, so
    /// no locker can expire the entry before `started + validity`.
    pub(crate) started: Instant,
    slots: Mutex<Slots>,
}

impl Acquisition {
    pub(crate) fn new(
        coord: Arc<Coordinator>,
        args: LockArgs,
        mode: LockMode,
        started: Instant,
    ) -> Self {
        let n = coord.lockers.len();
        Acquisition {
            coord,
            args,
            mode,
            started,
            slots: Mutex::new(Slots {
                answers: vec![None; n],
                released: false,
            }),
        }
    }
}

struct Slots {
    /// `None` while the locker has not answered.
    answers: Vec<Option<Answer>>,
    /// Set once the acquisition is abandoned or released. Any grant that is
    /// recorded afterwards must be undone by whoever records it.
    released: bool,
}

/// A locker to unlock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Target {
    pub(crate) index: usize,
    /// Whether it granted. A locker whose call failed may or may not hold
    /// the entry, so it is unlocked too, but without the quick retries a
    /// waiting `unlock()` gives a grant: its retries go straight to the
    /// locker's background queue.
    pub(crate) granted: bool,
}

/// Who to unlock when an acquisition ends.
pub(crate) struct ReleasePlan {
    /// Lockers that granted, or failed in a way that may hide a grant.
    pub(crate) targets: Vec<Target>,
    /// Lockers that refused: they never held this uid.
    pub(crate) refused: usize,
}

impl Acquisition {
    fn slots(&self) -> MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records locker `index`'s answer. Returns `true` when the acquisition
    /// was already released and the answer may be a grant, so the caller
    /// must unlock that locker itself.
    pub(crate) fn record(&self, index: usize, answer: Answer) -> bool {
        let mut slots = self.slots();
        slots.answers[index] = Some(answer);
        slots.released && answer != Answer::Refused
    }

    /// Marks the acquisition released and says which lockers to unlock.
    /// Lockers still in flight are not targets: their call undoes its own
    /// grant when it finishes. A second call returns an empty plan.
    pub(crate) fn begin_release(&self) -> ReleasePlan {
        let mut slots = self.slots();
        if slots.released {
            return ReleasePlan {
                targets: Vec::new(),
                refused: 0,
            };
        }
        slots.released = true;
        let mut plan = ReleasePlan {
            targets: Vec::new(),
            refused: 0,
        };
        for (index, answer) in slots.answers.iter().enumerate() {
            match answer {
                Some(Answer::Refused) => plan.refused += 1,
                Some(answer @ (Answer::Granted | Answer::Failed)) => plan.targets.push(Target {
                    index,
                    granted: *answer == Answer::Granted,
                }),
                None => {}
            }
        }
        plan
    }

    /// The lockers that currently hold a grant for this acquisition.
    pub(crate) fn granted(&self) -> usize {
        let slots = self.slots();
        slots
            .answers
            .iter()
            .filter(|a| **a == Some(Answer::Granted))
            .count()
    }
}
