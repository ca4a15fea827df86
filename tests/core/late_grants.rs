//! Grants that reach a waiter by push while the lockers' replies to it are
//! lost: the chaos run's "guards lost at birth".
//!
//! A waiter's trust in a lock starts from the last request each granting
//! locker answered. When a server's replies are slow enough to time out
//! but its pushes still arrive (a delayed link in the chaos run), the
//! waiter's last answered request there can be older than the lease
//! trusts, and `lock()` used to return a guard that was lost before the
//! caller saw it. These tests rebuild that on paused time with in-process
//! lockers whose replies to `lock_wait` are swallowed after the first one
//! of each wait, while the request itself still reaches the locker (so the
//! place is renewed) and pushes go through.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::common::nodes;
use async_trait::async_trait;
use quorum_lock::{
    Dsync, Error, Lease, LocalLocker, LockArgs, LockInfo, LockMode, NetLocker, WaitArgs, WaitReply,
};
use tokio::time::{sleep, Instant};

/// Forwards everything; while muted, a `lock_wait` after the first one of
/// its uid reaches the inner locker but its reply never comes back.
struct LostWaitReplies {
    inner: Arc<LocalLocker>,
    muted: AtomicBool,
    /// `lock_wait` calls seen per uid, in order of first sight.
    seen: Mutex<Vec<(String, usize)>>,
}

impl LostWaitReplies {
    fn wrap(inner: Arc<LocalLocker>) -> Arc<Self> {
        Arc::new(LostWaitReplies {
            inner,
            muted: AtomicBool::new(false),
            seen: Mutex::new(Vec::new()),
        })
    }

    fn mute(&self) {
        self.muted.store(true, Ordering::SeqCst);
    }

    /// The uids that waited here, in order of their first call.
    fn waiters(&self) -> Vec<String> {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.iter().map(|(uid, _)| uid.clone()).collect()
    }

    /// Counts the call; true when it is not the first of its uid.
    fn again(&self, uid: &str) -> bool {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        match seen.iter_mut().find(|(u, _)| u == uid) {
            Some((_, calls)) => {
                *calls += 1;
                true
            }
            None => {
                seen.push((uid.to_owned(), 1));
                false
            }
        }
    }
}

#[async_trait]
impl NetLocker for LostWaitReplies {
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
    async fn force_unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.inner.force_unlock(args).await
    }
    async fn lock_wait(
        &self,
        args: &LockArgs,
        mode: LockMode,
        wait: &WaitArgs,
    ) -> Result<WaitReply, Error> {
        let again = self.again(&args.uid);
        let reply = self.inner.lock_wait(args, mode, wait).await;
        if again && self.muted.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        reply
    }
    fn queues(&self) -> bool {
        self.inner.queues()
    }
    async fn fence(
        &self,
        args: &LockArgs,
        mode: LockMode,
        floor: u64,
    ) -> Result<Option<u64>, Error> {
        self.inner.fence(args, mode, floor).await
    }
    async fn locks(&self) -> Result<Vec<LockInfo>, Error> {
        self.inner.locks().await
    }
    fn endpoint(&self) -> String {
        format!("lost-wait-replies({})", self.inner.endpoint())
    }
    fn is_online(&self) -> bool {
        self.inner.is_online()
    }
    fn is_local(&self) -> bool {
        true
    }
}

/// Validity 2 s, trusted for 1.4 s: the waiter's re-checks come every
/// 467 ms and time out after 1 s.
const LEASE: Lease = Lease {
    validity: Duration::from_secs(2),
    refresh_interval: Duration::from_millis(500),
    safety_margin: Duration::from_millis(600),
};

/// Longer than the lease trusts: a waiter's oldest answered request is
/// this old when the grants are pushed.
const HOLD: Duration = Duration::from_millis(1_800);

struct Setup {
    wrapped: Vec<Arc<LostWaitReplies>>,
    holder: Dsync,
    waiter: Dsync,
}

