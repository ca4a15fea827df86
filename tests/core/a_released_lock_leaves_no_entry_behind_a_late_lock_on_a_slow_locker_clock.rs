//! Reproduces a past break: a LocalLocker whose clock runs slow (within the drift bound) forgot a release after 60 s of real time, 30 s of its own validity, and granted a lock call of the released uid that arrived then, left there until it expired.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common;
use quorum_lock::testing::TestCluster;
use quorum_lock::LockerConfig;
use tokio::time::{sleep, Instant};

const SEED: u64 = 3821;

/// Three lockers (validity 60 s); node 0's clock runs at half the rate of
/// the others and of the client: docs/safety.md, "a locker that runs
/// *slower* than the holder only keeps entries longer", within the drift
/// bound. "a" locks "res": nodes 1 and 2 grant, the call to node 0 is slow
/// and times out. "a" unlocks, confirmed, and the unlock reaches node 0.
/// The lock call reaches node 0 70 s later: 35 s of node 0's clock after
/// the release. docs/guarantees.md ("No leaks from cancellation or
/// failure"): a `LocalLocker` refuses "a lock ... for a uid [it] released
/// within the last validity ... no entry comes back after a confirmed
/// unlock". Node 0 measures that validity in real time instead of on its
/// clock, has forgotten the release, and grants: the entry stays for
/// another 60 s of its clock (120 s), holding "res" against everyone there.
#[tokio::test(start_paused = true)]
async fn a_released_lock_leaves_no_entry_behind_a_late_lock_call_on_a_locker_whose_clock_runs_slow()
{
    eprintln!("seed {SEED}");
    let cluster = TestCluster::with_clocks(3, SEED, LockerConfig::default());
    cluster.set_rate(0.5, &[0]).unwrap();
    let late = Arc::new(AtomicBool::new(true));
    let delayed = Arc::new(AtomicUsize::new(0));
    let links = common::one_node_with_late_locks(
        cluster.net_lockers(),
        0,
        &late,
        &delayed,
        Duration::from_secs(70),
    );
    let a = common::seeded(links, "a", SEED);
    let start = Instant::now();

    let held = a.rw_mutex(["res"]).unwrap().lock().await.unwrap();
    let uid = held.uid().to_owned();
    late.store(false, Ordering::SeqCst);
    assert_eq!(
        delayed.load(Ordering::SeqCst),
        1,
        "one lock call to node 0 is on its way"
    );
    // Past the call's deadline: node 0 counts as failed, and is unlocked.
    sleep(Duration::from_secs(2)).await;
    held.unlock()
        .await
        .expect("nodes 1 and 2 confirm the unlock");
    let unlocked = Instant::now();
    let node0 = cluster.lockers()[0].clone();
    assert!(
        !node0.snapshot().iter().any(|e| e.uid == uid),
        "the unlock reached node 0"
    );
    eprintln!("at {:?}: a unlocked {uid}, confirmed", start.elapsed());

    // The lock call lands at about 70 s; look 5 s later.
    tokio::time::sleep_until(start + Duration::from_secs(75)).await;
    let left: Vec<String> = node0.snapshot().into_iter().map(|e| e.uid).collect();
    eprintln!("at {:?}: node 0 keeps {left:?}", start.elapsed());
    assert!(
        !left.contains(&uid),
        "a's unlock of {uid} was confirmed at {:?} and reached node 0, yet at {:?} (about {:?} \
         of node 0's clock later, within its 60 s validity) node 0 keeps {left:?}",
        unlocked - start,
        start.elapsed(),
        (start.elapsed() - (unlocked - start)) / 2
    );
}
