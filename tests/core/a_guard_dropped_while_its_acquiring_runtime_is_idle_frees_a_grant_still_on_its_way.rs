//! A guard dropped while its acquiring runtime is idle frees the grant of
//! a locker whose reply is still on its way (a straggler of the won round,
//! parked on that runtime), whether the guard is dropped on a plain thread
//! or on another runtime that shuts down soon after.
//!
//! docs/guarantees.md, "No leaks from cancellation or failure": dropping
//! "a guard never leaves an entry behind on a reachable locker". "Any
//! runtime": "Every unlock is owed from the moment its release is planned:
//! a release task that a runtime shut down drops unrun or cuts short
//! queues what it had not done ... A call still in flight on a runtime
//! that is no longer driven neither finishes nor is dropped: when its lock
//! is released, a locker whose call has not answered by the time it must
//! have ended (`Timeouts::acquire`, plus 100 ms) is sent the unlock by the
//! release's side, on the runtime that released or the `Dsync`'s own";
//! "What is started outside any runtime (an `unlock()` on a plain thread,
//! a guard, a lock future or a permit dropped there) runs on a runtime the
//! `Dsync` keeps for such work ... So an acquiring runtime that is idle or
//! gone holds nothing up." A straggler's grant that arrives after the win
//! is part of the lock (src/lock/round.rs), and the release undoes it.
//!
//! Every scene: three lockers; locker 2 applies the lock at once but its
//! reply is slow. `try_lock` on runtime A wins with lockers 0 and 1, and
//! the call to locker 2 becomes a straggler handed to A, which is then no
//! longer driven (it stays alive). Locker 2 answers every call; its entry
//! would expire only after the lockers' 60 s validity.
#![cfg(feature = "testing")]

use std::time::{Duration, Instant};

use crate::common::{self, holding};
use quorum_lock::testing::{CallKind, Route, TestCluster};
use quorum_lock::Dsync;

/// Reproduces a past break: a guard dropped on a plain thread while its acquiring runtime was idle left the grant of a locker whose reply was still on its way until it expired (the release plan left the straggler out, to undo its own grant, and it waited for the idle runtime).
#[test]
fn a_guard_dropped_outside_a_runtime_while_its_runtime_is_idle_frees_a_grant_still_on_its_way() {
    scene(36_304, DroppedOn::PlainThread);
}

/// Reproduces a past break: a guard dropped on a runtime that shut down soon after left the grant of a straggler parked on its idle acquiring runtime until it expired: the straggler watch was a plain task of the dropping runtime, which went with it unrun, and nothing owed its unlock.
#[test]
fn a_guard_dropped_on_a_runtime_shut_down_since_frees_a_grant_still_on_its_way() {
    scene(36_315, DroppedOn::RuntimeShutDownSoonAfter);
}

#[derive(Clone, Copy, Debug)]
enum DroppedOn {
    /// Outside any runtime.
    PlainThread,
    /// Runtime B, shut down 200 ms later.
    RuntimeShutDownSoonAfter,
}

fn scene(seed: u64, dropped_on: DroppedOn) {
    eprintln!("seed {seed}, the guard dropped on {dropped_on:?}");
    let cluster = TestCluster::new(3, seed);
    let slow_reply = match dropped_on {
        DroppedOn::PlainThread => Duration::from_millis(500),
        // Longer than the scene: only the release's side can unlock it.
        DroppedOn::RuntimeShutDownSoonAfter => Duration::from_secs(30),
    };
    let lockers = cluster.relayed_lockers(move |i, kind, _| {
        if i == 2 && kind == CallKind::Lock {
            Route::SlowReply(slow_reply)
        } else {
            Route::Forward
        }
    });
    let ds = Dsync::builder(lockers)
        .owner("a")
        .rng_seed(seed)
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
    // A is alive but no longer driven.
    let (dropped, finished, left) = match dropped_on {
        DroppedOn::PlainThread => {
            drop(guard);
            let dropped = Instant::now();
            let mut left = holding(cluster.lockers(), &uid);
            while dropped.elapsed() < Duration::from_secs(3) && left.iter().any(|h| *h) {
                std::thread::sleep(Duration::from_millis(20));
                left = holding(cluster.lockers(), &uid);
            }
            let finished = common::runtime().block_on(ds.finish_releases(Duration::from_secs(1)));
            (dropped, finished, holding(cluster.lockers(), &uid))
        }
        DroppedOn::RuntimeShutDownSoonAfter => {
            let b = common::runtime();
            b.block_on(async {
                drop(guard);
                tokio::time::sleep(Duration::from_millis(200)).await;
            });
            let dropped = Instant::now();
            b.shutdown_timeout(Duration::from_secs(1));
            // Past the straggler watch's 1.1 s.
            std::thread::sleep(Duration::from_secs(3));
            let finished = common::runtime().block_on(ds.finish_releases(Duration::from_secs(2)));
            std::thread::sleep(Duration::from_millis(200));
            (dropped, finished, holding(cluster.lockers(), &uid))
        }
    };
    eprintln!(
        "{:?} after the guard was dropped: entries {left:?}; finish_releases gave {finished:?}",
        dropped.elapsed()
    );
    assert!(
        !left.iter().any(|h| *h),
        "every locker answers, yet {:?} after the guard was dropped on {dropped_on:?} (its \
         acquiring runtime idle) the entries are {left:?} (finish_releases: {finished:?})",
        dropped.elapsed()
    );
    drop(a);
}