fn setup(seed: u64) -> Setup {
    let wrapped: Vec<Arc<LostWaitReplies>> =
        nodes(3).into_iter().map(LostWaitReplies::wrap).collect();
    let lockers: Vec<Arc<dyn NetLocker>> = wrapped
        .iter()
        .map(|l| l.clone() as Arc<dyn NetLocker>)
        .collect();
    let client = |owner: &str| {
        Dsync::builder(lockers.clone())
            .owner(owner)
            .lease(LEASE)
            .rng_seed(seed)
            .build()
            .expect("valid settings")
    };
    Setup {
        holder: client("holder"),
        waiter: client("waiter"),
        wrapped,
    }
}

/// The holder keeps "r" for `HOLD`; the waiter queues behind it, then the
/// lockers in `mute` stop answering its re-checks. Returns the waiter's
/// guard as `lock()` gave it, whether it was already lost then, and when
/// the holder let go.
async fn wait_through_lost_replies(
    s: &Setup,
    mute: &[usize],
) -> (quorum_lock::WriteGuard, bool, Instant) {
    let held = s.holder.rw_mutex(["r"]).unwrap().lock().await.unwrap();
    let mutex = s.waiter.rw_mutex(["r"]).unwrap();
    let waiter = tokio::spawn(async move {
        let guard = mutex.lock().await;
        guard.map(|g| {
            let lost = g.is_lost();
            (g, lost)
        })
    });
    sleep(Duration::from_millis(50)).await;
    for &i in mute {
        // The holder's own lock() waited here first.
        assert_eq!(
            s.wrapped[i].waiters().len(),
            2,
            "the waiter queued on locker {i}"
        );
        s.wrapped[i].mute();
    }
    sleep(HOLD).await;
    assert!(!held.is_lost(), "the holder's refreshes were never muted");
    let released = Instant::now();
    held.unlock().await.unwrap();
    let (guard, lost) = tokio::time::timeout(Duration::from_secs(30), waiter)
        .await
        .expect("the waiter is granted once the holder let go")
        .unwrap()
        .expect("lock() succeeds");
    (guard, lost, released)
}

/// Two of three lockers grant by push only, long after the waiter last
/// heard from them: a quorum of the grants is older than the lease trusts.
/// `lock()` must not return that guard already lost; it starts over with
/// the same ticket and returns one that holds.
#[tokio::test(start_paused = true)]
async fn pushed_grants_older_than_the_lease_are_not_handed_out() {
    let s = setup(1);
    let (guard, lost_at_birth, released) = wait_through_lost_replies(&s, &[0, 1]).await;
    assert!(
        !lost_at_birth,
        "lock() returned a guard that was already lost"
    );
    let first = s.wrapped[0].waiters()[1].clone();
    assert_ne!(
        guard.uid(),
        first,
        "the stale wait was given up and a new one won"
    );
    assert!(
        released.elapsed() < Duration::from_secs(2),
        "granted {:?} after the release",
        released.elapsed()
    );
    sleep(LEASE.validity * 2).await;
    assert!(!guard.is_lost(), "the new grants are refreshed as usual");
    guard.unlock().await.unwrap();
}

/// Only one of three lockers is stale: the two fresh grants are a quorum,
/// and the lock holds for as long as they do. The wait wins as it is,
/// without starting over.
#[tokio::test(start_paused = true)]
async fn one_stale_grant_does_not_shorten_a_quorum_of_fresh_ones() {
    let s = setup(2);
    let (guard, lost_at_birth, released) = wait_through_lost_replies(&s, &[0]).await;
    assert!(
        !lost_at_birth,
        "lock() returned a guard that was already lost"
    );
    let first = s.wrapped[1].waiters()[1].clone();
    assert_eq!(guard.uid(), first, "the first wait won");
    assert!(
        released.elapsed() < Duration::from_millis(50),
        "granted by push at the release, not {:?} later",
        released.elapsed()
    );
    sleep(LEASE.validity * 2).await;
    assert!(!guard.is_lost());
    guard.unlock().await.unwrap();
}
