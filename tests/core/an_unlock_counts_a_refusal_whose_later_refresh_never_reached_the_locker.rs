//! Reproduces a past break: a refresh that a locker refused at connection (so never reached it) turned that locker's refusal of the grant into a maybe-held entry, and an unlock freed by a quorum was reported unconfirmed.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::election_support::client;
use quorum_lock::testing::TestCluster;
use quorum_lock::{LockArgs, NetLocker};
use tokio::time::sleep;

const SEED: u64 = 47;

/// Three lockers; node 2 holds a leftover of "x", so `try_lock` is granted
/// by nodes 0 and 1 and refused by node 2. Node 2 then refuses every
/// connection: the holder's refreshes to it fail at once, before reaching
/// it, and nodes 0 and 1 confirm them. The holder's link to node 1 is cut
/// and it unlocks: node 0 frees the entry and node 2 never held it, so at
/// most node 1 (one locker, below the write quorum of two) keeps it.
/// docs/guarantees.md counts a locker that refused the grant as released
/// unless it "was refreshed since with an answer other than 'not held'";
/// a refused connection is no answer from the locker, and the refresh
/// cannot have re-created anything there. The unlock is reported
/// `ReleaseUnconfirmed { confirmed: 1 }`.
#[tokio::test(start_paused = true)]
async fn an_unlock_freed_by_a_quorum_is_confirmed() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let leftover = LockArgs {
        uid: "leftover".into(),
        resources: vec!["x".to_string()].into(),
        owner: "gone".into(),
        source: "test".into(),
        quorum: 2,
    };
    assert!(NetLocker::lock(&*cluster.lockers()[2], &leftover)
        .await
        .unwrap());
    let a = client(&cluster, "a");
    let guard = a
        .rw_mutex(["x"])
        .unwrap()
        .try_lock()
        .await
        .expect("nodes 0 and 1 grant");
    let uid = guard.uid().to_owned();
    cluster.set_refuse(true, &[2]).unwrap();
    // A refresh round or two: node 2 refuses their connections.
    sleep(Duration::from_secs(25)).await;
    assert!(!guard.is_lost());
    assert!(
        !crate::common::holds(&cluster.lockers()[2], &uid),
        "node 2 never held it"
    );
    cluster.partition("a", &[1]).unwrap();
    let unlocked = guard.unlock().await;
    let left: Vec<bool> = crate::common::holding(cluster.lockers(), &uid);
    eprintln!("unlock: {unlocked:?}; nodes holding the uid after it: {left:?}");
    assert_eq!(left, [false, true, false]);
    assert!(
        unlocked.is_ok(),
        "node 0 freed the entry and node 2 never held it, yet the unlock answered {unlocked:?}"
    );
}
