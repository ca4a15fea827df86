//! Reproduces a past break: a wait queued by lockers that answer in 1 ms read them as unreachable once a call of the same client asked before they queued the wait (a force_unlock of another lock, its replies lost) timed out during the wait, and gave up with `QuorumUnavailable` on a lock held on every locker.
//!
//! docs/guarantees.md ("Why a wait waits"): a locker that queued the
//! wait counts as unreachable when, since, it "has left a call unanswered
//! that long ... or was found failing by a call of this client"; "Only
//! calls asked since the request it answered count: an older call of
//! another lock, slow or lost, is no news of a locker that answered a
//! later one." `Error::Timeout` is for a lock held elsewhere when "a
//! quorum answered or is still answering". The failure is judged by when
//! it was noted (`gone_since` compares `FailureNote::at`, the moment the
//! call timed out), not by when its call was asked.
//!
//! Three lockers answering in 1 ms (quorum 2). Another client holds
//! "res". At 10 ms the client sends `force_unlock(["other"])`, whose
//! replies from nodes 1 and 2 are lost: those calls wait for their 5 s
//! deadline and fail with `LockerTimeout` at ~5010 ms (nothing retries a
//! force-unlock). At 4900 ms the client waits for "res" with a deadline of
//! 300 ms: all three queue the wait at ~4901 ms, and the next re-check is
//! due only at ~5901 ms. From 5010 ms on, `waiting()` reads nodes 1 and 2
//! as unreachable ("no answer within 5.0s"), and the wait gives up at
//! 5200 ms with `QuorumUnavailable`.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::{Error, WaitReason};

use crate::a_wait_for_a_held_lock::Scene;

const SEED: u64 = 4_211;

#[tokio::test(start_paused = true)]
async fn lock_timeout_held_elsewhere_as_an_older_lost_call_of_this_client_times_out() {
    let scene = Scene::new(3, SEED);
    let _held = scene.hold_and_warm().await;
    let lost = scene.lose_a_force_unlock().await;
    let (mutex, wait) = scene.wait_at(4_900, Duration::from_millis(300)).await;
    let queued = scene.status_at(&mutex, 4_905).await;
    let status = scene.status_at(&mutex, 5_100).await;
    let result = scene.gave_up(wait).await;
    let lost = tokio::time::timeout(Duration::from_secs(5), lost).await;
    eprintln!("the force_unlock of \"other\": {lost:?}");
    assert_eq!(
        queued.map(|s| s.reason()),
        Some(WaitReason::HeldElsewhere),
        "all three queued the wait a moment ago"
    );
    assert_eq!(
        status.map(|s| s.reason()),
        Some(WaitReason::HeldElsewhere),
        "nodes 1 and 2 queued the wait ~200 ms ago; the only call that failed since was asked before"
    );
    assert!(
        matches!(result, Err(Error::Timeout)),
        "the lock is held on every locker, all of which answered the wait: {result:?}"
    );
}
