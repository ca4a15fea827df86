//! What `Semaphore::acquire_timeout` says when it was granted and then two
//! of three lockers stopped answering the calls after the grant (the
//! line's release), while the third either answered them or refused
//! connections. docs/guarantees.md ("Why a wait waits"):
//!
//! > `Error::QuorumUnavailable`, naming each locker that did not answer and
//! > why, when too few lockers answer;
//!
//! > a lock granted and the calls after it unanswered (`QuorumUnavailable`,
//! > naming each locker that answered no call asked since the grant, ...)
//!
//! Reproduces two past breaks: with node 0 refusing, the error named node
//! 0 alone and said 2 of 3 answered with 2 needed, which contradicts
//! itself; with node 0 answering, it named all three and said none
//! answered.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::Error;
use tokio::time::sleep;

/// Runs `acquire_timeout(3 s)` on a semaphore of 2 over 3 lockers, nodes 1
/// and 2 100 ms away, node 0 refusing connections when `refusing`; crashes
/// nodes 1 and 2 once the acquire holds every lock it needs and only
/// confirms the line's release; returns what it gave up with, as
/// (answered, quorum, the lockers named).
async fn give_up_after_the_grant(refusing: bool, seed: u64) -> (usize, usize, Vec<String>) {
    eprintln!("seed {seed}");
    let cluster = TestCluster::new(3, seed);
    let h = common::seeded(cluster.net_lockers(), "h", seed);
    if refusing {
        cluster.set_refuse(true, &[0]).unwrap();
    }
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(100)), &[1, 2])
        .unwrap();
    let sem = h.semaphore("s", 2).unwrap();
    let watcher = sem.clone();
    let acquire = tokio::spawn(async move { sem.acquire_timeout(Duration::from_secs(3)).await });
    let mut seen_waiting = false;
    let mut granted = false;
    for _ in 0..1000 {
        sleep(Duration::from_millis(1)).await;
        match watcher.waiting() {
            Some(_) => seen_waiting = true,
            None if seen_waiting => {
                granted = true;
                break;
            }
            None => {}
        }
    }
    assert!(granted, "the acquire was never granted");
    // The line's release, in flight on nodes 1 and 2, is never answered
    // before the deadline (3 s; the unlock timeout is 5 s).
    cluster.crash(&[1, 2]).unwrap();
    let result = acquire.await.unwrap();
    eprintln!("result: {result:?}");
    let Err(Error::QuorumUnavailable {
        answered,
        quorum,
        unreachable,
        ..
    }) = result
    else {
        panic!("expected QuorumUnavailable, got {result:?}");
    };
    let named = unreachable.into_iter().map(|u| u.endpoint).collect();
    (answered, quorum, named)
}

#[tokio::test(start_paused = true)]
async fn acquire_timeout_after_the_grant_names_every_locker_that_did_not_answer() {
    let (answered, quorum, named) = give_up_after_the_grant(true, 7304).await;
    assert!(
        answered < quorum,
        "{answered} answered with {quorum} needed, named {named:?}"
    );
    for silent in ["node-0", "node-1", "node-2"] {
        assert!(
            named.iter().any(|n| n == silent),
            "{silent} answered nothing after the grant, yet is not named: {named:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn acquire_timeout_after_the_grant_does_not_name_a_locker_that_answered() {
    let (answered, _, named) = give_up_after_the_grant(false, 7305).await;
    assert!(
        !named.iter().any(|n| n == "node-0"),
        "node-0 answered the release, yet is named: {named:?}"
    );
    assert_eq!(answered, 1, "node-0 answered: {named:?}");
}
