//! The loss signal of one held lock: the instant after which its holder
//! must consider it lost, and the token that tells everyone who waits.
//!
//! The deadline, not the keeper, decides. The keeper moves the deadline
//! forward after each refresh a quorum confirmed, and cancels the token when
//! it sees the lock go. But anyone who looks at the lock (`is_lost()`, a
//! polled `lost()`) compares the clock with the deadline first, so a holder
//! whose keeper never ran (its runtime stalled, shut down, or is not being
//! driven) still learns of the loss on time: at `confirmed_sent +
//! trusted_for`, which is at least the safety margin before any locker can
//! expire the entry.

use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::quorum::clock::Clock;

/// Deadline nanoseconds meaning "never": the settings allow no expiry.
const NEVER: u64 = u64::MAX;

/// When one held lock is lost, and who has been told.
pub(crate) struct LossSignal {
    /// Set when the loss is declared: the truth `token` follows.
    declared: AtomicBool,
    /// Cancelled when the loss is declared; made when someone first waits
    /// for it or asks for a child, so a lock whose loss nobody awaits
    /// costs no allocation for it.
    token: OnceLock<CancellationToken>,
    /// The holder's clock, which `base` and the deadline are on.
    clock: Clock,
    /// The origin of `deadline`.
    base: Instant,
    /// Nanoseconds after `base` at which the lock is lost. Only ever moves
    /// forward, and only while it has not passed.
    deadline: AtomicU64,
    /// Told when the holder dropped or unlocked its guard: it has stopped
    /// the work the lock protected, so a lost lock's entries need not wait
    /// out the safety margin (see `refresh::declare_lost`).
    holder_gone: Notify,
    /// The same, for those who ask rather than wait.
    holder_stopped: AtomicBool,
    /// Tokens cancelled with `token` (see [`link`](Self::link)).
    linked: Mutex<Vec<CancellationToken>>,
    /// Whoever removes a lost lock's entries has claimed it: the clean-up
    /// task, or the holder letting go when that task did not run.
    cleanup_claimed: AtomicBool,
    /// The clean-up's force-unlocks all ended (answered, or queued).
    cleanup_done: AtomicBool,
}

impl LossSignal {
    /// A signal for a lock that is lost at `base + trusted_for` on `clock`.
    pub(crate) fn new(clock: Clock, base: Instant, trusted_for: Duration) -> Self {
        LossSignal {
            declared: AtomicBool::new(false),
            token: OnceLock::new(),
            clock,
            base,
            deadline: AtomicU64::new(nanos(trusted_for)),
            holder_gone: Notify::new(),
            holder_stopped: AtomicBool::new(false),
            linked: Mutex::default(),
            cleanup_claimed: AtomicBool::new(false),
            cleanup_done: AtomicBool::new(false),
        }
    }

