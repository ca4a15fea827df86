//! `FencingGate`: the resource's half of fencing, which refuses work carrying
//! a token older than one it has already accepted.
//!
//! A lease-based lock cannot stop a holder that paused past its lease from
//! acting afterwards: by the time it wakes, somebody else may hold the lock.
//! Fencing moves the last check to the resource. Every holder gets a token
//! from [`WriteGuard::fencing_token`](crate::WriteGuard::fencing_token) that
//! is strictly greater than the token of every conflicting holder before it,
//! and sends it with each write; the resource remembers the largest token it
//! has accepted and refuses smaller ones. The late write of the paused holder
//! then carries a token smaller than its successor's, and is refused.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How far ahead of a locker's clock a fencing floor may be, and how far a
/// locker's clock may step back across its own restart. A floor is the
/// token another locker drew, so this is also how closely the lockers'
/// wall clocks must agree for fencing to work: with clocks further apart,
/// drawing a token fails with an error naming the clocks, it never goes
/// back. The same constant for every locker, `LocalLocker`, lock server and
/// Redis node, whatever its settings: a tolerance that grew with a setting
/// would let one client push a token past what the others accept.
pub const FENCE_CLOCK_TOLERANCE: Duration = Duration::from_secs(1);

/// How long after a restart a locker draws no fencing token, at least
/// (longer when its quarantine is). Four tolerances: a token drawn after a
/// restart is at least the locker's clock then, which is at least
/// `4 − 1 = 3` tolerances past the clock of any earlier draw, and every
/// earlier token was at most that clock plus one tolerance (see
/// [`FENCE_CLOCK_TOLERANCE`] and `src/quorum/fence.rs`).
pub const FENCE_QUARANTINE: Duration = Duration::from_secs(4);

/// A token was older than one the resource already accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "fencing token {token} is stale: the resource already accepted token {newest} from a later \
     holder; this holder lost its lock, so redo the work under a fresh lock"
)]
pub struct StaleToken {
    /// The token that was refused.
    pub token: u64,
    /// The largest token accepted so far.
    pub newest: u64,
}

/// Remembers the largest fencing token a resource has accepted and refuses
/// older ones.
///
/// Put one in front of whatever the lock protects (a file, a table, a
/// service's handler) and call [`admit`](Self::admit) with the token that
/// came with each request, *atomically with* the work it admits when several
/// requests can race (for example inside the same database transaction, or
/// under the same local mutex as the write). Equal tokens are admitted: one
/// holder may write many times.
///
/// ```
/// use quorum_lock::FencingGate;
///
/// let gate = FencingGate::new();
/// assert!(gate.admit(7).is_ok());   // holder A
/// assert!(gate.admit(9).is_ok());   // holder B, after A lost the lock
/// let late = gate.admit(7);         // A wakes up and writes
/// assert_eq!(late.unwrap_err().newest, 9);
/// ```
#[derive(Debug, Default)]
pub struct FencingGate {
    newest: AtomicU64,
}

impl FencingGate {
    /// A gate that has accepted nothing yet.
    pub fn new() -> FencingGate {
        FencingGate::default()
    }

    /// A gate that continues from `newest`, for example a value persisted
    /// with the resource so that a restart of the resource does not forget
    /// it.
    pub fn starting_at(newest: u64) -> FencingGate {
        FencingGate {
            newest: AtomicU64::new(newest),
        }
    }

    /// Admits `token` if it is at least the largest accepted so far, and
    /// remembers it; refuses it with [`StaleToken`] otherwise.
    pub fn admit(&self, token: u64) -> Result<(), StaleToken> {
        let previous = self.newest.fetch_max(token, Ordering::AcqRel);
        if token >= previous {
            Ok(())
        } else {
            Err(StaleToken {
                token,
                newest: previous,
            })
        }
    }

    /// The largest token accepted so far (0 when none).
    pub fn newest(&self) -> u64 {
        self.newest.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::FencingGate;

    #[test]
    fn admits_equal_and_newer_refuses_older() {
        let gate = FencingGate::starting_at(10);
        assert_eq!(gate.admit(9).unwrap_err().newest, 10);
        assert!(gate.admit(10).is_ok());
        assert!(gate.admit(11).is_ok());
        assert_eq!(gate.newest(), 11);
        let err = gate.admit(10).unwrap_err();
        assert_eq!((err.token, err.newest), (10, 11));
        assert!(err.to_string().contains("stale"));
    }
}
