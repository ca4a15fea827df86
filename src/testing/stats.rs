//! Per-kind call counters of a `FaultyLocker`.

use std::ops::Add;
use std::sync::atomic::{AtomicU64, Ordering};

/// The kinds of [`NetLocker`](crate::NetLocker) call a
/// [`FaultyLocker`](super::FaultyLocker) counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CallKind {
    /// [`NetLocker::lock`](crate::NetLocker::lock).
    Lock,
    /// [`NetLocker::rlock`](crate::NetLocker::rlock).
    RLock,
    /// [`NetLocker::unlock`](crate::NetLocker::unlock).
    Unlock,
    /// [`NetLocker::runlock`](crate::NetLocker::runlock).
    RUnlock,
    /// [`NetLocker::refresh`](crate::NetLocker::refresh) and
    /// [`NetLocker::refresh_mode`](crate::NetLocker::refresh_mode).
    Refresh,
    /// [`NetLocker::force_unlock`](crate::NetLocker::force_unlock).
    ForceUnlock,
    /// [`NetLocker::fence`](crate::NetLocker::fence).
    Fence,
    /// [`NetLocker::proclaim`](crate::NetLocker::proclaim).
    Proclaim,
    /// [`NetLocker::leader`](crate::NetLocker::leader).
    Leader,
}

/// How many kinds there are.
const KINDS: usize = 9;

impl CallKind {
    /// The kind of a lock call (plain or waiting) in `mode`.
    pub(super) fn lock_in(mode: crate::LockMode) -> Self {
        match mode {
            crate::LockMode::Write => CallKind::Lock,
            crate::LockMode::Read => CallKind::RLock,
        }
    }

    /// The kind of an unlock call in `mode`.
    pub(super) fn unlock_in(mode: crate::LockMode) -> Self {
        match mode {
            crate::LockMode::Write => CallKind::Unlock,
            crate::LockMode::Read => CallKind::RUnlock,
        }
    }

    /// Every kind, in declaration order.
    pub const ALL: [CallKind; KINDS] = [
        CallKind::Lock,
        CallKind::RLock,
        CallKind::Unlock,
        CallKind::RUnlock,
        CallKind::Refresh,
        CallKind::ForceUnlock,
        CallKind::Fence,
        CallKind::Proclaim,
        CallKind::Leader,
    ];

    fn index(self) -> usize {
        self as usize
    }
}

/// How many calls a [`FaultyLocker`](super::FaultyLocker) saw, and what it
/// did to them.
///
/// ```
/// use quorum_lock::testing::CallStats;
/// let a = CallStats { seen: 3, delayed: 1, faulted: 2 };
/// assert_eq!(a + a, CallStats { seen: 6, delayed: 2, faulted: 4 });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CallStats {
    /// Calls received, whatever happened to them.
    pub seen: u64,
    /// Calls that waited in injected latency.
    pub delayed: u64,
    /// Calls that did not get their normal reply: refused, hung, lost, sent
    /// to a crashed node or across a partition. Latency alone does not count.
    pub faulted: u64,
}

impl Add for CallStats {
    type Output = CallStats;

    fn add(self, other: CallStats) -> CallStats {
        CallStats {
            seen: self.seen.saturating_add(other.seen),
            delayed: self.delayed.saturating_add(other.delayed),
            faulted: self.faulted.saturating_add(other.faulted),
        }
    }
}

/// Relaxed atomics: the counts are read after the calls they count have
/// finished, so no ordering with other memory is needed.
#[derive(Default)]
pub(super) struct Counters {
    seen: [AtomicU64; KINDS],
    delayed: [AtomicU64; KINDS],
    faulted: [AtomicU64; KINDS],
}

impl Counters {
    pub(super) fn seen(&self, kind: CallKind) {
        self.seen[kind.index()].fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn delayed(&self, kind: CallKind) {
        self.delayed[kind.index()].fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn faulted(&self, kind: CallKind) {
        self.faulted[kind.index()].fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn get(&self, kind: CallKind) -> CallStats {
        let i = kind.index();
        CallStats {
            seen: self.seen[i].load(Ordering::Relaxed),
            delayed: self.delayed[i].load(Ordering::Relaxed),
            faulted: self.faulted[i].load(Ordering::Relaxed),
        }
    }

    pub(super) fn total(&self) -> CallStats {
        CallKind::ALL
            .iter()
            .fold(CallStats::default(), |sum, &kind| sum + self.get(kind))
    }
}
