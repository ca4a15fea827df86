//! Reproduces a past break: a wait that lockers queued read two of them as unreachable 100 ms after another lock's read round, which a quorum of the other lockers had already granted and returned, left its calls to them unanswered (their replies lost), and gave up with `QuorumUnavailable` on a lock held on three of four lockers.
//!
//! docs/guarantees.md ("Why a wait waits"): a locker counts as still
//! answering for twice its latest answer, and at least 100 ms, "counted
//! from the earliest call it has left unanswered ... (a call the client
//! stopped waiting for, such as a refresh or a fencing draw that a quorum
//! had already settled, is not one it left unanswered)". A `try_read` that
//! a read quorum granted and that returned is such a call: the client
//! stopped waiting for its stragglers (they run on in the background only
//! to undo a late grant). `Error::Timeout` is for a lock held elsewhere
//! when "a quorum answered or is still answering".
//!
//! Four lockers answering in 1 ms (write quorum 3, read quorum 2).
//! Another client holds "res" on nodes 0, 2 and 3 (node 1 was cut off
//! from it). At 200 ms the client waits for "res" with a deadline of
//! 300 ms: node 1 grants, nodes 0, 2 and 3 queue the wait at ~201 ms. At
//! 210 ms it takes and drops a read lock on "other": nodes 0 and 1 grant
//! it at once; the replies of nodes 2 and 3 to that round are lost, and
//! those calls run on in the background to their 1 s deadline. From
//! 310 ms on, `waiting()` reads nodes 2 and 3 as unreachable ("no answer
//! yet after 100ms"), and the wait gives up at 500 ms with
//! `QuorumUnavailable`, though all four answered it and nothing the wait
//! asks is unanswered.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Error, WaitReason};
use tokio::time::{sleep, Instant};

const SEED: u64 = 4_223;

#[tokio::test(start_paused = true)]
async fn lock_timeout_held_elsewhere_beside_settled_stragglers_of_another_lock() {
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
    let read = tokio::time::timeout(Duration::from_millis(50), other.try_read())
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
