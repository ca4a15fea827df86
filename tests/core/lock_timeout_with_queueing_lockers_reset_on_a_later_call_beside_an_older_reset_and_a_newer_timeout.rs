//! Reproduces a past break: lockers that queued the wait and were then found failing by a call asked since (its connection reset) read as holding the lock elsewhere once an older call's later reset took the latest-noted place and a newer call, answered around at once, timed out as the call asked latest; the wait gave up with `Timeout`.
//!
//! docs/guarantees.md ("Why a wait waits"): a locker that gave the wait a
//! place in line "and since then ... was found failing by a call of this
//! client (a connection refused), counts as unreachable, not as holding
//! the lock elsewhere. Only calls asked since the request it answered
//! count ... and the failure of a call asked since counts even when an
//! older call's failure is noted after it."
//! The coordinator keeps two failures per locker: the latest by evidence
//! time and that of the call asked latest (`Coordinator::failed_since`).
//! A failure of a call that is neither (asked between the two) is lost:
//! here the older call's reset holds the first place (asked before the
//! wait, so it does not count), and a newer call's timeout the second
//! (over, since the locker answered a call at once after it was asked,
//! before the middle call's reset).
//!
//! Three lockers; nodes 1 and 2 sit behind a wrapper whose force-unlock
//! of "old" fails at 890 ms after it is asked with its connection reset,
//! of "new" at 780 ms after, and of "lost" never answers. Another client
//! holds "res". The client force-unlocks "old" at 0 ms; waits for "res"
//! at 10 ms (deadline 1500 ms, re-checks every 5 s): all three queue it;
//! force-unlocks "new" at 20 ms and "lost" at 30 ms (deadline 1 s); at
//! 40 ms a try_lock of "other" is answered at once by all three. At
//! 800 ms the "new" calls fail (reset, after the locker's latest answer,
//! of a call asked since the wait); at 890 ms the "old" ones; at 1030 ms
//! the "lost" ones time out. Expected: nodes 1 and 2 out of reach from
//! 800 ms on, and the wait giving up with `QuorumUnavailable`.
#![cfg(feature = "testing")]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use quorum_lock::{
    Dsync, Error, LocalLocker, LockArgs, LockMode, NetLocker, Timeouts, WaitArgs, WaitReason,
    WaitReply,
};
use tokio::time::{sleep, Instant};

const SEED: u64 = 7_391;

/// A locker whose force-unlocks of "old" and "new" fail late, as calls whose
/// connection dropped under them do, and of "lost" never answers.
struct Resetting {
    inner: Arc<LocalLocker>,
    name: String,
}

#[async_trait]
impl NetLocker for Resetting {
    async fn lock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.inner.lock(args).await
    }
    async fn rlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.inner.rlock(args).await
    }
    async fn unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.inner.unlock(args).await
    }
    async fn runlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.inner.runlock(args).await
    }
    async fn refresh(&self, args: &LockArgs) -> Result<bool, Error> {
        self.inner.refresh(args).await
    }
    async fn refresh_mode(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        self.inner.refresh_mode(args, mode).await
    }
    async fn lock_wait(
        &self,
        args: &LockArgs,
        mode: LockMode,
        wait: &WaitArgs,
    ) -> Result<WaitReply, Error> {
        self.inner.lock_wait(args, mode, wait).await
    }
    fn queues(&self) -> bool {
        self.inner.queues()
    }
    async fn force_unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        for (name, ms) in [("old", 890), ("new", 780)] {
            if args.resources.iter().any(|r| r == name) {
                sleep(Duration::from_millis(ms)).await;
                return Err(Error::LockerUnavailable {
                    endpoint: self.endpoint(),
                    reason: format!("connection reset under {name} (test)"),
                });
            }
        }
        if args.resources.iter().any(|r| r == "lost") {
            std::future::pending::<()>().await;
        }
        self.inner.force_unlock(args).await
    }
    fn endpoint(&self) -> String {
        self.name.clone()
    }
    fn is_online(&self) -> bool {
        true
    }
    fn is_local(&self) -> bool {
        false
    }
    fn validity(&self) -> Option<Duration> {
        self.inner.validity()
    }
}

