//! Tunables of a `Dsync` coordinator: call deadlines, lease timing and
//! retry backoff and the checks that keep them consistent (deadlines built
//! from them saturate: `quorum::clock::after`).

use std::time::Duration;

use rand::{Rng, RngExt};

/// Deadlines for the calls a coordinator makes.
///
/// Every field may be `Duration::MAX` ("no limit"); deadlines saturate
/// instead of overflowing. [`DsyncBuilder::build`](crate::DsyncBuilder::build)
/// refuses zero deadlines (no remote locker could answer in time) and an
/// acquire timeout that is not shorter than the lease's
/// `validity - safety_margin`.
///
/// Build one with struct update syntax so that new fields keep their
/// defaults:
///
/// ```
/// use std::time::Duration;
/// use quorum_lock::Timeouts;
///
/// let t = Timeouts { acquire: Duration::from_millis(250), ..Timeouts::default() };
/// assert_eq!(t.unlock, Timeouts::default().unlock);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// How long one acquire round waits for lockers to answer before it
    /// counts the silent ones as failed. Default 1 s, as in dsync.
    pub acquire: Duration,
    /// How long `unlock()` waits for a quorum to confirm a release, and the
    /// deadline of each unlock call. Default 5 s.
    pub unlock: Duration,
    /// The longest time failed unlocks keep being retried in the
    /// background. They stop earlier, once the locker must have expired the
    /// entry by itself (twice the validity after the release began, for a
    /// locker whose clock runs slower than ours), so the default,
    /// `Duration::MAX`, means exactly that: retry while it can matter. Zero
    /// turns the background retries off and leaves failed releases to expiry:
    /// an unlock no call has tried yet, such as the release of a guard
    /// dropped on a runtime that stopped being driven, is still tried once,
    /// and one whose try failed, even before anything reached the locker
    /// (its connection refused), is not tried again.
    pub release_retry: Duration,
    /// Deadline of each refresh call; a locker that misses it counts as not
    /// confirming. Default 5 s, as in dsync. A refresh never waits past the
    /// moment the lock would be lost, so `Duration::MAX` means "until then".
    pub refresh: Duration,
    /// Deadline of each force-unlock call. Default 5 s.
    pub force_unlock: Duration,
    /// How often a waiter in line repeats its request to each locker, as a
    /// safety net for a lost wake-up and to keep its place and any grants
    /// it already has. A place a waiter stops renewing is dropped by the
    /// locker after three times this. Default 1 s. Used between 1 ms and
    /// the smaller of 20 s (lock servers keep a place for at most 60 s) and
    /// a third of the lease's `validity - safety_margin`, so that a short
    /// lease needs no matching change here.
    pub wait_recheck: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            acquire: Duration::from_secs(1),
            unlock: Duration::from_secs(5),
            release_retry: Duration::MAX,
            refresh: Duration::from_secs(5),
            force_unlock: Duration::from_secs(5),
            wait_recheck: Duration::from_secs(1),
        }
    }
}

impl Timeouts {
    /// The re-check interval in use with `lease`: `wait_recheck`, kept
    /// between 1 ms and a third of what the lease trusts, so that partial
    /// grants are renewed well before they could expire.
    pub(crate) fn wait_recheck_for(&self, lease: &Lease) -> Duration {
        self.wait_recheck
            .min(lease.trusted_for() / 3)
            .min(MAX_WAIT_RECHECK)
            .max(MIN_REFRESH_INTERVAL)
    }
}

/// How a [`DRWMutex::lock`](crate::DRWMutex::lock) or
/// [`read`](crate::DRWMutex::read) waits for a lock that is held.
///
/// ```
/// use quorum_lock::Waiting;
/// assert_eq!(Waiting::default(), Waiting::Push);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Waiting {
    /// In line: the waiter keeps one place, ordered by when it began to
    /// wait, on every locker, and the lockers grant it in turn and push the
    /// news. Fair (first come, first served; readers that queue together
    /// are granted together; a waiting writer stops later readers), and the
    /// hand-off takes one message instead of a backoff period. Lockers
    /// without queues are polled. The default.
    #[default]
    Push,
    /// Rounds repeated with a jittered backoff, as dsync does: whoever asks
    /// first after a release wins. A polling round is refused while anyone
    /// conflicting waits in line, so a polling client can starve among
    /// waiters that use [`Waiting::Push`]. Kept to compare with.
    Poll,
}

