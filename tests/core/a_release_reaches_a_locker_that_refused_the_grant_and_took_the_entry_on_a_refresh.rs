//! Reproduces a past break: a release skipped (and counted as confirmed) a locker that refused the grant, though a refresh in its quarantine had re-created the entry there since.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::election_support::{client, leader_on};
use quorum_lock::testing::TestCluster;
use quorum_lock::{Error, LocalLocker, LockArgs, NetLocker};
use tokio::time::sleep;

const SEED: u64 = 38;

/// Leaves an entry of another owner's uid on `locker` alone, as a release
/// that did not reach it does.
async fn leftover(locker: &LocalLocker, resource: &str) {
    let args = LockArgs {
        uid: "leftover".into(),
        resources: vec![resource.to_string()].into(),
        owner: "gone".into(),
        source: "test".into(),
        quorum: 2,
    };
    assert!(
        NetLocker::lock(locker, &args).await.unwrap(),
        "the leftover is granted"
    );
}

/// Three lockers; node 2 holds a leftover entry of "x", so a `try_lock`
/// is granted by nodes 0 and 1 and refused by node 2. Node 2 restarts
/// (forgetting the leftover), and the holder's refreshes re-create its
/// entry there during the quarantine, as docs/guarantees.md says they do
/// ("A holder's refresh still re-creates its entry there if the resource
/// is free"). The holder unlocks, confirmed. docs/guarantees.md "No leaks
/// from cancellation or failure": an unlock "never leaves an entry behind
/// on a reachable locker". Node 2 answers every call, and still holds the
/// released uid: the release counted its refusal as a confirmation and
/// sent it no unlock.
#[tokio::test(start_paused = true)]
async fn an_unlock_leaves_no_entry_on_a_locker_that_refused_the_grant() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    leftover(&cluster.lockers()[2], "x").await;
    let a = client(&cluster, "a");
    let guard = a
        .rw_mutex(["x"])
        .unwrap()
        .try_lock()
        .await
        .expect("nodes 0 and 1 grant");
    let uid = guard.uid().to_owned();
    assert!(
        !crate::common::holds(&cluster.lockers()[2], &uid),
        "node 2 refused the grant"
    );

    cluster.restart(&[2]).unwrap();
    sleep(Duration::from_secs(45)).await;
    assert!(
        crate::common::holds(&cluster.lockers()[2], &uid),
        "a refresh re-created the entry on node 2"
    );
    guard.unlock().await.expect("the unlock is confirmed");
    sleep(Duration::from_secs(1)).await;
    let left: Vec<bool> = crate::common::holding(cluster.lockers(), &uid);
    eprintln!("after the confirmed unlock, nodes holding the uid: {left:?}");
    assert!(
        !left.iter().any(|h| *h),
        "a confirmed unlock left the released uid's entry on a reachable locker: {left:?}"
    );
}

/// The same with an election: node 2 holds a leftover of another
/// candidate, `try_campaign` wins on nodes 0 and 1, node 2 restarts and the
/// leader's refresh and re-sent value re-create its entry and value there.
/// Once node 2's quarantine is over, the leader's link to node 1 is cut and
/// it resigns: `Ok`, confirmed by node 0 alone and node 2's old refusal.
/// docs/election.md: "After a `resign()` that returned `Ok`, `leader()`
/// returns `None` or a newer leader: the resigned term is on fewer lockers
/// than a write quorum from then on". Nodes 1 and 2 still carry the term,
/// and `leader()` reports the resigned leader; no message came late and
/// no locker restarted after the resign.
#[tokio::test(start_paused = true)]
async fn leader_after_a_confirmed_resign_is_not_the_resigned_term() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    leftover(&cluster.lockers()[2], "election/jobs").await;
    let a = client(&cluster, "a");
    let w = client(&cluster, "watcher");
    let watch = w.election("jobs").unwrap();
    let mut leading = a
        .election("jobs")
        .unwrap()
        .try_campaign(&b"a"[..])
        .await
        .expect("nodes 0 and 1 grant");
    let term = leading.term();
    cluster.restart(&[2]).unwrap();
    // Past node 2's quarantine (60 s); the leader's refreshes re-created
    // its entry and value there, and the leftover is gone.
    sleep(Duration::from_secs(65)).await;
    assert!(!leading.is_lost());
    assert_eq!(
        leader_on(&*cluster.lockers()[2], "jobs")
            .await
            .map(|p| p.term),
        Some(term),
        "node 2 carries the term"
    );
    cluster.partition("a", &[1]).unwrap();
    leading.resign().await.expect("the resign is confirmed");
    sleep(Duration::from_secs(1)).await;
    let read = watch.leader().await;
    eprintln!("resigned term {term}; leader() after the confirmed resign: {read:?}");
    let uid_left: Vec<bool> = {
        let mut v = Vec::new();
        for l in cluster.lockers() {
            v.push(
                leader_on(&**l, "jobs")
                    .await
                    .is_some_and(|p| p.term == term),
            );
        }
        v
    };
    eprintln!("nodes carrying the resigned term: {uid_left:?}");
    assert!(
        matches!(read, Ok(None) | Err(Error::LeaderUnsettled { .. }))
            || matches!(&read, Ok(Some(l)) if l.term > term),
        "after a confirmed resign of term {term}, leader() answered {read:?} (nodes carrying it: \
         {uid_left:?})"
    );
}
