//! A release reaches a locker that refused the grant but took the entry
//! since, on a refresh during its quarantine after a restart, whether that
//! refresh's reply came back or was lost (the call dropped once a quorum
//! confirmed).
//!
//! docs/guarantees.md, "No leaks from cancellation or failure": an unlock
//! "never leaves an entry behind on a reachable locker", and a locker that
//! refused the grant but "was refreshed since with an answer other than
//! 'not held'" is unlocked like a grant (a lost reply is such an answer);
//! "A holder's refresh still re-creates its entry there if the resource
//! is free". docs/election.md: "After a `resign()` that returned `Ok`,
//! `leader()` returns `None` or a newer leader: the resigned term is on
//! fewer lockers than a write quorum from then on".
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::election_support::{client, leader_on};
use quorum_lock::testing::TestCluster;
use quorum_lock::{Error, LocalLocker, LockArgs, NetLocker};
use tokio::time::sleep;

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

/// Reproduces a past break: a release skipped (and counted as confirmed) a locker that refused the grant, though a refresh in its quarantine had re-created the entry there since.
#[tokio::test(start_paused = true)]
async fn an_unlock_leaves_no_entry_on_a_locker_that_refused_the_grant() {
    unlock_scene(38, Replies::Answered).await;
}

/// Reproduces a past break: a refresh applied on a locker that had refused the grant, whose reply was lost and whose call was dropped once a quorum confirmed, left that locker out of the release.
#[tokio::test(start_paused = true)]
async fn an_unlock_leaves_no_entry_where_a_refresh_reply_was_lost() {
    unlock_scene(41, Replies::Lost).await;
}

/// Reproduces a past break: a confirmed resign (node 0 and node 2's old refusal) left the term on nodes 1 and 2, where a refresh and the re-sent value had re-created it, and `leader()` reported the resigned leader.
#[tokio::test(start_paused = true)]
async fn leader_after_a_confirmed_resign_is_not_the_resigned_term() {
    resign_scene(38, Replies::Answered).await;
}

/// Reproduces a past break: the same resign where node 2's refresh replies were lost.
#[tokio::test(start_paused = true)]
async fn leader_after_a_confirmed_resign_where_a_refresh_reply_was_lost() {
    resign_scene(41, Replies::Lost).await;
}

/// Whether node 2's replies come back while it takes the entry.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Replies {
    Answered,
    /// Every reply it sends is lost (the calls are applied) until the
    /// release.
    Lost,
}

/// Three lockers; node 2 holds a leftover of "x", so `try_lock` is granted
/// by nodes 0 and 1 and refused by node 2. Node 2 restarts (forgetting the
/// leftover), and the holder's refreshes re-create the entry there in its
/// quarantine. The holder unlocks, confirmed; node 2, answering every
/// call, is to hold nothing of the released uid.
async fn unlock_scene(seed: u64, replies: Replies) {
    eprintln!("seed {seed}, node 2's replies {replies:?}");
    let cluster = TestCluster::new(3, seed);
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
    if replies == Replies::Lost {
        cluster.drop_replies(1.0, true, &[2]).unwrap();
    }
    sleep(Duration::from_secs(45)).await;
    assert!(!guard.is_lost());
    assert!(
        crate::common::holds(&cluster.lockers()[2], &uid),
        "a refresh re-created the entry on node 2"
    );
    cluster.drop_replies(0.0, true, &[2]).unwrap();
    guard.unlock().await.expect("the unlock is confirmed");
    sleep(Duration::from_secs(match replies {
        Replies::Answered => 1,
        Replies::Lost => 5,
    }))
    .await;
    let left: Vec<bool> = crate::common::holding(cluster.lockers(), &uid);
    eprintln!("after the confirmed unlock, nodes holding the uid: {left:?}");
    assert!(
        !left.iter().any(|h| *h),
        "a confirmed unlock left the released uid's entry on a reachable locker: {left:?}"
    );
}

/// The same with an election: node 2 holds a leftover of another
/// candidate, `try_campaign` wins on nodes 0 and 1, node 2 restarts and the
/// leader's refreshes and re-sent value re-create its entry and value
/// there. Past node 2's quarantine (60 s) the leader's link to node 1 is
/// cut and it resigns: `Ok`, confirmed by node 0 and node 2's old refusal
/// would leave the term on nodes 1 and 2, a write quorum, with no message
/// late and no locker restarted after the resign.
async fn resign_scene(seed: u64, replies: Replies) {
    eprintln!("seed {seed}, node 2's replies {replies:?}");
    let cluster = TestCluster::new(3, seed);
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
    if replies == Replies::Lost {
        cluster.drop_replies(1.0, true, &[2]).unwrap();
    }
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
    eprintln!(
        "resigned term {term}; leader() after the confirmed resign: {read:?}; nodes carrying \
         it: {carrying:?}"
    );
    assert!(
        matches!(read, Ok(None) | Err(Error::LeaderUnsettled { .. }))
            || matches!(&read, Ok(Some(l)) if l.term > term),
        "after a confirmed resign of term {term}, leader() answered {read:?} (nodes carrying it: \
         {carrying:?})"
    );
}
