//! The lock server's expiry timer: entries are expired when they are due,
//! not at the next call that happens to touch them, so that the waiters
//! and observers of a holder that died hear of it at once.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::LocalLocker;

/// How long the timer sleeps when the table is empty: an entry granted
/// meanwhile expires a validity later at the earliest, so it is not missed.
const IDLE: Duration = Duration::from_secs(1);

/// Stops the timer when dropped.
pub(crate) struct ExpiryTimer {
    task: AbortHandle,
}

impl Drop for ExpiryTimer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts the timer of `locker` on the current runtime.
///
/// Each wake-up costs one pass over the shards; it wakes when the entry
/// refreshed longest ago would expire, which in a table whose entries are
/// refreshed is about once per refresh interval of the oldest holder, and
/// otherwise once per expiry.
pub(crate) fn start(locker: &Arc<LocalLocker>) -> ExpiryTimer {
    let locker: Weak<LocalLocker> = Arc::downgrade(locker);
    let task = tokio::spawn(async move {
        loop {
            let next = match locker.upgrade() {
                Some(locker) => locker.expire_due(),
                None => return,
            };
            let now = Instant::now();
            let wake = match next {
                Some(at) => at.max(now),
                None => now + IDLE,
            };
            tokio::time::sleep_until(wake).await;
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

    struct Nowhere;

    impl PushSink for Nowhere {
        fn push(&self, _slot: usize, _uid: &str, _event: PushEvent) {}
    }

    #[tokio::test(start_paused = true)]
    async fn lapsed_watches_go_on_an_idle_server() {
        let locker = Arc::new(LocalLocker::new());
        let _timer = start(&locker);
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
