//! Expiry on time: the lock server's timer pass, and the full pass that
//! any call runs when one is due, so that names nobody touches any more
//! do not keep their expired entries forever.
//!
//! Invariant: every pass promotes what it frees (its waiters are told at
//! once) and runs at most once per due time, whichever call claims it.

use std::sync::atomic::Ordering;
#[cfg(feature = "net")]
use std::time::Duration;

use tokio::time::Instant;

use super::shards::Busy;
#[cfg(feature = "net")]
use super::swept_within;
use super::{LocalLocker, SWEEP_EVERY};

impl LocalLocker {
    /// Expires every entry and place in line that is due now, grants the
    /// waiters and tells the observers that this frees, and returns when
    /// the next entry can expire (`None` when the table is empty). A lock
    /// server calls it at that moment, so that a dead holder's waiters and
    /// observers hear of it when its entry expires instead of at their next
    /// re-check, and at least every [`pass_every`](Self::pass_every), so
    /// that expired places give their memory back on an idle server too.
    ///
    /// While the election boards keep anything, it also runs the periodic
    /// pass that drops lapsed watches, and asks to be called again within
    /// [`SWEEP_EVERY`]: a watch whose observer went away (its connection
    /// closed) is then gone a second after its ttl, also on an idle server.
    #[cfg_attr(not(feature = "net"), allow(dead_code))]
    pub(crate) fn expire_due(&self) -> Option<Instant> {
        let now = self.clock.now();
        let boards = self.boards.in_use();
        if boards {
            self.maybe_sweep(now);
        }
        let mut freed = Vec::new();
        let expired = self
            .shards
            .expire_all(now, self.config.validity, &mut freed, Busy::Wait);
        if expired > 0 {
            tracing::debug!(locker = %self.endpoint, expired, "expired lock entries on time");
        }
        self.promote(freed, now);
        if expired > 0 && self.boards.in_use() {
            self.revalidate_boards(None, now, false);
        }
        let mut oldest: Option<Instant> = None;
        self.shards.any_shard(|shard| {
            if let Some(at) = shard.oldest_refresh() {
                oldest = Some(oldest.map_or(at, |o| o.min(at)));
            }
            false
        });
        let next = oldest.and_then(|at| at.checked_add(self.config.validity));
        let next = if boards {
            let sweep = now + SWEEP_EVERY;
            Some(next.map_or(sweep, |at| at.min(sweep)))
        } else {
            next
        };
        // The caller's timer runs on tokio's clock.
        next.map(|at| self.clock.to_tokio(at))
    }

    /// How often a lock server's timer calls [`expire_due`](Self::expire_due)
    /// whatever entry is due: places in line expire with no entry to wake
    /// for, and an entry granted while the timer sleeps may be due before
    /// the next one it knew of. The server's charges count on it
    /// ([`charge_lapse`]).
    #[cfg(feature = "net")]
    pub(crate) fn pass_every(&self) -> Duration {
        swept_within(self.config.validity)
    }

    /// Runs a full expiry pass when one is due, so that names nobody touches
    /// any more do not keep their expired entries forever. Inlined into
    /// every call; the pass itself is out of line.
    #[inline]
    pub(super) fn maybe_sweep(&self, now: Instant) {
        let due = self.next_sweep.load(Ordering::Relaxed);
        if self.nanos(now) >= due {
            self.sweep(now, due);
        }
    }

    /// The full expiry pass that was due at `due`, run by whichever call
    /// claims it first.
    #[cold]
    fn sweep(&self, now: Instant, due: u64) {
        let next = self.nanos(now + SWEEP_EVERY.min(self.config.validity));
        if self
            .next_sweep
            .compare_exchange(due, next, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            let mut freed = Vec::new();
            let expired =
                self.shards
                    .expire_all(now, self.config.validity, &mut freed, Busy::PassOver);
            if expired > 0 {
                tracing::debug!(locker = %self.endpoint, expired, "expired lock entries");
            }
            self.promote(freed, now);
            if self.boards.in_use() {
                self.revalidate_boards(None, now, true);
            }
            let end = self.quarantine_end.load(Ordering::SeqCst);
            let margin = u64::try_from(self.config.validity.as_nanos()).unwrap_or(u64::MAX);
            if end != 0 && self.nanos(now) >= end.saturating_add(margin) {
                self.ended.forget_after_quarantine(end);
            }
        }
    }
}
