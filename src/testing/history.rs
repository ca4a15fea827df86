//! `History`: who believed they held which lock when, and the check that no
//! two conflicting holders ever believed it at once.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::time::Instant;

use super::event::{Event, EventKind};
use super::sweep::first_violation;
use super::violation::Violation;
use crate::LockMode;

/// A log of lock acquisitions, losses and releases, shared by the tasks of a
/// test (wrap it in an `Arc`), and a checker for mutual exclusion.
///
/// A holder believes it holds its lock from [`acquired`](Self::acquired)
/// until the first [`lost_signalled`](Self::lost_signalled) or
/// [`released`](Self::released); record `acquired` right after the lock is
/// granted and `released` right before unlocking. Events are ordered by time,
/// then by the order they were recorded in, so at one instant a release
/// recorded before an acquisition does not overlap it.
///
/// A holder id that acquires again while it still holds adds to what it
/// holds; its next loss or release ends all of it. A holder never conflicts
/// with itself.
///
/// ```
/// use quorum_lock::LockMode;
/// use quorum_lock::testing::History;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let h = History::new();
/// h.acquired("a", ["x"], LockMode::Write);
/// h.released("a");
/// h.acquired("b", ["x"], LockMode::Write);
/// assert!(h.check().is_ok());
/// h.acquired("c", ["x"], LockMode::Read); // b still holds x
/// let violation = h.check().unwrap_err();
/// assert_eq!((violation.earlier.holder.as_str(), violation.later.holder.as_str()), ("b", "c"));
/// # }
/// ```
#[derive(Debug, Default)]
pub struct History {
    events: Mutex<Vec<Event>>,
}

impl History {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock_events(&self) -> MutexGuard<'_, Vec<Event>> {
        self.events.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records that `holder` was granted `resources` in `mode`, now.
    pub fn acquired<I, S>(&self, holder: impl Into<String>, resources: I, mode: LockMode)
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let resources = resources.into_iter().map(Into::into).collect();
        self.record(holder, EventKind::Acquired { resources, mode });
    }

    /// Records that `holder` was told it lost its lock, now.
    pub fn lost_signalled(&self, holder: impl Into<String>) {
        self.record(holder, EventKind::LostSignalled);
    }

    /// Records that `holder` started releasing its lock, now.
    pub fn released(&self, holder: impl Into<String>) {
        self.record(holder, EventKind::Released);
    }

    /// Records that `holder` got fencing `token` for its lock, now.
    pub fn fenced(&self, holder: impl Into<String>, token: u64) {
        self.record(holder, EventKind::Fenced { token });
    }

    /// Checks that fencing tokens grow between conflicting holders: on each
    /// resource, a writer's token is above the token of every holder that
    /// acquired before it, and a reader's is above every earlier writer's.
    /// Holders are ordered by their acquisition; holders without a token
    /// are skipped. Reports the first pair found in acquisition order.
    pub fn check_fencing(&self) -> Result<(), FencingViolation> {
        let mut events = self.events();
        events.sort_by_key(|e| (e.at, e.seq));
        let mut tokens: HashMap<&str, u64> = HashMap::new();
        for e in &events {
            if let EventKind::Fenced { token } = e.kind {
                tokens.insert(&e.holder, token);
            }
        }
        // Per resource: the highest token of earlier writers and of earlier
        // holders of either mode, with who held it.
        let mut seen: HashMap<&str, [Option<(u64, &str)>; 2]> = HashMap::new();
        for e in &events {
            let EventKind::Acquired { resources, mode } = &e.kind else {
                continue;
            };
            let Some(&token) = tokens.get(e.holder.as_str()) else {
                continue;
            };
            for resource in resources {
                let [writers, anyone] = seen.entry(resource).or_default();
                let bound = match mode {
                    LockMode::Write => *anyone,
                    LockMode::Read => *writers,
                };
                if let Some((earlier_token, earlier)) = bound
                    && token <= earlier_token
                    && earlier != e.holder
                {
                    return Err(FencingViolation {
                        resource: resource.clone(),
                        earlier: earlier.to_owned(),
                        earlier_token,
                        later: e.holder.clone(),
                        later_token: token,
                    });
                }
                let holder = e.holder.as_str();
                if anyone.is_none_or(|(t, _)| t < token) {
                    *anyone = Some((token, holder));
                }
                if *mode == LockMode::Write && writers.is_none_or(|(t, _)| t < token) {
                    *writers = Some((token, holder));
                }
            }
        }
        Ok(())
    }

    /// Records `kind` for `holder` at the current time of tokio's clock.
    pub fn record(&self, holder: impl Into<String>, kind: EventKind) {
        let holder = holder.into();
        let mut events = self.lock_events();
        // Read under the lock, so that time never goes back along `seq`.
        let at = Instant::now();
        push(&mut events, at, holder, kind);
    }

    /// Records `kind` for `holder` at `at`, for histories built by hand or
    /// replayed from a log.
    pub fn record_at(&self, at: Instant, holder: impl Into<String>, kind: EventKind) {
        push(&mut self.lock_events(), at, holder.into(), kind);
    }

    /// How many events were recorded.
    pub fn len(&self) -> usize {
        self.lock_events().len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.lock_events().is_empty()
    }

    /// A copy of every event, in recording order.
    pub fn events(&self) -> Vec<Event> {
        self.lock_events().clone()
    }

    /// Checks that no two holders ever both believed they held a common
    /// resource in conflicting modes (write with write, or write with
    /// read). Reports the earliest such overlap.
    ///
    /// Runs in `O(e log e)` for `e` events times resources per lock.
    // The violation is a one-off test failure report; keeping it unboxed
    // keeps `v.earlier.holder` and pattern matching plain for users.
    #[allow(clippy::result_large_err)]
    pub fn check(&self) -> Result<(), Violation> {
        match first_violation(&self.lock_events()) {
            None => Ok(()),
            Some(violation) => Err(violation),
        }
    }
}

/// Appends an event numbered after the ones already recorded.
fn push(events: &mut Vec<Event>, at: Instant, holder: String, kind: EventKind) {
    let seq = events.len() as u64;
    events.push(Event {
        seq,
        at,
        holder,
        kind,
    });
}

/// Two conflicting holders whose fencing tokens did not grow: `later`
/// acquired after `earlier` but got a token no larger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FencingViolation {
    /// The resource both locked.
    pub resource: String,
    /// The holder that acquired first.
    pub earlier: String,
    /// Its token.
    pub earlier_token: u64,
    /// The holder that acquired later.
    pub later: String,
    /// Its token, not above `earlier_token`.
    pub later_token: u64,
}

impl fmt::Display for FencingViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "fencing token did not grow on {}: {} got {} after {} had {}",
            self.resource, self.later, self.later_token, self.earlier, self.earlier_token
        )
    }
}
