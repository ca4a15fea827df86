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

use quorum_lock::testing::Latency;
use quorum_lock::{Error, WaitReason};
use tokio::time::sleep;

use crate::a_wait_for_a_held_lock::{until, Scene};

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
    let scene = Scene::new(3, SEED);
    let cluster = &scene.cluster;
    let _held = scene.hold_and_warm().await;
    until(scene.start, 10).await;
    if lost {
        cluster.drop_replies(1.0, false, &[1, 2]).unwrap();
    } else {
        cluster
            .set_latency(Latency::Fixed(Duration::from_millis(2_000)), &[1, 2])
            .unwrap();
    }
    let other = scene.h.rw_mutex(["other"]).unwrap();
    let slow = tokio::spawn(async move { other.try_lock().await.map(|_g| ()) });
    sleep(Duration::from_millis(5)).await;
    scene.heal(&[1, 2]);
    let (mutex, wait) = scene.wait_at(200, Duration::from_millis(300)).await;
    let queued = scene.status_at(&mutex, 205).await;
    let status = scene.status_at(&mutex, 300).await;
    let result = scene.gave_up(wait).await;
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
