//! A wait whose deadline falls while a re-check is a little slower than
//! the answer before it (a busy machine) still says the lock is held
//! elsewhere.
//!
//! docs/guarantees.md ("Why a wait waits"): a locker "counts as still
//! answering for twice as long as its latest answer took, and at least
//! 100 ms". Twice an answer of 1 ms is 2 ms, which one slow scheduler tick
//! crosses; a lock held on every locker must not read as out of reach
//! then (`QuorumUnavailable`, exit code 69 in the CLI, instead of
//! `Timeout`, 75).
//!
//! Three lockers answer in 1 ms; another client holds the lock; the wait
//! (push, re-checked every second) is queued by all three at about 1 ms.
//! From 500 ms on, answers take 60 ms: the re-check sent at about 1 s is
//! still on its way at the deadline, 1.03 s, after some 30 ms.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Error, WaitReason};
use tokio::time::{sleep, Instant};

const SEED: u64 = 4_107;

#[tokio::test(start_paused = true)]
async fn lock_timeout_while_a_re_check_is_a_little_slow_says_held_elsewhere() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(1)), &[0, 1, 2])
        .unwrap();
    let holder = common::seeded(cluster.net_lockers(), "holder", SEED);
    let h = common::seeded(cluster.net_lockers(), "h", SEED + 1);
    let start = Instant::now();
    let _held = holder.rw_mutex(["res"]).unwrap().lock().await.unwrap();
    let mutex = h.rw_mutex(["res"]).unwrap();
    let waiter = mutex.clone();
    let wait = tokio::spawn(async move {
        waiter
            .lock_timeout(Duration::from_millis(1_030))
            .await
            .map(|_guard| ())
    });
    sleep(Duration::from_millis(500).saturating_sub(start.elapsed())).await;
    assert_eq!(
        mutex.waiting().map(|s| s.reason()),
        Some(WaitReason::HeldElsewhere)
    );
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(60)), &[0, 1, 2])
        .unwrap();
    sleep(Duration::from_millis(1_020).saturating_sub(start.elapsed())).await;
    let status = mutex.waiting();
    eprintln!(
        "at {:?}: {:?}",
        start.elapsed(),
        status.as_ref().map(|s| s.to_string())
    );
    assert_eq!(
        status.map(|s| s.reason()),
        Some(WaitReason::HeldElsewhere),
        "a re-check on its way for ~20 ms is slow, not silent"
    );
    let result = tokio::time::timeout(Duration::from_secs(5), wait)
        .await
        .expect("the wait ends at its deadline")
        .unwrap();
    eprintln!("gave up at {:?} with: {result:?}", start.elapsed());
    assert!(
        matches!(result, Err(Error::Timeout)),
        "the lock is held on every locker, which answer slowly: {result:?}"
    );
}
