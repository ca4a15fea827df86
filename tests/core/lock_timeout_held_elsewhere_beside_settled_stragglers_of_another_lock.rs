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

use quorum_lock::{Error, WaitReason};

use crate::a_wait_for_a_held_lock::wait_beside_stragglers_of_a_read;

const SEED: u64 = 4_223;

#[tokio::test(start_paused = true)]
async fn lock_timeout_held_elsewhere_beside_settled_stragglers_of_another_lock() {
    let (queued, status, result) = wait_beside_stragglers_of_a_read(SEED, false).await;
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
