//! Reproduces a past break: an `unlock()` future polled on a runtime that then sat idle, and dropped outside any runtime while lockers it had asked had not answered yet, left the lock's entry on those lockers after they answered again, its unlock calls waiting on the idle runtime's timers.
//!
//! docs/guarantees.md, "No leaks from cancellation or failure": "Dropping
//! a `lock()`/`read()` future, an `unlock()` future or a guard never leaves
//! an entry behind on a reachable locker: calls still in flight finish in
//! the background ... An unlock that fails goes to its locker's retry
//! queue and is retried with backoff until it lands". "Any runtime": "What
//! is started outside any runtime (an `unlock()` on a plain thread, a
//! guard, a lock future or a permit dropped there) runs on a runtime the
//! `Dsync` keeps for such work ... So an acquiring runtime that is idle or
//! gone holds nothing up." `WriteGuard::unlock` (src/lock/guard.rs),
//! cancel safety: "dropping it before or after it is first polled hands
//! the outstanding unlock calls to the runtime."
//!
//! What happens instead: the lock is held on runtime X by all three nodes;
//! nodes 1 and 2 then hang, and `unlock()` is polled on X for 200 ms (node
//! 0 confirms; no quorum yet). X is left idle (kept, not driven) and the
//! future is dropped on the test thread. Its calls to nodes 1 and 2 are
//! handed to the coordinator's own runtime, but they wait on their
//! deadline timers, made on X, which only fire while X is driven: the
//! calls never fail, so the unlocks never reach the retry queue. Nodes 1
//! and 2 answer again at once, and keep the entry until it expires.
#![cfg(feature = "testing")]

use std::time::{Duration, Instant};

use quorum_lock::testing::TestCluster;
use quorum_lock::{Dsync, Timeouts};

use crate::common::holding;

const SEED: u64 = 36_285;

#[test]
fn an_unlock_future_dropped_outside_a_runtime_while_its_runtime_is_idle_leaves_no_entry_behind() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let ds = Dsync::builder(cluster.net_lockers())
        .owner("a")
        .rng_seed(SEED)
        .timeouts(Timeouts {
            unlock: Duration::from_secs(1),
            ..Timeouts::default()
        })
        .build()
        .expect("valid coordinator");
    let acquiring = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let mutex = ds.rw_mutex(["x"]).unwrap();
    let guard = acquiring.block_on(async {
        tokio::time::timeout(Duration::from_secs(5), mutex.try_lock())
            .await
            .expect("in time")
            .expect("all three grant")
    });
    let uid = guard.uid().to_owned();
    assert_eq!(holding(cluster.lockers(), &uid), [true, true, true]);
    cluster
        .set_hang(true, &[1, 2])
        .expect("nodes 1 and 2 exist");
    let mut unlocking = Box::pin(guard.unlock());
    let polled = acquiring
        .block_on(async { tokio::time::timeout(Duration::from_millis(200), &mut unlocking).await });
    assert!(
        polled.is_err(),
        "no quorum confirmed yet: nodes 1 and 2 hang"
    );
    // Dropped outside any runtime; runtime X lives on, idle.
    drop(unlocking);
    let dropped = Instant::now();
    cluster.heal_all();
    // The unlock deadline is 1 s; a failed unlock is retried from the
    // queue within a backoff step. 4 s is plenty.
    let mut left = holding(cluster.lockers(), &uid);
    while left.iter().any(|h| *h) && dropped.elapsed() < Duration::from_secs(4) {
        std::thread::sleep(Duration::from_millis(20));
        left = holding(cluster.lockers(), &uid);
    }
    let at = dropped.elapsed();
    eprintln!("{at:?} after the drop, runtime X idle: lockers holding the uid {left:?}");
    assert!(
        at < Duration::from_secs(30),
        "checked long before the 60 s validity could expire the entries: {at:?}"
    );
    assert!(
        !left.iter().any(|h| *h),
        "the unlock() future was dropped outside a runtime while the runtime that polled it sat \
         idle and, {at:?} later, lockers answering again still hold the entry: {left:?}"
    );
    drop(acquiring);
}
