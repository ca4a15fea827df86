//! What `lock_timeout` gives up with when two of three lockers died while
//! another call of the client (a `try_lock` sent at 50 ms) was on its way
//! to them, 450 ms before the wait began.
//!
//! docs/guarantees.md ("Why a wait waits"): "A locker that has not
//! answered counts as still answering for twice as long as its latest
//! answer took, counted from the first call it left unanswered (a poll
//! that asks again does not restart it [...]), and as unreachable after
//! that". Nodes 1 and 2 answered in 100 ms and then left the call sent at
//! 50 ms unanswered: by the wait's deadline they have been silent for
//! 600 ms, three times twice their latest answer. They are dead; the wait
//! must not give up as if they were answering (`Error::Timeout`).
//!
//! Timeline (100 ms on every locker): a lock of the client is granted by
//! all three at 100 ms (asked at 0); a try_lock is sent at 50 ms; nodes 1
//! and 2 die at 120 ms; the wait begins at 500 ms with a deadline of
//! 150 ms; node 0 grants it at 600 ms.
//!
//! Reproduces a past break: the dead lockers counted as answering, and the wait said Timeout.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::Error;
use tokio::time::{sleep, Instant};

const SEED: u64 = 1877;

#[tokio::test(start_paused = true)]
async fn lock_timeout_with_lockers_silent_since_an_earlier_call_is_not_a_timeout() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let h = common::seeded(cluster.net_lockers(), "h", SEED);
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(100)), &[0, 1, 2])
        .unwrap();
    let start = Instant::now();
    let first = h.rw_mutex(["first"]).unwrap();
    let held = tokio::spawn(async move { first.lock().await });
    sleep(Duration::from_millis(50)).await;
    let second = h.rw_mutex(["second"]).unwrap();
    let tried = tokio::spawn(async move { second.try_lock().await.map(|_guard| ()) });
    sleep(Duration::from_millis(70)).await;
    let guard = held.await.unwrap().expect("granted by all three at 100 ms");
    cluster.crash(&[1, 2]).unwrap();
    sleep(Duration::from_millis(500).saturating_sub(start.elapsed())).await;
    assert!(
        !tried.is_finished(),
        "the try_lock still waits for nodes 1, 2"
    );
    let mutex = h.rw_mutex(["third"]).unwrap();
    let result = mutex
        .lock_timeout(Duration::from_millis(150))
        .await
        .map(|_guard| ());
    eprintln!("at {:?}: {result:?}", start.elapsed());
    assert!(
        !matches!(result, Err(Error::Timeout)),
        "nodes 1 and 2 have been silent for 600 ms after answering in 100 ms, \
         yet lock_timeout gives up as if they were answering: {result:?}"
    );
    drop(guard);
    tried.abort();
}
