//! `LockerConfig`: how long a `LocalLocker` keeps entries, and how long it
//! stays careful after a restart. A quarantine other than zero is at
//! least the validity, so that a restarted locker's answers count again
//! only once no holder trusts a grant it may have forgotten.

use std::time::Duration;

/// How long a [`LocalLocker`](crate::LocalLocker) keeps entries, and how
/// long it stays careful after a restart.
///
/// ```
/// use std::time::Duration;
/// use quorum_lock::LockerConfig;
///
/// let c = LockerConfig { validity: Duration::from_secs(30), ..LockerConfig::default() };
/// assert_eq!(c.quarantine, Duration::from_secs(60));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockerConfig {
    /// An entry not refreshed for this long is dropped. Measured on the
    /// monotonic clock. Default 60 s. Holders must be configured with a
    /// [`Lease::validity`](crate::Lease::validity) no longer than this.
    pub validity: Duration,
    /// After [`LocalLocker::restart`](crate::LocalLocker::restart), for this
    /// long, new grants are refused and every lock, wait, refresh and
    /// fencing call answers the quarantine error, which no coordinator
    /// counts: the restart may have erased grants that their holders still
    /// count on. Holders that refresh get their entries back, counted once
    /// the quarantine is over. Default 60 s, the default validity: by then
    /// no holder trusts a grant made before the restart any more. A
    /// quarantine shorter than the validity (but not zero) is taken as the
    /// validity ([`LocalLocker::quarantine`](crate::LocalLocker::quarantine)).
    /// Zero means none, which is safe only for a locker that never granted
    /// before. Fencing tokens are not drawn for at least
    /// [`FENCE_QUARANTINE`](crate::FENCE_QUARANTINE) after any restart.
    pub quarantine: Duration,
}

impl Default for LockerConfig {
    fn default() -> Self {
        LockerConfig {
            validity: Duration::from_secs(60),
            quarantine: Duration::from_secs(60),
        }
    }
}
