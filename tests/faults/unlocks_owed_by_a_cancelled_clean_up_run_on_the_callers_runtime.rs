#![cfg(feature = "testing")]
//! Reproduces a past break: the unlock owed by a cancelled clean-up of a lost lock was sent from the coordinator's own runtime, on the real clock, beside a test's paused one (a reader and a writer held one name in the randomized restarts mix, one process in four).
//!
//! An unlock that a dropped call, a lost lock's clean-up or a straggler
//! leaves behind goes to the locker's retry queue. Its drain task ran on
//! the coordinator's own runtime whenever it was queued from a drop, even
//! inside a runtime. With tokio's clock paused, that runtime's clock is the
//! real one: its unlock freed a name at a moment the test did not choose,
//! and a `LocalLocker` promoting a waiter there stamped the new entry with
//! the real clock, far behind the paused one, so the entry expired at the
//! next sweep while its holder trusted it. Now the drain runs on the
//! runtime that dropped the call, on its clock; only a runtime that shuts
//! down hands its queue over to the coordinator's own.

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::testing::{CallKind, FaultyLocker};
use quorum_lock::{Dsync, LocalLocker, NetLocker};

fn unlocks_seen(node: &FaultyLocker) -> u64 {
    node.stats(CallKind::Unlock).seen
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn unlocks_owed_by_a_cancelled_clean_up_run_on_the_callers_runtime() {
    let nodes: Vec<Arc<FaultyLocker>> = (0..3)
        .map(|i| {
            let locker = LocalLocker::with_config(format!("n{i}"), Default::default());
            Arc::new(FaultyLocker::local(Arc::new(locker), i))
        })
        .collect();
    let lockers: Vec<Arc<dyn NetLocker>> = nodes
        .iter()
        .map(|n| n.clone() as Arc<dyn NetLocker>)
        .collect();
    let ds = Dsync::builder(lockers)
        .owner("client")
        .rng_seed(3)
        .build()
        .expect("a coordinator");
    let mutex = ds.rw_mutex(["x"]).expect("a valid name");
    let guard = mutex.lock().await.expect("every locker grants");
    // Two of three lockers fall silent: the refreshes fail, the lock is
    // lost, and its clean-up's force-unlocks to them stay in flight.
    nodes[1].set_hang(true);
    nodes[2].set_hang(true);
    tokio::time::timeout(Duration::from_secs(120), guard.lost())
        .await
        .expect("the loss is signalled");
    // The holder lets go, and cancels its unlock while the clean-up's
    // calls to the silent lockers are on their way: what they owe is
    // queued for the lockers' retry queues.
    let cancelled = tokio::time::timeout(Duration::from_millis(50), guard.unlock()).await;
    assert!(
        cancelled.is_err(),
        "the unlock could not finish: {cancelled:?}"
    );
    nodes[1].heal();
    nodes[2].heal();
    let before = (unlocks_seen(&nodes[1]), unlocks_seen(&nodes[2]));

    // Nothing of the coordinator may run while this runtime does not: give
    // a thread of its own the real time to send the unlocks it was handed.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        (unlocks_seen(&nodes[1]), unlocks_seen(&nodes[2])),
        before,
        "an unlock owed by the cancelled clean-up was sent while the test's runtime stood \
         still: its drain runs on another runtime, on another clock"
    );

    // On this runtime's clock, the drain sends them within its backoff.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = (unlocks_seen(&nodes[1]), unlocks_seen(&nodes[2]));
    assert!(
        after.0 > before.0 && after.1 > before.1,
        "the owed unlocks were not sent on this runtime: before {before:?}, after {after:?}"
    );
}
