//! `WaitStatus` has public fields, so a caller may edit a status it got
//! from `waiting()` (to drop lockers it does not care about, say) and
//! print it. Its `Display` and `reason()` must not panic on any such
//! value: a status whose `lockers` is below the number of lockers it
//! names as unreachable prints, and does not underflow.
//!
//! Reproduces a past break: `Display` panicked on a subtraction that overflowed.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::TestCluster;
use quorum_lock::WaitReason;
use tokio::time::sleep;

const SEED: u64 = 4410;

#[tokio::test(start_paused = true)]
async fn an_edited_wait_status_prints_without_panicking() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let h = common::seeded(cluster.net_lockers(), "h", SEED);
    let mutex = h.rw_mutex(["r"]).unwrap();
    cluster.crash(&[0, 1, 2]).unwrap();
    let waiter = mutex.clone();
    let wait = tokio::spawn(async move { waiter.lock().await.map(|_guard| ()) });
    sleep(Duration::from_secs(2)).await;
    let mut status = mutex.waiting().expect("the wait reports");
    assert_eq!(status.reason(), WaitReason::NoQuorum, "{status}");
    assert_eq!(status.unreachable.len(), 3, "{status}");
    // Keep only the lockers the caller runs itself: the first one.
    status.lockers = 1;
    status.quorum = 1;
    let text = std::panic::catch_unwind(|| status.to_string());
    assert!(
        text.is_ok(),
        "printing a status with 3 unreachable lockers of 1 panicked"
    );
    wait.abort();
}
