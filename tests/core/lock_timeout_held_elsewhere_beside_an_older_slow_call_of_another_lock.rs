//! Reproduces a past break: a wait queued a moment ago by lockers that answer in 1 ms read them as unreachable ("no answer yet after ...") because another lock's call, asked before they queued the wait, was still on its way (slow, or its reply lost), and gave up with `QuorumUnavailable` on a lock held elsewhere.
//!
//! docs/guarantees.md ("Why a wait waits"): the silence that outweighs
//! what a locker said of this round is that of "one that refused it or
//! gave it a place in line, and has since left a call unanswered that
//! long"; a locker that answered the round after the other call was asked
//! has not been silent since. (The rule for a refusal for quarantine says
//! the same outright: "a call asked before it ... is no news of a locker
//! that answered since".) `Error::Timeout` is for a lock held elsewhere
//! when "a quorum answered or is still answering".
//!
//! Three lockers answering in 1 ms (quorum 2). Another client holds
//! "res". At 10 ms the client sends a try_lock of "other" that nodes 1
//! and 2 answer only after 2 s (a slow link for that call), or whose
//! replies from them are lost (the call then waits for its 1 s deadline).
//! At 200 ms it
//! waits for "res" with a deadline of 300 ms: all three queue the wait at
//! 201 ms. At 300 ms `waiting()` says nodes 1 and 2 have given no answer
//! for ~290 ms, and the wait gives up with `QuorumUnavailable`.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Error, WaitReason};
use tokio::time::{sleep, Instant};

const SEED: u64 = 3_901;

#[tokio::test(start_paused = true)]
async fn lock_timeout_held_elsewhere_beside_an_older_slow_call_of_another_lock() {
    wait_beside(false).await;
}

#[tokio::test(start_paused = true)]
async fn lock_timeout_held_elsewhere_beside_an_older_call_of_another_lock_whose_reply_was_lost() {
    wait_beside(true).await;
}

/// `lost`: the replies to the other lock's call are lost rather than slow.
async fn wait_beside(lost: bool) {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let fast = Latency::Fixed(Duration::from_millis(1));
    cluster.set_latency(fast, &[0, 1, 2]).unwrap();
    let holder = common::seeded(cluster.net_lockers(), "holder", SEED);
    let h = common::seeded(cluster.net_lockers(), "h", SEED + 1);
    let start = Instant::now();
    let _held = holder.rw_mutex(["res"]).unwrap().lock().await.unwrap();
    // The client's lockers have answered it before (in 1 ms).
    let _ = h
        .rw_mutex(["warm"])
        .unwrap()
        .lock()
        .await
        .unwrap()
        .unlock()
        .await;
    sleep(Duration::from_millis(10).saturating_sub(start.elapsed())).await;
    if lost {
        cluster.drop_replies(1.0, false, &[1, 2]).unwrap();
    } else {
        cluster
            .set_latency(Latency::Fixed(Duration::from_millis(2_000)), &[1, 2])
            .unwrap();
    }
    let other = h.rw_mutex(["other"]).unwrap();
    let slow = tokio::spawn(async move { other.try_lock().await.map(|_g| ()) });
    sleep(Duration::from_millis(5)).await;
    cluster.heal(&[1, 2]).unwrap();
    cluster.set_latency(fast, &[1, 2]).unwrap();
    sleep(Duration::from_millis(200).saturating_sub(start.elapsed())).await;
    let mutex = h.rw_mutex(["res"]).unwrap();
    let waiter = mutex.clone();
    let wait = tokio::spawn(async move {
        waiter
            .lock_timeout(Duration::from_millis(300))
            .await
            .map(|_guard| ())
    });
    sleep(Duration::from_millis(205).saturating_sub(start.elapsed())).await;
    let queued = mutex.waiting();
    eprintln!(
        "at {:?}: {:?}",
        start.elapsed(),
        queued.as_ref().map(|s| s.to_string())
    );
    sleep(Duration::from_millis(300).saturating_sub(start.elapsed())).await;
    let status = mutex.waiting();
    eprintln!(
        "at {:?}: {:?}",
        start.elapsed(),
        status.as_ref().map(|s| s.to_string())
    );
    let result = tokio::time::timeout(Duration::from_secs(5), wait)
        .await
        .expect("the wait ends at its deadline")
        .unwrap();
    eprintln!("gave up at {:?} with: {result:?}", start.elapsed());
    let _ = tokio::time::timeout(Duration::from_secs(5), slow).await;
    assert_eq!(
        queued.map(|s| s.reason()),
        Some(WaitReason::HeldElsewhere),
        "all three queued the wait a moment ago"
    );
    assert_eq!(
        status.map(|s| s.reason()),
        Some(WaitReason::HeldElsewhere),
        "nodes 1 and 2 queued the wait 100 ms ago and nothing was asked of them since"
    );
    assert!(
        matches!(result, Err(Error::Timeout)),
        "the lock is held on every locker, all of which answered the wait: {result:?}"
    );
}
