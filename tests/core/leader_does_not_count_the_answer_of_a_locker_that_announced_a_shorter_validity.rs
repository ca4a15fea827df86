//! Reproduces a past break: `Election::leader` counted toward its write quorum of answers the answer of a locker that had announced a validity shorter than the lease, and reported a leader on the word of one locker of those it may count on.
//!
//! docs/guarantees.md, "Settings cannot panic": a server that announces a
//! shorter validity later "is not counted on: it counts as a locker that
//! is down". `Election::leader`: "Fails with [`Error::QuorumUnavailable`]
//! when fewer than a write quorum answered"; docs/election.md: it "reports
//! a leader only when a write quorum of the answers carries its term".
//! `read_round` (src/election/calls.rs) tallies every answer, whether or
//! not its locker honours the lease.
//!
//! The scene: three lockers; x leads election "e" on all three. Locker 0
//! starts announcing a validity of 1 s (below the lease) and locker 2
//! hangs. Another client asks who leads: only locker 1 of the lockers it
//! may count on answers, yet it is told x leads.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common;
use crate::common::shrinking::Announcing;
use quorum_lock::testing::FaultyLocker;
use quorum_lock::{LocalLocker, NetLocker};

const SEED: u64 = 4404;

#[tokio::test(start_paused = true)]
async fn leader_does_not_count_the_answer_of_a_locker_that_announced_a_shorter_validity() {
    eprintln!("seed {SEED}");
    let learned = Arc::new(AtomicBool::new(false));
    let node0 = Announcing::one_second_once("node-0", &learned);
    let node1 = Arc::new(LocalLocker::named("node-1"));
    let node2 = Arc::new(FaultyLocker::local(
        Arc::new(LocalLocker::named("node-2")),
        SEED,
    ));
    let lockers = vec![
        node0.clone() as Arc<dyn NetLocker>,
        node1.clone(),
        node2.clone(),
    ];
    let x = common::seeded(lockers.clone(), "x", SEED);
    // Built while locker 0 still announces nothing (a build refuses it after).
    let o = common::seeded(lockers, "o", SEED + 1);
    let _leading = tokio::time::timeout(
        Duration::from_secs(5),
        x.election("e").expect("a valid name").campaign(&b"one"[..]),
    )
    .await
    .expect("in time")
    .expect("x leads");

    learned.store(true, Ordering::SeqCst);
    assert_eq!(node0.validity(), Some(Duration::from_secs(1)));
    node2.set_hang(true);
    let read = tokio::time::timeout(
        Duration::from_secs(60),
        o.election("e").expect("a valid name").leader(),
    )
    .await
    .expect("the read ends within its timeout");
    eprintln!("o's leader(): {read:?}");
    assert!(
        read.is_err(),
        "of the lockers o may count on, only locker 1 answered (locker 0 announced 1 s, locker \
         2 hangs), yet leader() gave {read:?}, counting locker 0's answer toward its write \
         quorum"
    );
}
