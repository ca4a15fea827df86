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

use crate::common;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Error, WaitReason};
use tokio::time::{sleep, Instant};

const SEED: u64 = 4_211;

#[tokio::test(start_paused = true)]
async fn lock_timeout_held_elsewhere_as_an_older_lost_call_of_this_client_times_out() {
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
    cluster.drop_replies(1.0, false, &[1, 2]).unwrap();
    let admin = h.clone();
    let lost = tokio::spawn(async move { admin.force_unlock(["other"]).await });
    sleep(Duration::from_millis(5)).await;
    cluster.heal(&[1, 2]).unwrap();
    cluster.set_latency(fast, &[1, 2]).unwrap();
    sleep(Duration::from_millis(4_900).saturating_sub(start.elapsed())).await;
    let mutex = h.rw_mutex(["res"]).unwrap();
    let waiter = mutex.clone();
    let wait = tokio::spawn(async move {
        waiter
            .lock_timeout(Duration::from_millis(300))
            .await
            .map(|_guard| ())
    });
    sleep(Duration::from_millis(4_905).saturating_sub(start.elapsed())).await;
    let queued = mutex.waiting();
    eprintln!(
        "at {:?}: {:?}",
        start.elapsed(),
        queued.as_ref().map(|s| s.to_string())
    );
    sleep(Duration::from_millis(5_100).saturating_sub(start.elapsed())).await;
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
