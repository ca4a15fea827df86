//! Reproduces a past break: the force-unlock of a lost lock, sent once its guard was dropped, was never retried on a locker it could not reach, which kept the entry after it answered again.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::election_support::client;
use quorum_lock::testing::TestCluster;
use quorum_lock::{LockArgs, NetLocker};
use tokio::time::sleep;

const SEED: u64 = 53;

/// Three lockers grant "x" to "a". An admin forces "x" open on nodes 0 and
/// 2, and a's link to node 1 is cut: the next refresh hears "not held"
/// from nodes 0 and 2 and the lock is lost. The holder drops its guard,
/// and the lost lock's entries are force-unlocked at once; node 1 cannot
/// be reached. The link comes back 2 s later, well within the validity.
/// docs/guarantees.md "No leaks from cancellation or failure": dropping a
/// guard "never leaves an entry behind on a reachable locker", and an
/// unlock that fails "is retried with backoff until it lands or until the
/// locker must have expired the entry by itself", so "a locker that
/// answers again within the validity is cleaned up". Node 1 answers every
/// call from then on and keeps the entry.
#[tokio::test(start_paused = true)]
async fn a_dropped_lost_guard_leaves_no_entry_on_a_locker_that_answers_again() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let a = client(&cluster, "a");
    let guard = a.rw_mutex(["x"]).unwrap().lock().await.unwrap();
    let uid = guard.uid().to_owned();
    let force = LockArgs {
        uid: "".into(),
        resources: vec!["x".to_string()].into(),
        owner: "admin".into(),
        source: "test".into(),
        quorum: 0,
    };
    for i in [0, 2] {
        assert!(NetLocker::force_unlock(&*cluster.lockers()[i], &force)
            .await
            .unwrap());
    }
    cluster.partition("a", &[1]).unwrap();
    let mut waited = 0;
    while !guard.is_lost() && waited < 300 {
        sleep(Duration::from_millis(100)).await;
        waited += 1;
    }
    assert!(guard.is_lost(), "nodes 0 and 2 say not held");
    drop(guard);
    sleep(Duration::from_secs(2)).await;
    cluster.heal_partition("a", &[1]).unwrap();
    sleep(Duration::from_secs(20)).await;
    let left: Vec<bool> = crate::common::holding(cluster.lockers(), &uid);
    eprintln!("22 s after the lost guard was dropped, nodes holding its uid: {left:?}");
    assert!(
        !left.iter().any(|h| *h),
        "node 1 answers again, yet keeps the dropped lost lock's entry: {left:?}"
    );
}
