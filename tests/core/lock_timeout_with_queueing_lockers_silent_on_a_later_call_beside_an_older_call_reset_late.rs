//! Reproduces a past break: lockers that queued the wait and then left a call asked since unanswered until it timed out read as holding the lock elsewhere again once it timed out, because an older call to them (asked before they queued the wait) had failed later with its connection reset, and that failure's later time kept the timeout out of the record; the wait gave up with `Timeout`.
//!
//! docs/guarantees.md ("Why a wait waits"): a locker that gave the wait a
//! place in line "and since then has left a call unanswered that long ...
//! counts as unreachable, not as holding the lock elsewhere. Only calls
//! asked since the request it answered count, for silence and for
//! failures alike: an older call of another lock, slow, lost or timing
//! out later, is no news of a locker that answered a later one."
//! The coordinator keeps one failure per locker and replaces it only by
//! one with a later evidence time; a call that failed with its connection
//! reset speaks from when the reset was seen, a call that timed out from
//! when it was asked. An older call (asked before the wait) whose
//! connection was reset late therefore outranks the timeout of a call
//! asked after the wait, and `gone_since` then drops the kept failure as
//! older than the wait: neither counts.
//!
//! Three in-process lockers; nodes 1 and 2 sit behind a wrapper whose
//! force-unlock of "reset" fails after 800 ms with its connection reset
//! (as a remote locker's does when the connection drops under the call),
//! and whose force-unlock of "lost" never answers. Another client holds
//! "res". At 0 ms the client force-unlocks "reset"; at 10 ms it waits for
//! "res" (deadline 1500 ms, re-checks every 5 s): all three queue it. At
//! 20 ms it force-unlocks "lost" (deadline 1 s). At 800 ms the "reset"
//! calls fail; at 1020 ms the "lost" calls time out. Nodes 1 and 2 have
//! answered nothing since 10 ms, and left a call asked at 20 ms
//! unanswered: at 1100 ms `waiting()` says `HeldElsewhere`, and the wait
//! gives up with `Timeout`.
#![cfg(feature = "testing")]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use quorum_lock::{
    Dsync, Error, LocalLocker, LockArgs, LockMode, NetLocker, Timeouts, WaitArgs, WaitReason,
    WaitReply,
};
use tokio::time::{sleep, Instant};

const SEED: u64 = 7_331;

/// A locker whose force-unlock of "reset" fails late, as a call whose
/// connection dropped under it does, and of "lost" never answers.
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
        if args.resources.iter().any(|r| r == "reset") {
            sleep(Duration::from_millis(800)).await;
            return Err(Error::LockerUnavailable {
                endpoint: self.endpoint(),
                reason: "connection reset (test)".into(),
            });
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
async fn lock_timeout_with_queueing_lockers_silent_on_a_later_call_beside_an_older_call_reset_late()
{
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
    let reset = tokio::spawn(async move { admin.force_unlock(["reset"]).await });
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
    let lost = tokio::spawn(async move { admin.force_unlock(["lost"]).await });
    sleep(Duration::from_millis(900).saturating_sub(start.elapsed())).await;
    let silent = mutex.waiting();
    eprintln!(
        "at {:?}: {:?}",
        start.elapsed(),
        silent.as_ref().map(|s| s.to_string())
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
    let reset = tokio::time::timeout(Duration::from_secs(5), reset).await;
    let lost = tokio::time::timeout(Duration::from_secs(5), lost).await;
    eprintln!("force_unlock of \"reset\": {reset:?}; of \"lost\": {lost:?}");
    assert_eq!(
        queued.map(|s| s.reason()),
        Some(WaitReason::HeldElsewhere),
        "all three queued the wait"
    );
    assert_eq!(
        silent.map(|s| s.reason()),
        Some(WaitReason::NoQuorum),
        "nodes 1 and 2 have left a call asked at 20 ms unanswered for 880 ms"
    );
    assert_eq!(
        after.map(|s| s.reason()),
        Some(WaitReason::NoQuorum),
        "that call timed out at 1020 ms, and nodes 1 and 2 have answered nothing since they queued the wait"
    );
    assert!(
        matches!(result, Err(Error::QuorumUnavailable { .. })),
        "one locker of three answers: {result:?}"
    );
}