/// The longest re-check a waiter uses: its place lives three times this,
/// and lock servers keep a place for at most 60 s.
const MAX_WAIT_RECHECK: Duration = Duration::from_secs(20);

/// The shortest refresh interval [`Lease::check`] accepts.
const MIN_REFRESH_INTERVAL: Duration = Duration::from_millis(1);

/// How a held lock is kept alive, and when its holder must consider it lost.
///
/// Every held lock is refreshed on every locker each `refresh_interval`.
/// Lockers drop entries that go unrefreshed for their validity
/// ([`LockerConfig::validity`](crate::LockerConfig::validity), 60 s by
/// default). The holder declares the lock lost when no quorum has confirmed
/// a refresh for `validity - safety_margin`, counted from when the last
/// confirmed refresh was *sent*. Every locker received that refresh after it
/// was sent, so its entry cannot expire before `validity` has passed since
/// then: the holder learns of the loss at least `safety_margin` before any
/// locker can free the lock for somebody else.
///
/// That argument assumes two things, both controlled by these numbers:
/// * clocks advance at similar rates: a locker's clock may run fast relative
///   to the holder's by at most `safety_margin / validity` (1/6, about 17 %,
///   with the defaults; real clocks drift by parts per million);
/// * the holder's process is not paused (GC, swap, SIGSTOP) for longer than
///   `validity - safety_margin` (50 s by default) between checking the lock
///   and using the resource. No lease-based lock can rule this out; fence the
///   resource if it matters.
///
/// ```
/// use std::time::Duration;
/// use quorum_lock::Lease;
///
/// let lease = Lease { refresh_interval: Duration::from_secs(5), ..Lease::default() };
/// assert!(lease.refresh_interval < lease.validity - lease.safety_margin);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// How long lockers keep an unrefreshed entry. Must not exceed the
    /// lockers' configured validity. Default 60 s.
    pub validity: Duration,
    /// Time between refreshes of a held lock. Default 10 s; at least 1 ms.
    pub refresh_interval: Duration,
    /// How much sooner than `validity` the holder gives up. Default 10 s;
    /// must be greater than zero and shorter than `validity`.
    pub safety_margin: Duration,
}

impl Default for Lease {
    fn default() -> Self {
        Lease {
            validity: Duration::from_secs(60),
            refresh_interval: Duration::from_secs(10),
            safety_margin: Duration::from_secs(10),
        }
    }
}

impl Lease {
    /// How long after the last confirmed refresh was sent the holder still
    /// trusts its lock: `validity - safety_margin`.
    pub fn trusted_for(&self) -> Duration {
        self.validity.saturating_sub(self.safety_margin)
    }

    /// Refuses settings that cannot keep a lock safely: each message names
    /// the relation that is broken.
    pub(crate) fn check(&self) -> Result<(), crate::Error> {
        let invalid = |msg: String| Err(crate::Error::InvalidArgument(msg));
        if self.refresh_interval < MIN_REFRESH_INTERVAL {
            return invalid(format!(
                "lease: refresh_interval ({:?}) must be at least {MIN_REFRESH_INTERVAL:?}: a shorter one \
                 keeps the keeper refreshing without pause",
                self.refresh_interval
            ));
        }
        if self.safety_margin.is_zero() {
            return invalid(
                "lease: safety_margin must be greater than zero: without one, a holder is told of a \
                 loss at the very instant a locker may free the lock"
                    .into(),
            );
        }
        if self.safety_margin >= self.validity {
            return invalid(format!(
                "lease: safety_margin ({:?}) must be shorter than validity ({:?})",
                self.safety_margin, self.validity
            ));
        }
        if self.refresh_interval >= self.trusted_for() {
            return invalid(format!(
                "lease: refresh_interval ({:?}) must be shorter than validity - safety_margin ({:?}), \
                 or the lock is given up before its first refresh",
                self.refresh_interval,
                self.trusted_for()
            ));
        }
        Ok(())
    }
}

