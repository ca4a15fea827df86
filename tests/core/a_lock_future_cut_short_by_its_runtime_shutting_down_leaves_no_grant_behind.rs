//! Reproduces a past break: a lock future dropped by the shutdown of the runtime it ran on, while grants it had received were still on their way back, left those grants on lockers that answer until they expired, and `finish_releases` said every release was done.
//!
//! docs/guarantees.md, "No leaks from cancellation or failure": "Dropping a
//! `lock()`/`read()` future ... never leaves an entry behind on a
//! reachable locker: calls still in flight finish in the background and
//! undo any grant they receive." "Any runtime": "Every unlock is owed from
//! the moment its release is planned: a release task that a runtime shut
//! down drops unrun or cuts short queues what it had not done ... The queue
//! is then sent by the next drain task on any runtime: ... or
//! `Dsync::finish_releases`." `Dsync::finish_releases`
//! (src/lock/dsync.rs) waits for "the grants and places of abandoned waits
//! (a `lock_timeout` that gave up, a dropped future)".
//!
//! What happens instead: nodes 1 and 2 apply the lock at once but their
//! replies take 3 s (a `Relay` routing `Lock` calls `SlowReply`); node 0
//! grants at once. The runtime running `try_lock` is shut down 200 ms in.
//! The future is dropped there: its stragglers (the calls to nodes 1 and
//! 2) are spawned onto the runtime that is shutting down (the current one)
//! and dropped unrun, and nothing queues an unlock for a call that may have
//! been applied. `finish_releases` on another runtime returns at once;
//! nodes 1 and 2, answering every call, keep the grant until it expires.
#![cfg(feature = "testing")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use quorum_lock::testing::{CallKind, Relay, Route, TestCluster};
use quorum_lock::{Dsync, NetLocker};

const SEED: u64 = 36_282;

/// Which nodes hold an entry of resource `x`, whatever its uid.
fn holding_x(cluster: &TestCluster) -> Vec<bool> {
    cluster
        .lockers()
        .iter()
        .map(|node| node.snapshot().iter().any(|e| e.resource == "x"))
        .collect()
}

#[test]
fn a_lock_future_cut_short_by_its_runtime_shutting_down_leaves_no_grant_behind() {
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
    acquiring.block_on(async {
        tokio::spawn(async move {
            let _ = mutex.try_lock().await;
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
    });
    assert_eq!(
        holding_x(&cluster),
        [true, true, true],
        "every node applied the lock; two replies are still on their way"
    );
    let shut = Instant::now();
    acquiring.shutdown_timeout(Duration::from_secs(1));
    let finishing = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let finished = finishing.block_on(ds.finish_releases(Duration::from_secs(2)));
    // Bounded: whatever is still running has 2 s more to land.
    let mut left = holding_x(&cluster);
    while left.iter().any(|h| *h) && shut.elapsed() < Duration::from_secs(4) {
        std::thread::sleep(Duration::from_millis(20));
        left = holding_x(&cluster);
    }
    let at = shut.elapsed();
    eprintln!("{at:?} after the shutdown: finish_releases {finished:?}, nodes holding x {left:?}");
    assert!(
        at < Duration::from_secs(30),
        "checked long before the 60 s validity could expire the entries: {at:?}"
    );
    assert!(
        !left.iter().any(|h| *h),
        "the lock future was dropped (its runtime shut down) and, {at:?} later, nodes that \
         answer every call still hold its grant: {left:?} (finish_releases gave {finished:?})"
    );
}
