//! Reproduces a past break: a leader's `proclaim` counted toward its write quorum the store of a locker that had announced a validity shorter than the lease, and succeeded with the value on one locker of those it may count on.
//!
//! docs/guarantees.md, "Settings cannot panic": a server that announces a
//! shorter validity later "is not counted on: it counts as a locker that
//! is down". `Leadership::proclaim`: "Succeeds once a write quorum of
//! lockers stored it with the leader's entry ... with
//! [`Error::QuorumUnavailable`] when too few lockers answered".
//! docs/election.md: "A leader that still holds its lease has its
//! proclamation on a write quorum (it was stored there, and its entries
//! are alive there)". `proclaim_round` (src/election/calls.rs) counts every
//! locker that stored the value, whether or not it honours the lease (the
//! fencing draw's `ask` was fixed for the same thing).
//!
//! The scene: three lockers; x leads election "e" on all three. Locker 0
//! starts announcing a validity of 1 s (below the lease) and locker 2
//! hangs. x proclaims a new value: of the lockers it may count on, only
//! locker 1 can store it, yet the call succeeds.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common;
use crate::common::shrinking::Announcing;
use quorum_lock::testing::FaultyLocker;
use quorum_lock::{LocalLocker, NetLocker};

const SEED: u64 = 4403;

#[tokio::test(start_paused = true)]
async fn a_proclamation_does_not_count_the_store_of_a_locker_that_announced_a_shorter_validity() {
    eprintln!("seed {SEED}");
    let learned = Arc::new(AtomicBool::new(false));
    let node0 = Announcing::one_second_once("node-0", &learned);
    let node1 = Arc::new(LocalLocker::named("node-1"));
    let node2 = Arc::new(FaultyLocker::local(
        Arc::new(LocalLocker::named("node-2")),
        SEED,
    ));
    let x = common::seeded(
        vec![
            node0.clone() as Arc<dyn NetLocker>,
            node1.clone(),
            node2.clone(),
        ],
        "x",
        SEED,
    );
    let election = x.election("e").expect("a valid name");
    let mut leading = tokio::time::timeout(Duration::from_secs(5), election.campaign(&b"one"[..]))
        .await
        .expect("in time")
        .expect("x leads");

    learned.store(true, Ordering::SeqCst);
    assert_eq!(node0.validity(), Some(Duration::from_secs(1)));
    node2.set_hang(true);
    let proclaimed = tokio::time::timeout(Duration::from_secs(60), leading.proclaim(&b"two"[..]))
        .await
        .expect("the proclaim ends within its refresh timeout");
    eprintln!(
        "x's proclaim: {proclaimed:?}; is_lost {}",
        leading.is_lost()
    );
    assert!(
        proclaimed.is_err(),
        "of the lockers x may count on, only locker 1 could store the value (locker 0 announced \
         1 s, locker 2 hangs), yet the proclaim succeeded, counting locker 0's store toward its \
         write quorum"
    );
}
