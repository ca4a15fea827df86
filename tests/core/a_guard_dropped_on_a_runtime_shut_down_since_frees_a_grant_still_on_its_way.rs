//! Reproduces a past break: a guard dropped on a runtime that shut down soon after left the grant of a straggler parked on its idle acquiring runtime until it expired: the straggler watch was a plain task of the dropping runtime, which went with it unrun, and nothing owed its unlock.
//!
//! docs/guarantees.md, "Any runtime": "Every unlock is owed from the
//! moment its release is planned: a release task that a runtime shut down
//! drops unrun or cuts short queues what it had not done ... A call still
//! in flight on a runtime that is no longer driven neither finishes nor is
//! dropped: when its lock is released, a locker whose call has not
//! answered by the time it must have ended (`Timeouts::acquire`, plus
//! 100 ms) is sent the unlock by the release's side, on the runtime that
//! released or the `Dsync`'s own". "No leaks from cancellation or
//! failure": dropping "a guard never leaves an entry behind on a reachable
//! locker".
//!
//! What happens instead: three lockers; locker 2 applies the lock at once
//! but its reply is slow. `try_lock` on runtime A wins with lockers 0 and
//! 1, and the call to locker 2 becomes a straggler handed to A, which is
//! then no longer driven (it stays alive). The guard is dropped on runtime
//! B: the release unlocks lockers 0 and 1 and spawns
//! `release::watch_stragglers` for locker 2 on B, to look after 1.1 s. B
//! is shut down 200 ms later: the watch goes with it, owing nothing, and
//! `finish_releases` on a third runtime finds nothing pending. Locker 2,
//! which answers every call, keeps the entry until it expires (60 s).
#![cfg(feature = "testing")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{self, holding};
use quorum_lock::testing::{CallKind, Relay, Route, TestCluster};
use quorum_lock::{Dsync, NetLocker};

const SEED: u64 = 36_315;

#[test]
fn a_guard_dropped_on_a_runtime_shut_down_since_frees_a_grant_still_on_its_way() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let lockers: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            Arc::new(Relay::new(l, move |kind, _| {
                if i == 2 && kind == CallKind::Lock {
                    Route::SlowReply(Duration::from_secs(30))
                } else {
                    Route::Forward
                }
            })) as Arc<dyn NetLocker>
        })
        .collect();
    let ds = Dsync::builder(lockers)
        .owner("a")
        .rng_seed(SEED)
        .build()
        .expect("valid coordinator");
    let a = common::runtime();
    let guard = a.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(2),
            ds.rw_mutex(["x"]).unwrap().try_lock(),
        )
        .await
        .expect("in time")
        .expect("lockers 0 and 1 grant")
    });
    let uid = guard.uid().to_owned();
    assert_eq!(
        holding(cluster.lockers(), &uid),
        [true, true, true],
        "locker 2 applied the lock; its reply is on its way"
    );
    // A is alive but no longer driven. The guard goes on B, which is shut
    // down a little later.
    let b = common::runtime();
    b.block_on(async {
        drop(guard);
        tokio::time::sleep(Duration::from_millis(200)).await;
    });
    let dropped = Instant::now();
    b.shutdown_timeout(Duration::from_secs(1));
    // Past the watch's 1.1 s.
    std::thread::sleep(Duration::from_secs(3));
    let finished = common::runtime().block_on(ds.finish_releases(Duration::from_secs(2)));
    std::thread::sleep(Duration::from_millis(200));
    let left = holding(cluster.lockers(), &uid);
    eprintln!(
        "{:?} after the guard was dropped: entries {left:?}; finish_releases gave {finished:?}",
        dropped.elapsed()
    );
    assert!(
        !left.iter().any(|h| *h),
        "every locker answers, yet {:?} after the guard was dropped on a runtime shut down since \
         (its acquiring runtime idle) the entries are {left:?} (finish_releases: {finished:?})",
        dropped.elapsed()
    );
    drop(a);
}
