//! Reproduces a past break: a wait that lockers queued read two of them as unreachable 100 ms after another lock's `read()`, which a read quorum of the other lockers granted in line and which returned, left its calls to them unanswered (their replies lost), and gave up with `QuorumUnavailable` on a lock held on three of four lockers.
//!
//! docs/guarantees.md ("Why a wait waits"): a locker counts as still
//! answering for twice its latest answer, and at least 100 ms, "counted
//! from the earliest call it has left unanswered ... (a call the client
//! stopped waiting for, such as a refresh, a fencing draw, an acquire
//! round or a leader read that a quorum had already settled, is not one
//! it left unanswered ...)". The past break of
//! `lock_timeout_held_elsewhere_beside_settled_stragglers_of_another_lock`
//! was fixed for a polling round (`try_read`, `Round::decide` settles its
//! calls); a wait in line (`read()`, `WaitRound`) that a quorum granted
//! hands its calls still running to the background the same way, but
//! never settles them, so their silence still counts.
//!
//! The same scenario as that test, with `other.read()` instead of
//! `other.try_read()`: four lockers answering in 1 ms, another client
//! holds "res" on nodes 0, 2 and 3; the client waits for "res" with a
//! deadline of 300 ms (node 1 grants, the others queue it); at 210 ms it
//! takes and drops a read lock on "other" through `read()`, granted by
//! nodes 0 and 1 while the replies of nodes 2 and 3 are lost.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Error, WaitReason};
use tokio::time::{sleep, Instant};

const SEED: u64 = 4_223;

#[tokio::test(start_paused = true)]
async fn lock_timeout_held_elsewhere_beside_stragglers_of_another_lock_won_in_line() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(4, SEED);
    let fast = Latency::Fixed(Duration::from_millis(1));
    cluster.set_latency(fast, &[0, 1, 2, 3]).unwrap();
    let holder = common::seeded(cluster.net_lockers(), "holder", SEED);
    let h = common::seeded(cluster.net_lockers(), "h", SEED + 1);
    let start = Instant::now();
    cluster.partition("holder", &[1]).unwrap();
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
    sleep(Duration::from_millis(210).saturating_sub(start.elapsed())).await;
    cluster.drop_replies(1.0, false, &[2, 3]).unwrap();
    let other = h.rw_mutex(["other"]).unwrap();
    let read = tokio::time::timeout(Duration::from_millis(50), other.read())
        .await
        .expect("a read quorum answers in 1 ms");
    eprintln!(
        "at {:?}: try_read of \"other\": {:?}",
        start.elapsed(),
        read.as_ref().map(|_| "granted")
    );
    drop(read);
    sleep(Duration::from_millis(5)).await;
    cluster.heal(&[2, 3]).unwrap();
    cluster.set_latency(fast, &[2, 3]).unwrap();
    sleep(Duration::from_millis(400).saturating_sub(start.elapsed())).await;
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
    assert_eq!(
        queued.map(|s| s.reason()),
        Some(WaitReason::HeldElsewhere),
        "three of four queued the wait a moment ago"
    );
    assert_eq!(
        status.map(|s| s.reason()),
        Some(WaitReason::HeldElsewhere),
        "nodes 2 and 3 queued the wait; the only calls they left unanswered belong to a round that had settled and returned"
    );
    assert!(
        matches!(result, Err(Error::Timeout)),
        "the lock is held on three of four lockers, all of which answered the wait: {result:?}"
    );
}
