//! `DRWMutex::waiting` while one task waits for a held lock and another
//! task makes many `try_lock` calls through a clone of the same handle.
//! The rustdoc of `DRWMutex::waiting`:
//!
//! > `None` when no wait of this handle is running.
//! > [...] when several run at once through the same handle, the one that
//! > began last among those still running reports.
//!
//! An acquire registers itself as the latest wait of the handle before it
//! spends its cooperative budget (which yields once in a while, here after
//! a run of in-process `try_lock` calls) and before its first round.
//! Reproduces a past break: while it was parked there, `waiting()` read
//! the latest wait, found no round yet, and answered `None`, although the
//! older `lock()` still waited behind the holder.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::TestCluster;
use tokio::time::sleep;

const SEED: u64 = 7303;

#[tokio::test(start_paused = true)]
async fn waiting_reports_the_older_wait_while_a_try_lock_has_not_started_its_round() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let holder = common::seeded(cluster.net_lockers(), "h", SEED);
    let client = common::seeded(cluster.net_lockers(), "c", SEED);
    let held = holder.rw_mutex(["r"]).unwrap().lock().await.unwrap();

    let mutex = client.rw_mutex(["r"]).unwrap();
    let waiter = mutex.clone();
    let wait = tokio::spawn(async move { waiter.lock().await });
    sleep(Duration::from_millis(10)).await;
    assert!(
        mutex.waiting().is_some(),
        "the lock() waits behind the holder"
    );

    let trier = mutex.clone();
    let tries = tokio::spawn(async move {
        let mut refused = 0;
        for _ in 0..1000 {
            if trier.try_lock().await.is_err() {
                refused += 1;
            }
        }
        refused
    });
    let (mut polls, mut none_seen) = (0u32, 0u32);
    while !tries.is_finished() && polls < 100_000 {
        if mutex.waiting().is_none() {
            none_seen += 1;
        }
        polls += 1;
        tokio::task::yield_now().await;
    }
    let refused = tries.await.unwrap();
    eprintln!("{refused} try_lock refused; waiting() read {polls} times, None {none_seen} times");
    assert!(!wait.is_finished(), "the lock() still waits");
    assert_eq!(
        none_seen, 0,
        "waiting() said None {none_seen} times while lock() waited behind the holder"
    );
    drop(held);
    wait.await.unwrap().unwrap().unlock().await.unwrap();
}
