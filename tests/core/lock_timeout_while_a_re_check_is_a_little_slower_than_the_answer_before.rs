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

use quorum_lock::testing::Latency;
use quorum_lock::{Error, WaitReason};

use crate::a_wait_for_a_held_lock::{until, Scene};

const SEED: u64 = 4_107;

#[tokio::test(start_paused = true)]
async fn lock_timeout_while_a_re_check_is_a_little_slow_says_held_elsewhere() {
    let scene = Scene::new(3, SEED);
    let _held = scene.hold().await;
    let (mutex, wait) = scene.wait_now(Duration::from_millis(1_030));
    until(scene.start, 500).await;
    assert_eq!(
        mutex.waiting().map(|s| s.reason()),
        Some(WaitReason::HeldElsewhere)
    );
    scene
        .cluster
        .set_latency(Latency::Fixed(Duration::from_millis(60)), &[0, 1, 2])
        .unwrap();
    let status = scene.status_at(&mutex, 1_020).await;
    assert_eq!(
        status.map(|s| s.reason()),
        Some(WaitReason::HeldElsewhere),
        "a re-check on its way for ~20 ms is slow, not silent"
    );
    let result = scene.gave_up(wait).await;
    assert!(
        matches!(result, Err(Error::Timeout)),
        "the lock is held on every locker, which answer slowly: {result:?}"
    );
}
