//! Reproduces a past break: lockers that queued the wait and were then found failing by a call asked since (its connection reset) read as holding the lock elsewhere when nine older calls failed in the same reset just after it, pushing it out of the eight failures kept per locker; the wait gave up with `Timeout`.
//!
//! docs/guarantees.md ("Why a wait waits"): a locker that gave the wait a
//! place in line "and since then ... was found failing by a call of this
//! client (a connection refused), counts as unreachable, not as holding
//! the lock elsewhere ... the failure of a call asked since counts even
//! when an older call's failure is noted after it." The docs set no bound
//! on how many; the coordinator keeps the latest eight failures per locker
//! beside the latest by evidence time (here an older call's reset, noted
//! last at the same instant).
//!
//! Three lockers; nodes 1 and 2 sit behind a wrapper that fails every
//! force-unlock at 900 ms with its connection reset, as a dropped
//! connection fails every call on its way (the calls asked before the
//! wait noted a moment after the one asked since). Another client holds
//! "res". The client force-unlocks "old0".."old8" at 0 ms, waits for "res"
//! at 10 ms (deadline 1500 ms, re-checks every 5 s: all three queue it),
//! force-unlocks "new" at 20 ms. Expected from 900 ms on: nodes 1 and 2
//! out of reach, and the wait giving up with `QuorumUnavailable`.
#![cfg(feature = "testing")]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use quorum_lock::{
    Dsync, Error, LocalLocker, LockArgs, LockMode, NetLocker, Timeouts, WaitArgs, WaitReason,
    WaitReply,
};
use tokio::time::{sleep, sleep_until, Instant};

const SEED: u64 = 7_391;

/// A locker whose force-unlocks of "old" and "new" fail late, as calls whose
/// connection dropped under them do, and of "lost" never answers.
struct Resetting {
    inner: Arc<LocalLocker>,
    name: String,
    start: Instant,
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
        // Every call on the connection fails at 900 ms: the older ones
        // asked before the wait, "new" asked since.
        if let Some(name) = args
            .resources
            .iter()
            .find(|r| r.starts_with("old") || *r == "new")
        {
            sleep_until(self.start + Duration::from_millis(900)).await;
            // The older calls' failures are noted after the newer one's.
            if name.starts_with("old") {
                tokio::task::yield_now().await;
            }
            return Err(Error::LockerUnavailable {
                endpoint: self.endpoint(),
                reason: format!("connection reset under {name} (test)"),
            });
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
async fn lock_timeout_with_queueing_lockers_reset_on_a_later_call_beside_nine_older_resets() {
    eprintln!("seed {SEED}");
    let start = Instant::now();
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
                    start,
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
    let _held = holder.rw_mutex(["res"]).unwrap().lock().await.unwrap();
    let mut admins = Vec::new();
    for i in 0..9 {
        let admin = h.clone();
        admins.push(tokio::spawn(async move {
            admin.force_unlock([format!("old{i}")]).await
        }));
    }
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
    admins.push(tokio::spawn(
        async move { admin.force_unlock(["new"]).await },
    ));
    sleep(Duration::from_millis(950).saturating_sub(start.elapsed())).await;
    let reset = mutex.waiting();
    eprintln!(
        "at {:?}: {:?}",
        start.elapsed(),
        reset.as_ref().map(|s| s.to_string())
    );
    let result = tokio::time::timeout(Duration::from_secs(5), wait)
        .await
        .expect("the wait ends at its deadline")
        .unwrap();
    eprintln!("gave up at {:?} with: {result:?}", start.elapsed());
    for task in admins {
        let out = tokio::time::timeout(Duration::from_secs(5), task).await;
        eprintln!("force_unlock: {out:?}");
    }
    assert_eq!(
        queued.map(|s| s.reason()),
        Some(WaitReason::HeldElsewhere),
        "all three queued the wait"
    );
    assert_eq!(
        reset.map(|s| s.reason()),
        Some(WaitReason::NoQuorum),
        "a call asked at 20 ms, since the wait, failed at 900 ms with its connection reset, \
         whatever older calls failed beside it"
    );
    assert!(
        matches!(result, Err(Error::QuorumUnavailable { .. })),
        "one locker of three answers: {result:?}"
    );
}
