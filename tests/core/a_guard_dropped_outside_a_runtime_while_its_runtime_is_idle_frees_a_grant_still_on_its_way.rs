//! Reproduces a past break: a guard dropped on a plain thread while its acquiring runtime was idle left the grant of a locker whose reply was still on its way (a straggler of the won round, parked on that runtime) until it expired, on a locker that answered every call.
//!
//! docs/guarantees.md, "No leaks from cancellation or failure": dropping
//! "a guard never leaves an entry behind on a reachable locker". "Any
//! runtime": "What is started outside any runtime (an `unlock()` on a
//! plain thread, a guard, a lock future or a permit dropped there) runs on
//! a runtime the `Dsync` keeps for such work ... So an acquiring runtime
//! that is idle or gone holds nothing up." A straggler's grant that
//! arrives after the win is part of the lock (src/lock/round.rs), and the
//! release undoes it.
//!
//! What happens instead: three lockers; locker 2 applies the lock at once
//! but its reply is slow. `try_lock` on runtime A wins with lockers 0 and
//! 1, and the call to locker 2 becomes a straggler handed to A, which is
//! then no longer driven (it stays alive). The guard is dropped on a plain
//! thread: its release plan leaves out locker 2 (its call is in flight,
//! and "undoes its own grant when it finishes"), so the own runtime
//! unlocks lockers 0 and 1 only. The straggler waits for A, so locker 2,
//! which answers every call, keeps the entry until it expires (the
//! lockers' 60 s validity); `finish_releases` on another runtime counts
//! the straggler as pending but cannot send its unlock.
#![cfg(feature = "testing")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{self, holding};
use quorum_lock::testing::{CallKind, Relay, Route, TestCluster};
use quorum_lock::{Dsync, NetLocker};

const SEED: u64 = 36_304;

#[test]
fn a_guard_dropped_outside_a_runtime_while_its_runtime_is_idle_frees_a_grant_still_on_its_way() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let lockers: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            Arc::new(Relay::new(l, move |kind, _| {
                if i == 2 && kind == CallKind::Lock {
                    Route::SlowReply(Duration::from_millis(500))
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
    // A is alive but no longer driven. The guard goes on this plain thread.
    drop(guard);
    let dropped = Instant::now();
    let mut left = holding(cluster.lockers(), &uid);
    while dropped.elapsed() < Duration::from_secs(3) && left.iter().any(|h| *h) {
        std::thread::sleep(Duration::from_millis(20));
        left = holding(cluster.lockers(), &uid);
    }
    let finished = common::runtime().block_on(ds.finish_releases(Duration::from_secs(1)));
    left = holding(cluster.lockers(), &uid);
    eprintln!(
        "{:?} after the guard was dropped: entries {left:?}; finish_releases gave {finished:?}",
        dropped.elapsed()
    );
    assert!(
        !left.iter().any(|h| *h),
        "every locker answers, yet {:?} after the guard was dropped outside any runtime (its \
         acquiring runtime idle) the entries are {left:?} (finish_releases: {finished:?})",
        dropped.elapsed()
    );
    drop(a);
}