#[tokio::test(start_paused = true)]
async fn lock_timeout_with_queueing_lockers_reset_on_a_later_call_beside_an_older_reset_and_a_newer_timeout(
) {
    eprintln!("seed {SEED}");
    let nodes: Vec<Arc<LocalLocker>> = (0..3).map(|_| Arc::new(LocalLocker::new())).collect();
    let lockers: Vec<Arc<dyn NetLocker>> = nodes
        .iter()
        .enumerate()
        .map(|(i, node)| -> Arc<dyn NetLocker> {
            if i == 0 {
                node.clone()
            } else {
                Arc::new(Resetting {
                    inner: node.clone(),
                    name: format!("node-{i}"),
                })
            }
        })
        .collect();
    let holder = Dsync::builder(lockers.clone())
        .owner("holder")
        .rng_seed(SEED)
        .build()
        .unwrap();
    let h = Dsync::builder(lockers)
        .owner("h")
        .rng_seed(SEED + 1)
        .timeouts(Timeouts {
            force_unlock: Duration::from_secs(1),
            wait_recheck: Duration::from_secs(5),
            ..Timeouts::default()
        })
        .build()
        .unwrap();
    let start = Instant::now();
    let _held = holder.rw_mutex(["res"]).unwrap().lock().await.unwrap();
    let admin = h.clone();
    let old = tokio::spawn(async move { admin.force_unlock(["old"]).await });
    sleep(Duration::from_millis(10).saturating_sub(start.elapsed())).await;
    let mutex = h.rw_mutex(["res"]).unwrap();
    let waiter = mutex.clone();
    let wait = tokio::spawn(async move {
        waiter
            .lock_timeout(Duration::from_millis(1_500))
            .await
            .map(|_guard| ())
    });
    sleep(Duration::from_millis(15).saturating_sub(start.elapsed())).await;
    let queued = mutex.waiting();
    sleep(Duration::from_millis(20).saturating_sub(start.elapsed())).await;
    let admin = h.clone();
    let new = tokio::spawn(async move { admin.force_unlock(["new"]).await });
    sleep(Duration::from_millis(30).saturating_sub(start.elapsed())).await;
    let admin = h.clone();
    let lost = tokio::spawn(async move { admin.force_unlock(["lost"]).await });
    sleep(Duration::from_millis(40).saturating_sub(start.elapsed())).await;
    let tried = h.rw_mutex(["other"]).unwrap().try_lock().await.map(|_g| ());
    eprintln!("try_lock of \"other\" at {:?}: {tried:?}", start.elapsed());
    sleep(Duration::from_millis(850).saturating_sub(start.elapsed())).await;
    let reset = mutex.waiting();
    eprintln!(
        "at {:?}: {:?}",
        start.elapsed(),
        reset.as_ref().map(|s| s.to_string())
    );
    sleep(Duration::from_millis(950).saturating_sub(start.elapsed())).await;
    let both = mutex.waiting();
    eprintln!(
        "at {:?}: {:?}",
        start.elapsed(),
        both.as_ref().map(|s| s.to_string())
    );
    sleep(Duration::from_millis(1_100).saturating_sub(start.elapsed())).await;
    let after = mutex.waiting();
    eprintln!(
        "at {:?}: {:?}",
        start.elapsed(),
        after.as_ref().map(|s| s.to_string())
    );
    let result = tokio::time::timeout(Duration::from_secs(5), wait)
        .await
        .expect("the wait ends at its deadline")
        .unwrap();
    eprintln!("gave up at {:?} with: {result:?}", start.elapsed());
    for (name, task) in [("old", old), ("new", new), ("lost", lost)] {
        let out = tokio::time::timeout(Duration::from_secs(5), task).await;
        eprintln!("force_unlock of {name:?}: {out:?}");
    }
    assert_eq!(
        queued.map(|s| s.reason()),
        Some(WaitReason::HeldElsewhere),
        "all three queued the wait"
    );
    assert_eq!(
        reset.map(|s| s.reason()),
        Some(WaitReason::NoQuorum),
        "a call asked at 20 ms, since the wait, failed at 800 ms with its connection reset"
    );
    assert_eq!(
        both.map(|s| s.reason()),
        Some(WaitReason::NoQuorum),
        "an older call failing later too (890 ms) does not hide that"
    );
    assert_eq!(
        after.map(|s| s.reason()),
        Some(WaitReason::NoQuorum),
        "nor does a call asked at 30 ms timing out at 1030 ms; nodes 1 and 2 answered nothing since 40 ms"
    );
    assert!(
        matches!(result, Err(Error::QuorumUnavailable { .. })),
        "one locker of three answers: {result:?}"
    );
}
