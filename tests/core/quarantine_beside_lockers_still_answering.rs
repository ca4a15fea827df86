//! Why a wait waits when one locker is in quarantine and the others, enough
//! for a quorum by themselves, were asked a moment ago and are still
//! answering. docs/guarantees.md ("Why a wait waits"):
//!
//! > `Error::Quarantined` (with the time left) when lockers in quarantine
//! > after a restart are what keeps a quorum from granting; [...]
//! > `Error::Timeout` too when lockers enough for a quorum were asked a
//! > moment ago and have not all answered (`WaitReason::Answering`): the
//! > deadline came first, after a few round trips, and nothing is known
//! > against the lockers.
//!
//! and `Error::Quarantined`'s rustdoc: "Enough lockers are reachable, but
//! too few of them grant because some restarted recently". Here the two
//! lockers still answering make a quorum of three without the one in
//! quarantine, and the lock is free: the quarantine keeps nothing from
//! granting, the deadline simply came before the answers.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Error, WaitReason};
use tokio::time::sleep;

const SEED: u64 = 4412;

/// Three lockers (a write quorum is 2). Lockers 1 and 2 answer in 300 ms
/// (the client has heard them take that long), locker 0 restarted and is in
/// quarantine. A `lock_timeout` of 200 ms on a free lock: at 100 ms
/// `waiting()` and at the deadline the error should say the answers were
/// still coming (`Answering`, `Timeout`), not that quarantine is what keeps
/// the quorum from granting.
#[tokio::test(start_paused = true)]
async fn lock_timeout_with_a_quorum_still_answering_beside_a_quarantined_locker_says_timeout() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(300)), &[1, 2])
        .unwrap();
    let client = common::seeded(cluster.net_lockers(), "h", SEED);
    // The client learns how long lockers 1 and 2 take to answer.
    let warm = client.rw_mutex(["warm-up"]).unwrap();
    warm.lock().await.unwrap().unlock().await.unwrap();
    cluster.crash(&[0]).unwrap();
    cluster.restart(&[0]).unwrap();

    let mutex = client.rw_mutex(["free"]).unwrap();
    let waiter = mutex.clone();
    let wait = tokio::spawn(async move { waiter.lock_timeout(Duration::from_millis(200)).await });
    sleep(Duration::from_millis(100)).await;
    let status = mutex.waiting().expect("the wait runs");
    eprintln!("waiting at 100ms: {status} ({status:?})");
    let result = wait.await.unwrap();
    eprintln!("gave up with: {result:?}");
    assert_eq!(status.reason(), WaitReason::Answering, "{status}");
    assert!(matches!(result, Err(Error::Timeout)), "{result:?}");
}
