//! Why a `lock_timeout` gives up when lockers enough to break the quorum
//! stopped answering long before the wait began, and the client knows it:
//! its latest calls to them failed with "no answer within 1s".
//! docs/guarantees.md ("Why a wait waits"):
//!
//! > `Error::Timeout` too when lockers enough for a quorum were asked a
//! > moment ago and have not all answered (`WaitReason::Answering`): the
//! > deadline came first, after a few round trips, and nothing is known
//! > against the lockers.
//!
//! > A locker that has not answered its latest call counts as still
//! > answering for twice as long as its latest answer took, and as
//! > unreachable after that
//!
//! Lockers 1 and 2 once answered in 300 ms, then froze. A `try_lock` 4 s
//! before the wait ran into their silence (it failed with
//! `QuorumUnavailable`, naming them). A wait of 500 ms then counts them as
//! "still answering" and gives up with `Timeout` ("it is held elsewhere")
//! on a free lock, though they have not answered anything for seconds,
//! far more than twice 300 ms, and what is known against them was just
//! reported by the same client.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Error, WaitReason};
use tokio::time::sleep;

const SEED: u64 = 9120;

async fn gone_lockers_after_a_failed_try_lock(freeze: impl Fn(&TestCluster)) {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(300)), &[1, 2])
        .unwrap();
    let client = common::seeded(cluster.net_lockers(), "h", SEED);
    let warm = client.rw_mutex(["warm-up"]).unwrap();
    warm.lock().await.unwrap().unlock().await.unwrap();
    freeze(&cluster);
    let probe = client.rw_mutex(["probe"]).unwrap().try_lock().await;
    eprintln!("try_lock while frozen: {probe:?}");
    assert!(
        matches!(probe, Err(Error::QuorumUnavailable { .. })),
        "{probe:?}"
    );
    sleep(Duration::from_secs(3)).await;

    let mutex = client.rw_mutex(["free"]).unwrap();
    let waiter = mutex.clone();
    let wait = tokio::spawn(async move { waiter.lock_timeout(Duration::from_millis(500)).await });
    sleep(Duration::from_millis(400)).await;
    let status = mutex.waiting().expect("the wait runs");
    eprintln!("waiting at 400ms: {status} ({status:?})");
    let result = wait.await.unwrap();
    eprintln!("gave up with: {result:?}");
    assert_ne!(status.reason(), WaitReason::Answering, "{status}");
    assert!(
        matches!(result, Err(Error::QuorumUnavailable { .. })),
        "{result:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn lock_timeout_after_lockers_hung_for_seconds_says_quorum_unavailable() {
    gone_lockers_after_a_failed_try_lock(|c| c.set_hang(true, &[1, 2]).unwrap()).await;
}

#[tokio::test(start_paused = true)]
async fn lock_timeout_after_lockers_crashed_for_seconds_says_quorum_unavailable() {
    gone_lockers_after_a_failed_try_lock(|c| c.crash(&[1, 2]).unwrap()).await;
}