impl Timeouts {
    /// Refuses deadlines that could never be met, or that contradict the
    /// lease; each message names the relation that is broken.
    pub(crate) fn check(&self, lease: &Lease) -> Result<(), crate::Error> {
        let invalid = |msg: String| Err(crate::Error::InvalidArgument(msg));
        for (name, value) in [
            ("acquire", self.acquire),
            ("unlock", self.unlock),
            ("refresh", self.refresh),
            ("force_unlock", self.force_unlock),
        ] {
            if value.is_zero() {
                return invalid(format!(
                    "timeouts: {name} must be greater than zero, or no remote locker could ever answer in time"
                ));
            }
        }
        if self.acquire >= lease.trusted_for() {
            return invalid(format!(
                "timeouts: acquire ({:?}) must be shorter than lease validity - safety_margin ({:?}), \
                 or a granted lock could already be lost when the round returns",
                self.acquire,
                lease.trusted_for()
            ));
        }
        Ok(())
    }
}

/// Backoff between failed acquire rounds and failed release calls.
///
/// The wait before retry `k` (counting from 0) is drawn uniformly from
/// `0 ..= min(max, initial × 2^k)` ("full jitter"), so that clients who failed
/// together do not retry together.
///
/// ```
/// use std::time::Duration;
/// use quorum_lock::RetryPolicy;
///
/// let p = RetryPolicy::default();
/// assert_eq!(p.ceiling(0), p.initial);
/// assert_eq!(p.ceiling(100), p.max);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The ceiling for the first retry. Default 10 ms.
    pub initial: Duration,
    /// The ceiling never grows past this. Default 1 s.
    pub max: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            initial: Duration::from_millis(10),
            max: Duration::from_secs(1),
        }
    }
}

impl RetryPolicy {
    /// The largest wait before retry number `attempt` (0-based).
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX);
        self.initial.saturating_mul(factor).min(self.max)
    }

    /// A random wait in `0 ..= ceiling(attempt)`.
    pub(crate) fn delay(&self, attempt: u32, rng: &mut impl Rng) -> Duration {
        let ceiling = self.ceiling(attempt).as_nanos().min(u128::from(u64::MAX)) as u64;
        Duration::from_nanos(rng.random_range(0..=ceiling))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{rngs::SmallRng, SeedableRng};

    #[test]
    fn ceiling_grows_then_caps() {
        let p = RetryPolicy {
            initial: Duration::from_millis(10),
            max: Duration::from_millis(75),
        };
        let got: Vec<_> = (0..5).map(|k| p.ceiling(k).as_millis()).collect();
        assert_eq!(got, [10, 20, 40, 75, 75]);
        assert_eq!(p.ceiling(u32::MAX), Duration::from_millis(75));
    }

    #[test]
    fn delay_stays_within_the_ceiling_and_spreads() {
        let p = RetryPolicy::default();
        let mut rng = SmallRng::seed_from_u64(7);
        let draws: Vec<_> = (0..200).map(|_| p.delay(3, &mut rng)).collect();
        assert!(draws.iter().all(|d| *d <= p.ceiling(3)));
        let below_half = draws.iter().filter(|d| **d < p.ceiling(3) / 2).count();
        assert!(
            (50..150).contains(&below_half),
            "jitter is not uniform: {below_half}/200"
        );
    }

    #[test]
    fn zero_policy_never_waits() {
        let p = RetryPolicy {
            initial: Duration::ZERO,
            max: Duration::ZERO,
        };
        let mut rng = SmallRng::seed_from_u64(1);
        assert_eq!(p.delay(9, &mut rng), Duration::ZERO);
    }
}
