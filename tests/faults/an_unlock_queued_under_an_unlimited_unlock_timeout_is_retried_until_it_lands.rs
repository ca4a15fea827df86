//! Reproduces a past break: with `Timeouts::unlock` of `Duration::MAX`, a drain task panics adding 100 ms to the doubled timeout, and the unlocks it had taken from the queue are lost: a locker that answers again keeps the entry.
//!
//! docs/guarantees.md, "Settings cannot panic": "Every `Duration` in
//! `Timeouts` ... may be `Duration::MAX` ("no limit"); deadlines
//! saturate." And "No leaks from cancellation or failure": "An unlock that
//! fails goes to its locker's retry queue and is retried with backoff until
//! it lands or until the locker must have expired the entry by itself."
//!
//! The scene (paused time): node 0's reply to the lock call is lost after
//! the lock was applied, so the lock is won on nodes 1 and 2 and node 0
//! holds an entry the client must unlock like a grant (its call fails at
//! its deadline, a second later). Node 0 refuses the
//! unlock, which is queued; its drain task computes its batch's deadline as
//! `unlock.saturating_mul(2) + 100 ms`, which overflows, after it took the
//! unlock out of `pending`. Node 0 answers again at once, yet ten seconds
//! later it still holds the entry and `finish_releases` reports nothing
//! pending.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::TestCluster;
use quorum_lock::{Dsync, Timeouts};

const SEED: u64 = 4502;

/// Per node, whether it holds an entry for `uid`.
fn holding(cluster: &TestCluster, uid: &str) -> Vec<bool> {
    cluster
        .lockers()
        .iter()
        .map(|node| node.snapshot().iter().any(|e| e.uid == uid))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn an_unlock_queued_under_an_unlimited_unlock_timeout_is_retried_until_it_lands() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let ds = Dsync::builder(cluster.net_lockers())
        .owner("a")
        .rng_seed(SEED)
        .timeouts(Timeouts {
            unlock: Duration::MAX,
            ..Timeouts::default()
        })
        .build()
        .expect("valid coordinator");
    let mutex = ds.rw_mutex(["m"]).expect("valid name");

    cluster.drop_replies(1.0, true, &[0]).expect("valid node");
    let guard = tokio::time::timeout(Duration::from_secs(5), mutex.try_lock())
        .await
        .expect("in time")
        .expect("nodes 1 and 2 grant");
    let uid = guard.uid().to_owned();
    // Node 0's call fails at its deadline (`Timeouts::acquire`, 1 s), well
    // before the first refresh.
    tokio::time::sleep(Duration::from_secs(2)).await;
    cluster.drop_replies(0.0, true, &[0]).expect("valid node");
    assert!(
        holding(&cluster, &uid)[0],
        "node 0 applied the lock whose reply was lost"
    );

    cluster.set_refuse(true, &[0]).expect("valid node");
    let unlocked = tokio::time::timeout(Duration::from_secs(5), guard.unlock())
        .await
        .expect("in time");
    // Node 0's unlock failed and is queued; node 0 answers again at once.
    cluster.set_refuse(false, &[0]).expect("valid node");
    tokio::time::sleep(Duration::from_secs(10)).await;
    let finished = ds.finish_releases(Duration::from_secs(5)).await;
    let left = holding(&cluster, &uid);
    eprintln!("unlock {unlocked:?}; finish_releases {finished:?}; holding {left:?}");
    assert!(
        !left[0],
        "node 0 answers again within milliseconds of refusing the unlock, yet ten seconds later \
         it still holds the entry (finish_releases {finished:?}): the drain task panicked on \
         `Duration::MAX * 2 + 100 ms` and dropped the unlock it had taken"
    );
}
