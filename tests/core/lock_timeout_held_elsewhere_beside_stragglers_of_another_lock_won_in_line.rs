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

use quorum_lock::{Error, WaitReason};

use crate::a_wait_for_a_held_lock::wait_beside_stragglers_of_a_read;

const SEED: u64 = 4_223;

#[tokio::test(start_paused = true)]
async fn lock_timeout_held_elsewhere_beside_stragglers_of_another_lock_won_in_line() {
    let (queued, status, result) = wait_beside_stragglers_of_a_read(SEED, true).await;
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
