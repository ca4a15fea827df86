//! Reproduces a past break: a lock future polled on a runtime that then ended, and dropped outside any runtime while grants it had received were still on their way back, left those grants on lockers that answer until they expired.
//!
//! docs/guarantees.md, "No leaks from cancellation or failure": "Dropping a
//! `lock()`/`read()` future ... never leaves an entry behind on a
//! reachable locker: calls still in flight finish in the background and
//! undo any grant they receive." "Any runtime": "What is started outside
//! any runtime (an `unlock()` on a plain thread, a guard, a lock future or
//! a permit dropped there) runs on a runtime the `Dsync` keeps for such
//! work ... So an acquiring runtime that is idle or gone holds nothing
//! up." `Dsync::finish_releases` (src/lock/dsync.rs) waits for "the grants
//! and places of abandoned waits (a `lock_timeout` that gave up, a dropped
//! future)".
//!
//! What happens instead: nodes 1 and 2 apply the lock at once but their
//! replies take 3 s (a `Relay` routing `Lock` calls `SlowReply`); node 0
//! grants at once. `try_lock` is polled for 200 ms on runtime X, which is
//! then dropped; the future, still waiting, is dropped on the test thread.
//! Its stragglers (the calls to nodes 1 and 2) are handed to the
//! coordinator's own runtime, but they wait on timers of runtime X, which
//! is gone: polling them there panics ("A Tokio 1.x context was found, but
//! it is being shutdown", on the thread `quorum-lock-background`), so they
//! never bring the grants back to be undone, and nothing queues an unlock
//! for a call that may have been applied. Nodes 1 and 2, answering every
//! call, keep the grant until it expires, and `finish_releases` returns
//! `Ok` at once.
#![cfg(feature = "testing")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use quorum_lock::testing::{CallKind, Relay, Route, TestCluster};
use quorum_lock::{Dsync, NetLocker};

const SEED: u64 = 36_283;

/// Which nodes hold an entry of resource `x`, whatever its uid.
fn holding_x(cluster: &TestCluster) -> Vec<bool> {
    cluster
        .lockers()
        .iter()
        .map(|node| node.snapshot().iter().any(|e| e.resource == "x"))
        .collect()
}

#[test]
fn a_lock_future_dropped_outside_a_runtime_after_its_runtime_ended_leaves_no_grant_behind() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let lockers: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            if i == 0 {
                return l;
            }
            Arc::new(Relay::new(l, |kind, _| {
                if kind == CallKind::Lock {
                    Route::SlowReply(Duration::from_secs(3))
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
    let acquiring = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let mutex = ds.rw_mutex(["x"]).unwrap();
    let mut locking = Box::pin(mutex.try_lock());
    let polled = acquiring
        .block_on(async { tokio::time::timeout(Duration::from_millis(200), &mut locking).await });
    assert!(
        polled.is_err(),
        "no quorum yet: two replies are on their way"
    );
    assert_eq!(
        holding_x(&cluster),
        [true, true, true],
        "every node applied the lock"
    );
    drop(acquiring);
    // Dropped outside any runtime, its runtime gone.
    drop(locking);
    let dropped = Instant::now();
    let finishing = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let finished = finishing.block_on(ds.finish_releases(Duration::from_secs(5)));
    // Bounded: whatever is still running has until 6 s after the drop.
    let mut left = holding_x(&cluster);
    while left.iter().any(|h| *h) && dropped.elapsed() < Duration::from_secs(6) {
        std::thread::sleep(Duration::from_millis(20));
        left = holding_x(&cluster);
    }
    let at = dropped.elapsed();
    eprintln!("{at:?} after the drop: finish_releases {finished:?}, nodes holding x {left:?}");
    assert!(
        at < Duration::from_secs(30),
        "checked long before the 60 s validity could expire the entries: {at:?}"
    );
    assert!(
        !left.iter().any(|h| *h),
        "the lock future was dropped outside a runtime after its runtime ended and, {at:?} \
         later, nodes that answer every call still hold its grant: {left:?} (finish_releases \
         gave {finished:?})"
    );
}
