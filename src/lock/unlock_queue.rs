//! The unlocks a locker owes: one queue per locker, shared by every
//! runtime of a `Dsync`, drained by at most one task per runtime (see
//! `release::drain`).
//!
//! Invariants: an unlock is in `pending` or in one drain task's batch
//! (counted in `sending`) until it lands, is given up as expired, or fails
//! for good; a lost lock's clean-up is not sent before its holder let go
//! or its margin passed (`PendingUnlock::is_due`).

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::time::Instant;

use crate::{LockArgs, LockMode};

/// One unlock that failed and waits for its locker to come back.
pub(crate) struct PendingUnlock {
    pub(crate) args: LockArgs,
    pub(crate) mode: LockMode,
    /// After this the locker has expired the entry by itself.
    pub(crate) give_up: Instant,
    /// A lost lock's clean-up waits for its holder: not sent before
    /// `not_before` unless the holder let go of its guard.
    pub(crate) holder: Option<(Instant, Arc<crate::lock::loss::LossSignal>)>,
}

impl PendingUnlock {
    /// Whether it may be sent at `now`.
    pub(crate) fn is_due(&self, now: Instant) -> bool {
        self.holder
            .as_ref()
            .is_none_or(|(not_before, signal)| now >= *not_before || signal.holder_has_stopped())
    }
}

/// The unlocks a locker owes, drained by at most one task per runtime.
///
/// Funnelling retries through one queue per locker, instead of one retry
/// loop per failed call, is what keeps a locker that refuses or hangs for a
/// while from being hit by an unlock storm: however many rounds failed
/// against it, it sees one batch per backoff step.
#[derive(Default)]
pub(crate) struct UnlockQueue {
    state: Mutex<QueueState>,
}

#[derive(Default)]
pub(crate) struct QueueState {
    pub(crate) pending: Vec<PendingUnlock>,
    /// The tasks draining the queue: at most one per runtime, so that a
    /// runtime that is no longer driven cannot hold the retries hostage.
    pub(crate) drainers: Vec<(tokio::runtime::Id, u64)>,
    /// The last drainer id handed out.
    pub(crate) next_drainer: u64,
    /// Unlocks a drain task took from `pending` and is sending: with
    /// `pending`, what `Dsync::finish_releases` waits for (a drain task
    /// with nothing to send, on an idle runtime, holds nothing up).
    pub(crate) sending: usize,
}

impl UnlockQueue {
    pub(crate) fn lock(&self) -> MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
