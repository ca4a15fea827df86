//! Why a wait waits when the client's refreshes of another lock were
//! confirmed by a quorum before a slow locker answered them.
//! docs/guarantees.md ("Why a wait waits"):
//!
//! > A locker that has not answered counts as still answering for twice as
//! > long as its latest answer took, counted from the first call it left
//! > unanswered
//!
//! > `Error::Timeout` too when lockers enough for a quorum were asked a
//! > moment ago and have not all answered (`WaitReason::Answering`)
//!
//! A refresh round stops as soon as a quorum confirmed and drops the calls
//! still on their way. The slow locker never "left them unanswered": the
//! client stopped listening. Reproduces a past break: the first dropped
//! refresh was kept as the start of the locker's silence, so every later
//! wait counted that locker as out of reach at once, however short ago it
//! asked it.
//!
//! Three lockers (a write quorum is 2): nodes 0 and 1 answer in 10 ms,
//! node 2 in 300 ms. The client holds lock "a", refreshed every 10 s.
//! Then node 0 refuses connections and the client waits for the free lock
//! "b" with a deadline of 150 ms: node 1 grants at once, node 2 was asked
//! 150 ms ago and its latest answer took 300 ms. The wait should say
//! `Answering` and give up with `Timeout`; it says node 2 is unreachable
//! and gives up with `QuorumUnavailable`.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Dsync, Error, WaitReason};
use tokio::time::sleep;

const SEED: u64 = 7301;

#[tokio::test(start_paused = true)]
async fn a_slow_locker_whose_refreshes_were_not_waited_for_counts_as_answering() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let client = Dsync::builder(cluster.net_lockers())
        .owner("c")
        .rng_seed(SEED)
        .build()
        .expect("valid settings");
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(10)), &[0, 1])
        .unwrap();
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(300)), &[2])
        .unwrap();

    // Held all along; its lock call to node 2 finishes in the background
    // (300 ms), so the client knows node 2 takes 300 ms.
    let held = client.rw_mutex(["a"]).unwrap().lock().await.unwrap();
    // A refresh or two: nodes 0 and 1 confirm in 10 ms, node 2's
    // confirmation is not waited for.
    sleep(Duration::from_secs(25)).await;
    assert!(!held.is_lost(), "lock a is still held");

    cluster.set_refuse(true, &[0]).unwrap();
    let mutex = client.rw_mutex(["b"]).unwrap();
    let waiter = mutex.clone();
    let wait = tokio::spawn(async move { waiter.lock_timeout(Duration::from_millis(150)).await });
    sleep(Duration::from_millis(100)).await;
    let status = mutex.waiting().expect("the wait runs");
    eprintln!("waiting at 100ms: {status} ({status:?})");
    let result = wait.await.unwrap();
    eprintln!("gave up with: {result:?}");

    assert!(
        status.answering.contains(&"node-2".to_string()),
        "node-2 was asked 100 ms ago and its latest answer took 300 ms, \
         yet it does not count as answering: {status:?}"
    );
    assert_eq!(status.reason(), WaitReason::Answering, "{status}");
    assert!(matches!(result, Err(Error::Timeout)), "{result:?}");
    drop(held);
}
