//! Why a wait waits after calls that a quorum settled without waiting for
//! a slow locker: refresh rounds, which stop once a quorum confirmed, and
//! fencing draws, which return once a quorum answered. docs/guarantees.md
//! ("Why a wait waits"):
//!
//! > A locker that has not answered counts as still answering for twice as
//! > long as its latest answer took, counted from the first call it left
//! > unanswered (... a call the client stopped waiting for, such as a
//! > refresh or a fencing draw that a quorum had already settled, is not
//! > one it left unanswered)
//!
//! Three lockers (a write quorum is 2): nodes 0 and 1 answer in 10 ms,
//! node 2 in 300 ms. The client holds lock "a" and refreshes it or draws
//! its token. Then node 0 refuses connections and the client waits for
//! the free lock "b" with a deadline of 150 ms: node 1 grants at once,
//! node 2 was asked 150 ms ago and its latest answer took 300 ms, so the
//! wait says `Answering` and gives up with `Timeout`. Reproduces a past
//! break: the dropped call was kept as the start of node 2's silence, so
//! the wait named it unreachable and gave up with `QuorumUnavailable`.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Error, WaitReason, WriteGuard};
use tokio::time::sleep;

/// What the client does with lock "a" before the wait for "b".
enum Settled {
    /// Holds it for 25 s: a refresh or two, confirmed by nodes 0 and 1.
    Refreshes,
    /// Draws its fencing token from nodes 0 and 1.
    FencingDraw,
}

async fn wait_after(settled: Settled, seed: u64) {
    eprintln!("seed {seed}");
    let cluster = TestCluster::new(3, seed);
    let client = common::seeded(cluster.net_lockers(), "c", seed);
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(10)), &[0, 1])
        .unwrap();
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(300)), &[2])
        .unwrap();

    // Its lock call to node 2 finishes in the background (300 ms), so the
    // client knows node 2 takes 300 ms.
    let held: WriteGuard = client.rw_mutex(["a"]).unwrap().lock().await.unwrap();
    match settled {
        Settled::Refreshes => {
            sleep(Duration::from_secs(25)).await;
            assert!(!held.is_lost(), "lock a is still held");
        }
        Settled::FencingDraw => {
            sleep(Duration::from_secs(1)).await;
            let token = held.fencing_token().await.expect("a quorum draws a token");
            eprintln!("token {token}");
            sleep(Duration::from_secs(1)).await;
        }
    }

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

#[tokio::test(start_paused = true)]
async fn a_slow_locker_whose_refreshes_were_not_waited_for_counts_as_answering() {
    wait_after(Settled::Refreshes, 7301).await;
}

#[tokio::test(start_paused = true)]
async fn a_slow_locker_whose_fencing_answer_was_not_waited_for_counts_as_answering() {
    wait_after(Settled::FencingDraw, 7302).await;
}
