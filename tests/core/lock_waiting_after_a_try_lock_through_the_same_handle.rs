//! What `DRWMutex::waiting()` says about a `lock()` that still waits after
//! a one-round `try_lock()` through the same handle began and ended beside
//! it. The rustdoc of `DRWMutex::waiting`: "`None` when no wait of this
//! handle is running. Waits (`lock`, `read` and their `_timeout` forms)
//! report here, and so do one-round `try_` calls while their round runs;
//! when several run at once through the same handle, the one that began
//! last reports."
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::TestCluster;
use quorum_lock::{Error, WaitReason};
use tokio::time::sleep;

const SEED: u64 = 4244;

#[tokio::test(start_paused = true)]
async fn waiting_still_says_why_a_lock_waits_after_a_try_lock_of_the_same_handle_ended() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let client = |owner: &str| common::seeded(cluster.net_lockers(), owner, SEED);
    let (other, h) = (client("other"), client("h"));
    let held = other.rw_mutex(["report"]).unwrap().lock().await.unwrap();
    let mutex = h.rw_mutex(["report"]).unwrap();
    let waiter = mutex.clone();
    let wait = tokio::spawn(async move { waiter.lock().await });
    sleep(Duration::from_millis(100)).await;
    assert_eq!(
        mutex.waiting().map(|s| s.reason()),
        Some(WaitReason::HeldElsewhere),
        "the lock() waits behind the holder"
    );
    // One try through the same handle, refused: it is not running any more.
    assert!(matches!(mutex.try_lock().await, Err(Error::WouldBlock)));
    sleep(Duration::from_millis(100)).await;
    assert!(!wait.is_finished(), "the lock() still waits");
    let after = mutex.waiting().map(|s| s.reason());
    wait.abort();
    drop(held);
    assert_eq!(
        after,
        Some(WaitReason::HeldElsewhere),
        "the lock() of this handle still waits behind the holder and the try_lock ended, \
         yet waiting() says {after:?}"
    );
}
