//! What every lock of one `Dsync` shares: the lockers, the settings, the
//! backoff jitter and the queues of unlocks waiting to be retried.
//!
//! This module sits below every other part of the coordinator (`mutex`,
//! `round`, `guard`, `keeper`, `refresh`, `release`), so that data flows one
//! way: each of those uses only what sits below it.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rand::rngs::SmallRng;
use tokio::time::Instant;

use crate::{Lease, LockArgs, LockMode, NetLocker, RetryPolicy, Timeouts};

/// The shared core of a `Dsync`.
pub(crate) struct Coordinator {
    pub(crate) lockers: Box<[Arc<dyn NetLocker>]>,
    pub(crate) owner: Arc<str>,
    pub(crate) timeouts: Timeouts,
    pub(crate) retry: RetryPolicy,
    pub(crate) lease: Lease,
    /// One queue per locker, in the order of `lockers`.
    pub(crate) unlock_retries: Box<[UnlockQueue]>,
    rng: Mutex<SmallRng>,
}

impl Coordinator {
    pub(crate) fn new(
        lockers: Vec<Arc<dyn NetLocker>>,
        owner: Arc<str>,
        timeouts: Timeouts,
        retry: RetryPolicy,
        lease: Lease,
        rng: SmallRng,
    ) -> Self {
        let unlock_retries = lockers.iter().map(|_| UnlockQueue::default()).collect();
        Coordinator {
            lockers: lockers.into_boxed_slice(),
            owner,
            timeouts,
            retry,
            lease,
            unlock_retries,
            rng: Mutex::new(rng),
        }
    }

    /// A jittered wait before retry number `attempt`.
    pub(crate) fn backoff(&self, attempt: u32) -> Duration {
        let mut rng = self.rng.lock().unwrap_or_else(PoisonError::into_inner);
        self.retry.delay(attempt, &mut *rng)
    }
}

/// One unlock that failed and waits for its locker to come back.
pub(crate) struct PendingUnlock {
    pub(crate) args: LockArgs,
    pub(crate) mode: LockMode,
    /// After this the locker has expired the entry by itself.
    pub(crate) give_up: Instant,
}

/// The unlocks a locker owes, drained by at most one task at a time.
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
    /// Whether a task is draining the queue.
    pub(crate) draining: bool,
}

impl UnlockQueue {
    pub(crate) fn lock(&self) -> MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
