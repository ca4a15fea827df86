//! Reproduces a past break: a guard's first fencing draw counted toward its quorum the token of a locker that had announced a validity shorter than the lease, and handed out a token for a lock that only one counted locker still held.
//!
//! docs/guarantees.md, "Settings cannot panic": "A server that announces a
//! shorter validity later ... is not counted on: it counts as a locker
//! that is down ... its refresh answers count as 'not held', so that it
//! and lockers that lost the entry together tell the holder of its loss."
//! `WriteGuard::fencing_token`: drawn "from a quorum of lockers", failing
//! "with `Error::LockLost` when the lock is lost" and with
//! `Error::QuorumUnavailable` "when too few lockers answered". A fencing
//! draw's `ask` (src/quorum/fence.rs) sends the fence call to every locker
//! and counts every token, whether or not the locker honours the lease.
//!
//! The scene: three lockers; x holds "res" on all three (lease 60 s).
//! Locker 0 starts announcing a validity of 1 s (it still keeps x's
//! entry); an operator forces "res" open on locker 1. Only locker 2, of
//! the lockers x may count on, holds the lock: a refresh now would tell x
//! of its loss. x's first `fencing_token()`, before that refresh, should
//! not be handed out; it is, on the tokens of lockers 0 and 2.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::args;
use crate::common::shrinking::{x_holding_res_beside, Announcing};
use quorum_lock::NetLocker;

const SEED: u64 = 4304;

#[tokio::test(start_paused = true)]
async fn a_fencing_draw_does_not_count_the_token_of_a_locker_that_announced_a_shorter_validity() {
    eprintln!("seed {SEED}");
    let learned = Arc::new(AtomicBool::new(false));
    let node0 = Announcing::one_second_once("node-0", &learned);
    let (_x, x_guard, node1, _node2) = x_holding_res_beside(node0.clone(), SEED).await;

    learned.store(true, Ordering::SeqCst);
    assert_eq!(node0.validity(), Some(Duration::from_secs(1)));
    assert!(node1
        .force_unlock(&args("", &["res"]))
        .await
        .expect("answers"));

    let token = tokio::time::timeout(Duration::from_secs(5), x_guard.fencing_token())
        .await
        .expect("in time");
    eprintln!(
        "x's first fencing_token: {token:?}; is_lost {}",
        x_guard.is_lost()
    );
    assert!(
        token.is_err(),
        "only locker 2 of the lockers x may count on holds res (locker 0 announced 1 s, \
         locker 1 was forced open), yet x's first draw handed out {token:?}, counting \
         locker 0's token toward its quorum"
    );
}
