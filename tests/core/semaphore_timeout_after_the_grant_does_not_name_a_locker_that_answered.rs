//! What `Semaphore::acquire_timeout` says when it was granted and then two
//! of three lockers stopped answering the calls after the grant (the
//! line's release), while the third answered them. docs/guarantees.md
//! ("Why a wait waits"):
//!
//! > `Error::QuorumUnavailable`, naming each locker that did not answer and
//! > why, when too few lockers answer;
//!
//! Reproduces a past break: when no call failed since the grant, the
//! error named every locker as not having answered and counted none as
//! answered, including node 0, which answered the release at once.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Dsync, Error};
use tokio::time::sleep;

const SEED: u64 = 7305;

#[tokio::test(start_paused = true)]
async fn acquire_timeout_after_the_grant_does_not_name_a_locker_that_answered() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let h = Dsync::builder(cluster.net_lockers())
        .owner("h")
        .rng_seed(SEED)
        .build()
        .expect("valid settings");
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
    // Nodes 1 and 2 die: the line's release, in flight there, is never
    // answered before the deadline (3 s; the unlock timeout is 5 s).
    // Node 0 answered it at once.
    cluster.crash(&[1, 2]).unwrap();
    let result = acquire.await.unwrap();
    eprintln!("result: {result:?}");
    let Err(Error::QuorumUnavailable {
        answered,
        unreachable,
        ..
    }) = &result
    else {
        panic!("expected QuorumUnavailable, got {result:?}");
    };
    let named: Vec<&str> = unreachable.iter().map(|u| u.endpoint.as_str()).collect();
    assert!(
        !named.contains(&"node-0"),
        "node-0 answered the release, yet is named as not answering: {result:?}"
    );
    assert_eq!(*answered, 1, "node-0 answered: {result:?}");
}
