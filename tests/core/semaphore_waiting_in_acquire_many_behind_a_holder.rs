//! What `Semaphore::waiting` says while `acquire_many` waits for slots
//! that another client holds, every locker up and 100 ms away.
//!
//! The rustdoc of `WaitStatus::granted`: "Lockers that granted this wait";
//! of `held_elsewhere`: "Lockers that refused it or queued it behind
//! another owner"; docs/guarantees.md ("Why a wait waits"): "A lock's first
//! round has heard from nobody yet: the operation's round before it, if of
//! the same mode, stands in, so that a deadline landing a moment after one
//! lock was granted and the next asked for does not call the lockers
//! unreachable" (it stands in for lockers not heard yet, not as a grant of
//! another lock).
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::Dsync;
use tokio::time::{sleep, Instant};

use super::lost_locks_and_wait_outcomes::entries_on;
use crate::common;

const SEED: u64 = 3681;

fn client(cluster: &TestCluster, owner: &str) -> Dsync {
    common::seeded(cluster.net_lockers(), owner, SEED)
}

/// Fails: the slot waits begin at 200 ms; the first one's round borrows
/// the count check's round (a write lock granted by all three), so until
/// the lockers answer at 300 ms `waiting()` reads "granted by 3 of 3
/// lockers, waiting for the grant to be confirmed", for slots that o holds
/// on every locker and that no locker ever granted h.
#[tokio::test(start_paused = true)]
async fn waiting_in_acquire_many_behind_a_holder_never_counts_a_slot_grant() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let (h, o) = (client(&cluster, "h"), client(&cluster, "o"));
    let _held = o
        .semaphore("many", 2)
        .unwrap()
        .acquire_many(2)
        .await
        .unwrap();
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(100)), &[0, 1, 2])
        .unwrap();
    let sem = h.semaphore("many", 2).unwrap();
    let acquiring = sem.clone();
    let start = Instant::now();
    let acquire = tokio::spawn(async move { acquiring.acquire_many(2).await });
    let mut wrong = Vec::new();
    for _ in 0..200 {
        sleep(Duration::from_millis(5)).await;
        if let Some(status) = sem.waiting()
            && status.granted > 0
            && entries_on(&cluster, "semaphore/many/permit") == 6
        {
            wrong.push((start.elapsed(), status.to_string()));
        }
    }
    assert_eq!(
        entries_on(&cluster, "semaphore/many/permit"),
        6,
        "o holds both slots on every locker"
    );
    assert!(!acquire.is_finished(), "h waits behind o");
    acquire.abort();
    assert!(
        wrong.is_empty(),
        "no locker granted h a slot, yet waiting() said so {} times, the first at {:?}: {:?}",
        wrong.len(),
        wrong.first().map(|w| w.0),
        wrong.first().map(|w| &w.1)
    );
}
