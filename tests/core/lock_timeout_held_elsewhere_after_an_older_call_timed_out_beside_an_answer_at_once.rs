//! Reproduces a past break: a call that timed out outweighed an answer the locker gave at once (on the first poll) to a call asked after it, so lockers that queued the wait and answered everything since read as unreachable and the wait gave up with `QuorumUnavailable` on a lock held elsewhere.
//!
//! docs/guarantees.md ("Why a wait waits"): "A call that timed out speaks
//! of the locker from when it was asked (it was silent from then): it
//! neither outweighs a failure seen since, such as a connection refused,
//! nor an answer to a call asked after it." The coordinator tells an
//! answer after a failure by the count of answers given at once, taken
//! when the failure is noted (when the call timed out), not when it was
//! asked; an answer at once between the two is counted as before the
//! failure. An answer that had to wait is compared by time, with the
//! asked time, and outweighs the timeout as the docs say: the two
//! variants below differ only in that.
//!
//! Three lockers (quorum 2); another client holds "res". At 0 ms the
//! client waits for "res" with a deadline of 900 ms: all three queue it.
//! At 10 ms nodes 1 and 2 hang and the client sends `force_unlock(["other"])`
//! (deadline 300 ms); its calls to them hang. At 20 ms they are healed and
//! answer a `try_lock` of "z" (at once, or in 1 ms). At 310 ms the
//! force-unlock calls time out. From then on, nothing of the client is on
//! its way to them and both answered a call asked after the lost one:
//! the wait waits for a lock held elsewhere on all three.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::a_wait_for_a_held_lock::{gave_up, spawn_force_unlock, status_at, until};
use crate::common;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Dsync, Error, Timeouts, WaitReason};
use tokio::time::{sleep, Instant};

const SEED: u64 = 7_311;

#[tokio::test(start_paused = true)]
async fn lock_timeout_held_elsewhere_after_an_older_call_timed_out_beside_an_answer_at_once() {
    wait_after_timeout(false).await;
}

#[tokio::test(start_paused = true)]
async fn lock_timeout_held_elsewhere_after_an_older_call_timed_out_beside_an_answer_that_waited() {
    wait_after_timeout(true).await;
}

/// `slow`: the later answer takes 1 ms (it is not given at once).
async fn wait_after_timeout(slow: bool) {
    eprintln!("seed {SEED} slow {slow}");
    let cluster = TestCluster::new(3, SEED);
    let holder = common::seeded(cluster.net_lockers(), "holder", SEED);
    let h = Dsync::builder(cluster.net_lockers())
        .owner("h")
        .rng_seed(SEED + 1)
        .timeouts(Timeouts {
            force_unlock: Duration::from_millis(300),
            ..Timeouts::default()
        })
        .build()
        .unwrap();
    let start = Instant::now();
    let _held = holder.rw_mutex(["res"]).unwrap().lock().await.unwrap();
    let mutex = h.rw_mutex(["res"]).unwrap();
    let wait = common::spawn_lock_timeout(&mutex, Duration::from_millis(900));
    sleep(Duration::from_millis(5)).await;
    let queued = mutex.waiting();
    until(start, 10).await;
    cluster.set_hang(true, &[1, 2]).unwrap();
    let lost = spawn_force_unlock(&h, "other");
    until(start, 20).await;
    cluster.heal(&[1, 2]).unwrap();
    if slow {
        cluster
            .set_latency(Latency::Fixed(Duration::from_millis(1)), &[1, 2])
            .unwrap();
    }
    let z = h.rw_mutex(["z"]).unwrap();
    let got = z.try_lock().await;
    eprintln!(
        "try_lock of \"z\" at {:?}: {:?}",
        start.elapsed(),
        got.is_ok()
    );
    drop(got);
    let status = status_at(&mutex, start, 400).await;
    let result = gave_up(wait, start).await;
    let lost = tokio::time::timeout(Duration::from_secs(5), lost).await;
    eprintln!("the force_unlock of \"other\": {lost:?}");
    assert_eq!(
        queued.map(|s| s.reason()),
        Some(WaitReason::HeldElsewhere),
        "all three queued the wait"
    );
    assert_eq!(
        status.map(|s| s.reason()),
        Some(WaitReason::HeldElsewhere),
        "nodes 1 and 2 answered a call asked after the one that timed out, and nothing is on its way to them"
    );
    assert!(
        matches!(result, Err(Error::Timeout)),
        "the lock is held on every locker, all of which queued the wait: {result:?}"
    );
}
