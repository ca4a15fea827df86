//! Reproduces a past break: a refresh applied on a locker that had refused the grant, whose reply was lost and whose call was dropped once a quorum confirmed, left that locker out of the release.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::election_support::{client, leader_on};
use quorum_lock::testing::TestCluster;
use quorum_lock::{Error, LocalLocker, LockArgs, NetLocker};
use tokio::time::sleep;

const SEED: u64 = 41;

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

/// Three lockers; node 2 holds a leftover of "x", so `try_lock` is granted
/// by nodes 0 and 1 and refused by node 2. Node 2 restarts and loses every
/// reply it sends (the calls are applied): the holder's refreshes re-create
/// the entry there in its quarantine, but no answer comes back, and each
/// refresh round ends on the confirmations of nodes 0 and 1 and drops the
/// call to node 2 still waiting. Node 2 then answers again and the holder
/// unlocks, confirmed. docs/guarantees.md "No leaks from cancellation or
/// failure": an unlock never leaves an entry behind on a reachable locker,
/// and a locker that refused the grant but "was refreshed since with an
/// answer other than 'not held'" is unlocked like a grant. A lost reply is
/// an answer other than "not held"; node 2 keeps the released uid.
#[tokio::test(start_paused = true)]
async fn an_unlock_leaves_no_entry_where_a_refresh_reply_was_lost() {
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
        "node 2 refused"
    );

    cluster.restart(&[2]).unwrap();
    cluster.drop_replies(1.0, true, &[2]).unwrap();
    sleep(Duration::from_secs(45)).await;
    assert!(!guard.is_lost());
    assert!(
        crate::common::holds(&cluster.lockers()[2], &uid),
        "a refresh re-created the entry on node 2"
    );
    cluster.drop_replies(0.0, true, &[2]).unwrap();
    guard.unlock().await.expect("the unlock is confirmed");
    sleep(Duration::from_secs(5)).await;
    let left: Vec<bool> = crate::common::holding(cluster.lockers(), &uid);
    eprintln!("after the confirmed unlock, nodes holding the uid: {left:?}");
    assert!(
        !left.iter().any(|h| *h),
        "a confirmed unlock left the released uid's entry on a reachable locker: {left:?}"
    );
}

/// The same with an election: node 2 holds a leftover of another
/// candidate, `try_campaign` wins on nodes 0 and 1, node 2 restarts and
/// loses its replies while the leader's refreshes and re-sent value
/// re-create the entry and the value there. Past the quarantine node 2
/// answers again, the leader's link to node 1 is cut and it resigns: `Ok`,
/// confirmed by node 0 and node 2's old refusal. docs/election.md: after a
/// `resign()` that returned `Ok`, `leader()` returns `None` or a newer
/// leader. Nodes 1 and 2 still carry the term, and `leader()` reports it.
#[tokio::test(start_paused = true)]
async fn leader_after_a_confirmed_resign_where_a_refresh_reply_was_lost() {
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
    cluster.drop_replies(1.0, true, &[2]).unwrap();
    sleep(Duration::from_secs(65)).await;
    assert!(!leading.is_lost());
    assert_eq!(
        leader_on(&*cluster.lockers()[2], "jobs")
            .await
            .map(|p| p.term),
        Some(term),
        "node 2 carries the term"
    );
    cluster.drop_replies(0.0, true, &[2]).unwrap();
    cluster.partition("a", &[1]).unwrap();
    leading.resign().await.expect("the resign is confirmed");
    sleep(Duration::from_secs(1)).await;
    let read = watch.leader().await;
    let mut carrying = Vec::new();
    for l in cluster.lockers() {
        carrying.push(
            leader_on(&**l, "jobs")
                .await
                .is_some_and(|p| p.term == term),
        );
    }
    eprintln!("resigned term {term}; leader() after the confirmed resign: {read:?}; nodes carrying it: {carrying:?}");
    assert!(
        matches!(read, Ok(None) | Err(Error::LeaderUnsettled { .. }))
            || matches!(&read, Ok(Some(l)) if l.term > term),
        "after a confirmed resign of term {term}, leader() answered {read:?} (nodes carrying it: \
         {carrying:?})"
    );
}
