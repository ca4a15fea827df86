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

use crate::common::hooked::{Call, Hooked, Optional};
use crate::common::nodes;
use quorum_lock::{Dsync, Lease, LocalLocker, NetLocker};
use tokio::time::{sleep, Instant};

/// The `lock_wait` calls a locker saw: while muted, one after the first
/// of its uid reaches the locker but its reply never comes back.
#[derive(Default)]
struct LostWaitReplies {
    muted: AtomicBool,
    /// `lock_wait` calls seen per uid, in order of first sight.
    seen: Mutex<Vec<(String, usize)>>,
}

impl LostWaitReplies {
    /// `inner`, forwarding everything, its `lock_wait` replies lost as
    /// `lost` says.
    fn wrap(inner: Arc<LocalLocker>, lost: Arc<LostWaitReplies>) -> Arc<dyn NetLocker> {
        let name = format!("lost-wait-replies({})", inner.endpoint());
        let counted = lost.clone();
        Hooked::new(inner)
            .arriving_late(move |call, args| {
                if call == Call::LockWait {
                    counted.count(&args.uid);
                }
                None
            })
            // Nothing runs between a call's arrival and its reply: the
            // in-process locker answers at once.
            .losing_replies(move |call, args| {
                call == Call::LockWait && lost.again(&args.uid) && lost.muted.load(Ordering::SeqCst)
            })
            .lacking(&[Optional::Proclaim, Optional::Leader, Optional::Validity])
            .named(name)
            .local(true)
            .shared()
    }

    fn mute(&self) {
        self.muted.store(true, Ordering::SeqCst);
    }

    /// The uids that waited here, in order of their first call.
    fn waiters(&self) -> Vec<String> {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.iter().map(|(uid, _)| uid.clone()).collect()
    }

    /// Counts a call of `uid`.
    fn count(&self, uid: &str) {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        match seen.iter_mut().find(|(u, _)| u == uid) {
            Some((_, calls)) => *calls += 1,
            None => seen.push((uid.to_owned(), 1)),
        }
    }

    /// Whether the calls of `uid` counted so far are more than one.
    fn again(&self, uid: &str) -> bool {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.iter().any(|(u, calls)| u == uid && *calls > 1)
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
    let wrapped: Vec<Arc<LostWaitReplies>> = (0..3).map(|_| Arc::default()).collect();
    let lockers: Vec<Arc<dyn NetLocker>> = nodes(3)
        .into_iter()
        .zip(&wrapped)
        .map(|(node, lost)| LostWaitReplies::wrap(node, lost.clone()))
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
