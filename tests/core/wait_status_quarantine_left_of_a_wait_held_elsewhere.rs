//! Reproduces a past break: `WaitStatus::quarantine_left()` of a wait held elsewhere (two lockers queue it behind a holder, the third is in quarantine) says `Some(60s)`, though quarantine is not what the wait waits for.
//!
//! The rustdoc of `WaitStatus::quarantine_left`: "How long until enough
//! lockers are out of quarantine for a quorum of the reachable ones ...
//! when they said; `None` when quarantine is not what the wait waits for."
//!
//! Three in-process lockers. Client "a" holds "job" on all three; then
//! locker 2 restarts (its entry gone, in quarantine for 60 s). Client "b"
//! waits for "job": lockers 0 and 1 queue it behind "a", locker 2 refuses
//! it for quarantine. `waiting()` says `HeldElsewhere` ("held elsewhere: 2
//! of 3 lockers have it taken by another owner"), and the wait that gives
//! up fails with `Timeout`, as documented, yet `quarantine_left()` answers
//! `Some(60s)`: a quorum of reachable lockers is there already, and the
//! quarantine's end changes nothing for the wait. It reads as "how long
//! until the quorum is back" to a caller that asks it first (as an
//! operator's tool printing "retry in ..." would).
#![cfg(feature = "testing")]

use crate::common;
use std::time::Duration;

use quorum_lock::testing::TestCluster;
use quorum_lock::{Dsync, Error, WaitReason};
use tokio::time::sleep;

const SEED: u64 = 4409;

#[tokio::test(start_paused = true)]
async fn quarantine_left_is_none_for_a_wait_held_elsewhere() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let holder = Dsync::builder(cluster.net_lockers())
        .owner("a")
        .rng_seed(SEED)
        .build()
        .unwrap();
    let held = holder.rw_mutex(["job"]).unwrap();
    let guard = held.lock().await.expect("a free lock is granted");
    cluster.restart(&[2]).unwrap();
    let client = Dsync::builder(cluster.net_lockers())
        .owner("b")
        .rng_seed(SEED + 1)
        .build()
        .unwrap();
    let mutex = client.rw_mutex(["job"]).unwrap();
    let wait = common::spawn_lock_timeout(&mutex, Duration::from_secs(3));
    sleep(Duration::from_secs(2)).await;
    let status = mutex.waiting().expect("the wait runs");
    eprintln!(
        "waiting at 2s: {status}; quarantine_left() = {:?} ({status:?})",
        status.quarantine_left()
    );
    let result = common::ended(wait).await;
    eprintln!("gave up with: {result:?}");
    drop(guard);
    assert_eq!(status.reason(), WaitReason::HeldElsewhere, "{status}");
    assert!(matches!(result, Err(Error::Timeout)), "{result:?}");
    assert_eq!(
        status.quarantine_left(),
        None,
        "quarantine is not what the wait waits for: {status}"
    );
}