    /// When the lock is lost unless a refresh moves it; `None` for never.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.at(self.deadline.load(Ordering::Acquire))
    }

    fn at(&self, deadline: u64) -> Option<Instant> {
        if deadline == NEVER {
            return None;
        }
        self.base.checked_add(Duration::from_nanos(deadline))
    }

    /// Moves the deadline to `sent + trusted_for`, after a refresh sent at
    /// `sent` was confirmed. Fails, and declares the loss, when the current
    /// deadline has already passed: once a holder may have seen its lock
    /// lost, a late confirmation must not revive it.
    pub(crate) fn extend(&self, sent: Instant, trusted_for: Duration) -> bool {
        let sent = nanos(sent.saturating_duration_since(self.base));
        let new = sent.saturating_add(nanos(trusted_for));
        let mut current = self.deadline.load(Ordering::Acquire);
        loop {
            if self.passed(current, self.clock.now()) {
                self.cancel();
                return false;
            }
            if new <= current {
                return true;
            }
            match self.deadline.compare_exchange_weak(
                current,
                new,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(seen) => current = seen,
            }
        }
    }

    fn passed(&self, deadline: u64, now: Instant) -> bool {
        self.at(deadline).is_some_and(|at| now >= at)
    }

    /// Whether the lock is lost: it was declared lost, or its deadline has
    /// passed. Seeing the deadline pass declares the loss, so every later
    /// look agrees.
    pub(crate) fn check(&self) -> bool {
        if self.is_declared() {
            return true;
        }
        if self.passed(self.deadline.load(Ordering::Acquire), self.clock.now()) {
            self.cancel();
            return true;
        }
        false
    }

    /// The holder let go of its guard; see `holder_gone`.
    pub(crate) fn holder_stopped(&self) {
        self.holder_stopped.store(true, Ordering::Release);
        // A stored permit: a `declare_lost` task that starts waiting later
        // still sees it.
        self.holder_gone.notify_one();
    }

    /// Claims the removal of the lost lock's entries: `true` for the first
    /// caller only.
    pub(crate) fn claim_cleanup(&self) -> bool {
        !self.cleanup_claimed.swap(true, Ordering::AcqRel)
    }

    /// The clean-up's force-unlocks all ended.
    pub(crate) fn cleanup_finished(&self) {
        self.cleanup_done.store(true, Ordering::Release);
    }

    /// Whether a clean-up ran to its end.
    pub(crate) fn cleanup_is_done(&self) -> bool {
        self.cleanup_done.load(Ordering::Acquire)
    }

    /// Whether the holder let go of its guard.
    pub(crate) fn holder_has_stopped(&self) -> bool {
        self.holder_stopped.load(Ordering::Acquire)
    }

    /// Resolves when the holder let go of its guard.
    pub(crate) async fn holder_gone(&self) {
        self.holder_gone.notified().await;
    }

    /// Declares the lock lost.
    pub(crate) fn declare(&self) {
        self.cancel();
    }

    /// The token, made on first use; cancelled already when the loss was
    /// declared before.
    fn token(&self) -> &CancellationToken {
        let token = self.token.get_or_init(CancellationToken::new);
        // With the fence in `cancel`: either this sees the loss declared,
        // or `cancel` sees the token made, and cancels it.
        fence(Ordering::SeqCst);
        if self.declared.load(Ordering::Relaxed) {
            token.cancel();
        }
        token
    }

    /// Declares the loss and cancels the token, then every token linked
    /// to it.
    fn cancel(&self) {
        self.declared.store(true, Ordering::Release);
        fence(Ordering::SeqCst);
        if let Some(token) = self.token.get() {
            token.cancel();
        }
        let linked =
            std::mem::take(&mut *self.linked.lock().unwrap_or_else(PoisonError::into_inner));
        for token in linked {
            token.cancel();
        }
    }

    /// Cancels `token` when the lock is lost, as its own token is, with no
    /// task to run: a token several locks share (a permit's) follows each
    /// of them, whatever runtime runs or is gone.
    pub(crate) fn link(&self, token: CancellationToken) {
        let mut linked = self.linked.lock().unwrap_or_else(PoisonError::into_inner);
        // Declared before the lock is taken in `cancel`: seen here, or
        // the token is in the list that `cancel` takes.
        if self.is_declared() {
            drop(linked);
            token.cancel();
        } else {
            linked.push(token);
        }
    }

    /// Whether the loss has been declared, without looking at the clock.
    pub(crate) fn is_declared(&self) -> bool {
        self.declared.load(Ordering::Acquire)
    }

    pub(crate) fn child_token(&self) -> CancellationToken {
        self.token().child_token()
    }

    /// Resolves when the lock is lost. While polled on a runtime it keeps its
    /// own timer at the deadline, so it fires on time whether or not the
    /// keeper runs; polled elsewhere it waits for the keeper's word.
    pub(crate) async fn lost(signal: impl std::ops::Deref<Target = Self>) {
        loop {
            if signal.check() {
                return;
            }
            match signal.deadline().filter(|_| Handle::try_current().is_ok()) {
                Some(deadline) => {
                    tokio::select! {
                        () = signal.token().cancelled() => return,
                        () = signal.clock.wait_until(deadline) => {}
                    }
                }
                None => return signal.token().cancelled().await,
            }
        }
    }
}

/// What a lost lock's hold on its entries asks of its holder (its
/// acquisition, which holds its signal).
pub(crate) trait Holder: Send + Sync {
    /// Whether the holder let go of its guard.
    fn holder_has_stopped(&self) -> bool;
}

/// A lost lock's hold on its entries: not freed before `not_before` unless
/// the holder let go. It refers to the holder weakly, so an unlock queued
/// on the coordinator does not keep the coordinator alive through the
/// acquisition; a holder gone means its guard is gone, and a guard tells
/// its signal that its holder stopped as it goes.
#[derive(Clone)]
pub(crate) struct HeldOff {
    pub(crate) not_before: Instant,
    pub(crate) holder: std::sync::Weak<dyn Holder>,
}

impl HeldOff {
    /// Whether the holder let go of its guard.
    pub(crate) fn holder_has_stopped(&self) -> bool {
        self.holder
            .upgrade()
            .is_none_or(|holder| holder.holder_has_stopped())
    }
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(NEVER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_deadline_decides_without_anyone_cancelling() {
        let signal = LossSignal::new(Clock::Tokio, Instant::now(), Duration::from_secs(5));
        assert!(!signal.check());
        tokio::time::advance(Duration::from_secs(5)).await;
        assert!(signal.check(), "the clock passed the deadline");
        assert!(signal.is_declared(), "seeing it declares it");
    }

    #[tokio::test(start_paused = true)]
    async fn a_late_confirmation_does_not_revive_a_lost_lock() {
        let start = Instant::now();
        let signal = LossSignal::new(Clock::Tokio, start, Duration::from_secs(5));
        assert!(signal.extend(start + Duration::from_secs(1), Duration::from_secs(5)));
        assert_eq!(signal.deadline(), Some(start + Duration::from_secs(6)));
        tokio::time::advance(Duration::from_secs(7)).await;
        assert!(!signal.extend(start + Duration::from_secs(5), Duration::from_secs(5)));
        assert!(signal.check());
    }

    #[tokio::test(start_paused = true)]
    async fn an_endless_lease_never_expires() {
        let signal = LossSignal::new(Clock::Tokio, Instant::now(), Duration::MAX);
        assert_eq!(signal.deadline(), None);
        tokio::time::advance(Duration::from_secs(86_400)).await;
        assert!(!signal.check());
    }

    #[tokio::test(start_paused = true)]
    async fn lost_fires_at_the_deadline_on_its_own() {
        let start = Instant::now();
        let signal =
            std::sync::Arc::new(LossSignal::new(Clock::Tokio, start, Duration::from_secs(3)));
        LossSignal::lost(signal.clone()).await;
        assert_eq!(Instant::now(), start + Duration::from_secs(3));
        assert!(signal.is_declared());
    }
}
