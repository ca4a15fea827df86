//! The lock server's expiry timer: entries are expired when they are due,
//! not at the next call that happens to touch them, so that the waiters
//! and observers of a holder that died hear of it at once.

use std::sync::{Arc, Weak};

use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::LocalLocker;

/// Stops the timer when dropped.
pub(crate) struct ExpiryTimer {
    task: AbortHandle,
}

impl Drop for ExpiryTimer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts the timer of `locker` on the current runtime, calling
/// `after_pass` after each pass (the server sweeps its ledger there).
///
/// Each wake-up costs one pass over the shards; it wakes when the entry
/// refreshed longest ago would expire, and at least once a second (once a
/// validity when that is shorter), for the places in line, which expire
/// with no entry to wake for: the server's charges count on their memory
/// being given back within that time (`local::charge_lapse`).
pub(crate) fn start(
    locker: &Arc<LocalLocker>,
    after_pass: impl Fn() + Send + 'static,
) -> ExpiryTimer {
    let locker: Weak<LocalLocker> = Arc::downgrade(locker);
    let task = tokio::spawn(async move {
        loop {
            let wake = match locker.upgrade() {
                Some(locker) => {
                    let pass = Instant::now() + locker.pass_every();
                    let wake = locker.expire_due().map_or(pass, |due| due.min(pass));
                    after_pass();
                    wake
                }
                None => return,
            };
            tokio::time::sleep_until(wake.max(Instant::now())).await;
        }
    });
    ExpiryTimer {
        task: task.abort_handle(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locker::proclamation::WatchArgs;
    use crate::locker::wait::{PushEvent, PushSink, Wake};
    use crate::{LockArgs, NetLocker};
    use std::time::Duration;

    struct Nowhere;

    impl PushSink for Nowhere {
        fn push(&self, _slot: usize, _uid: &str, _event: PushEvent) {}
    }

    /// Reproduces a past break: over a locker whose validity is under a
    /// second, nothing passed over an idle server's table more often than
    /// once a second, so an expired place kept its memory after the lock
    /// server's ledger had dropped its charge. Now the timer passes within
    /// `pass_every`, and a charge made when the place was asked lapses
    /// only once that pass has given the place's memory back, whatever the
    /// validity. Nobody calls the locker after the place is asked.
    #[tokio::test(start_paused = true)]
    async fn an_expired_place_is_gone_before_its_charge_lapses_on_an_idle_server() {
        use crate::{LockMode, LockerConfig, Ticket, WaitArgs, WaitReply};
        let ms = Duration::from_millis;
        for validity in [ms(100), ms(700), ms(1_500), ms(60_000)] {
            let config = LockerConfig {
                validity,
                quarantine: Duration::ZERO,
            };
            let locker = Arc::new(LocalLocker::with_config("node", config));
            let _timer = start(&locker, || {});
            // Off the timer's first pass, as a server's load would be.
            tokio::time::sleep(ms(37)).await;
            let args = |uid: &str| LockArgs {
                uid: uid.into(),
                resources: vec!["c".to_owned()].into(),
                owner: "o".into(),
                source: "s".into(),
                quorum: 1,
            };
            let asked = Instant::now();
            assert_eq!(locker.lock(&args("holder")).await, Ok(true));
            let wait = WaitArgs {
                ticket: Ticket::now(),
                place_ttl: Duration::from_secs(60),
                wake: None,
            };
            let reply = locker
                .lock_wait(&args("waiter"), LockMode::Write, &wait)
                .await;
            assert_eq!(
                reply,
                Ok(WaitReply::Refused),
                "validity {validity:?}: a reservation"
            );
            assert_eq!(locker.waiting(), 1);
            let lapse = crate::local::charge_lapse(validity);
            tokio::time::sleep_until(asked + lapse - ms(1)).await;
            assert_eq!(
                locker.waiting(),
                0,
                "validity {validity:?}: the place still took memory {:?} after it was asked, \
                 just before its charge lapses",
                asked.elapsed()
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn lapsed_watches_go_on_an_idle_server() {
        let locker = Arc::new(LocalLocker::new());
        let _timer = start(&locker, || {});
        let args = LockArgs {
            uid: "observer".into(),
            resources: vec!["e".to_owned()].into(),
            owner: "o".into(),
            source: "s".into(),
            quorum: 1,
        };
        let watch = WatchArgs {
            ttl: Duration::from_secs(3),
            wake: Wake::new(Arc::new(Nowhere), 0),
        };
        assert_eq!(locker.leader(&args, Some(&watch)).await.unwrap(), None);
        assert_eq!(locker.board_sizes(), (0, 1));
        // Nobody calls the locker again: the timer drops the watch within
        // a sweep after its ttl.
        tokio::time::sleep(Duration::from_millis(4500)).await;
        assert_eq!(locker.board_sizes(), (0, 0));
    }
}
