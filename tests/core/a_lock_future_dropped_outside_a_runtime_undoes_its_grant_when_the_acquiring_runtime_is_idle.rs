//! Reproduces a past break: a lock future dropped outside any runtime while the runtime that polled it sat idle left the grant it had received on its locker, since its undo was spawned on that idle runtime.
//!
//! docs/guarantees.md, "No leaks from cancellation or failure": "Dropping a
//! `lock()`/`read()` future, an `unlock()` future or a guard never leaves
//! an entry behind on a reachable locker: calls still in flight finish in
//! the background and undo any grant they receive." "Any runtime":
//! "Releases run on the runtime that drops or unlocks the guard (on a
//! private one for `unlock()` outside any runtime ...), so an acquiring
//! runtime that is idle or gone holds nothing up."
//!
//! What happens instead: the round abandoned by the drop hands its undo
//! to the handle of the runtime that polled it (`Round::drop` ->
//! `release::abandon(state, &self.handle)`), not to a runtime of its own
//! as a guard dropped outside any runtime now does. That runtime is alive
//! but no longer driven, so the undo never runs: locker 0, answering all
//! along, keeps the grant until it expires.
#![cfg(feature = "testing")]

use crate::common;
use std::time::{Duration, Instant};

use futures::executor::block_on;
use quorum_lock::testing::TestCluster;
use quorum_lock::NetLocker;

const SEED: u64 = 3630;

async fn holds_x(cluster: &TestCluster, index: usize) -> bool {
    NetLocker::locks(&*cluster.lockers()[index])
        .await
        .expect("a local listing")
        .iter()
        .any(|l| l.resource == "x")
}

/// Lockers 1 and 2 hang, so the lock call gets locker 0's grant and waits
/// for a quorum. The future is polled for 200 ms on runtime X, which then
/// stays alive and idle; the future is dropped on this plain thread and
/// the hung lockers are healed. Within a second (the validity is 6 s)
/// locker 0 should no longer hold the grant.
#[test]
fn a_lock_future_dropped_outside_a_runtime_undoes_its_grant_when_the_acquiring_runtime_is_idle() {
    eprintln!("seed {SEED}");
    let validity = Duration::from_secs(6);
    let (cluster, builder) = common::three_lockers_and_a_lease(
        SEED,
        validity,
        Duration::from_secs(2),
        Duration::from_secs(1),
    );
    let ds = builder.build().expect("valid coordinator");
    cluster
        .set_hang(true, &[1, 2])
        .expect("nodes 1 and 2 exist");
    let acquiring = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let mutex = ds.rw_mutex(["x"]).unwrap();
    let mut locking = Box::pin(mutex.try_lock());
    let polled = acquiring
        .block_on(async { tokio::time::timeout(Duration::from_millis(200), &mut locking).await });
    assert!(polled.is_err(), "no quorum yet: the call is still waiting");
    assert!(
        block_on(holds_x(&cluster, 0)),
        "locker 0 granted before the drop"
    );
    // Dropped outside any runtime; runtime X lives on, idle.
    drop(locking);
    let dropped = Instant::now();
    cluster.heal_all();
    let mut held = true;
    while held && dropped.elapsed() < Duration::from_secs(1) {
        std::thread::sleep(Duration::from_millis(50));
        held = block_on(holds_x(&cluster, 0));
    }
    let at = dropped.elapsed();
    eprintln!("{at:?} after the drop, locker 0 holds the grant: {held}");
    assert!(
        at < Duration::from_secs(5),
        "checked before the locker could expire the entry: {at:?}"
    );
    assert!(
        !held,
        "a lock future dropped outside a runtime left its grant on a locker that answers, its \
         undo waiting on the idle runtime that polled it"
    );
    drop(acquiring);
}
