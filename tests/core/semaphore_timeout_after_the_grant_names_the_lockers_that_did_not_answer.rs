//! What `Semaphore::acquire_timeout` says when it was granted with one
//! locker refusing connections, and the two others then stopped answering
//! the calls after the grant (the line's release). docs/guarantees.md
//! ("Why a wait waits"):
//!
//! > `Error::QuorumUnavailable`, naming each locker that did not answer and
//! > why, when too few lockers answer;
//!
//! > a lock granted and the calls after it unanswered
//! > (`QuorumUnavailable`), is never reported as held elsewhere.
//!
//! Node 0 refuses at once (a failure noted after the grant), nodes 1 and
//! 2 are silent. Reproduces a past break: the error named only the
//! lockers whose latest call failed since the grant (node 0 alone) and
//! said 2 of 3 answered with 2 needed, which contradicts itself and left
//! out the two lockers that did not answer.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Dsync, Error};
use tokio::time::sleep;

const SEED: u64 = 7304;

#[tokio::test(start_paused = true)]
async fn acquire_timeout_after_the_grant_names_every_locker_that_did_not_answer() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let h = Dsync::builder(cluster.net_lockers())
        .owner("h")
        .rng_seed(SEED)
        .build()
        .expect("valid settings");
    cluster.set_refuse(true, &[0]).unwrap();
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(100)), &[1, 2])
        .unwrap();
    let sem = h.semaphore("s", 2).unwrap();
    let watcher = sem.clone();
    let acquire = tokio::spawn(async move { sem.acquire_timeout(Duration::from_secs(3)).await });
    // Wait until the acquire holds every lock it needs and only confirms
    // the line's release.
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
    // Nodes 1 and 2 die: the line's release, in flight, is never answered
    // before the deadline (3 s; the unlock timeout is 5 s).
    cluster.crash(&[1, 2]).unwrap();
    let result = acquire.await.unwrap();
    eprintln!("result: {result:?}");
    let Err(Error::QuorumUnavailable {
        answered,
        quorum,
        unreachable,
        ..
    }) = &result
    else {
        panic!("expected QuorumUnavailable, got {result:?}");
    };
    assert!(
        answered < quorum,
        "QuorumUnavailable says {answered} answered with {quorum} needed: {result:?}"
    );
    let named: Vec<&str> = unreachable.iter().map(|u| u.endpoint.as_str()).collect();
    for silent in ["node-1", "node-2"] {
        assert!(
            named.contains(&silent),
            "{silent} did not answer after the grant, yet is not named: {result:?}"
        );
    }
}
