//! Why `Semaphore::acquire_timeout` gives up, and what `waiting()` says,
//! a moment after the head of the line starts waiting on the slots, which
//! another client holds, with every locker up and one of them nearer than
//! the others.
//!
//! docs/guarantees.md ("Why a wait waits"): "`Error::Timeout` only when the
//! lock is held elsewhere [...] `Error::QuorumUnavailable`, naming each
//! unreachable locker and why, otherwise"; "A lock's first round has heard
//! from nobody yet: the operation's round before it, if of the same mode,
//! stands in, so that a deadline landing a moment after one lock was
//! granted and the next asked for does not call the lockers unreachable";
//! the rustdoc of `acquire_timeout`: `Error::Timeout` "when the permits (or
//! the line) were held elsewhere".
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Dsync, Error, Semaphore, SemaphorePermit, WaitReason};
use tokio::task::JoinHandle;
use tokio::time::sleep;

use super::lost_locks_and_wait_outcomes::entries_on;
use crate::common;

const SEED: u64 = 3623;

fn client(cluster: &TestCluster, owner: &str) -> Dsync {
    common::seeded(cluster.net_lockers(), owner, SEED)
}

/// o holds both permits of "full"; h acquires with `deadline`, locker 0
/// answering at once and lockers 1 and 2 100 ms away: line at 100 ms,
/// count and check at 200 ms, the slot's try refused by all three at
/// 300 ms; then h waits on both slots, locker 0 queueing it at once and
/// the other two at 400 ms.
async fn behind_a_holder_with_one_near_locker(
    deadline: Duration,
) -> (
    TestCluster,
    Vec<SemaphorePermit>,
    Semaphore,
    JoinHandle<Result<SemaphorePermit, Error>>,
) {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let (h, o) = (client(&cluster, "h"), client(&cluster, "o"));
    let theirs = o.semaphore("full", 2).unwrap();
    let held = vec![
        theirs.acquire().await.unwrap(),
        theirs.acquire().await.unwrap(),
    ];
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(100)), &[1, 2])
        .unwrap();
    let sem = h.semaphore("full", 2).unwrap();
    let acquiring = sem.clone();
    let acquire = tokio::spawn(async move { acquiring.acquire_timeout(deadline).await });
    (cluster, held, sem, acquire)
}

/// Fails: at 350 ms the slot waits have begun. One borrows the refused
/// try's answers (held elsewhere on all three); the other borrows that
/// wait's round, which only locker 0 has answered, and reads "only 1 of 3
/// lockers reachable", which wins over held elsewhere: `QuorumUnavailable`
/// naming lockers 1 and 2 ("no answer yet"), which answered h 50 ms before
/// and are up.
#[tokio::test(start_paused = true)]
async fn acquire_timeout_as_slot_waits_begin_behind_a_holder_says_timeout() {
    let (cluster, _held, _sem, acquire) =
        behind_a_holder_with_one_near_locker(Duration::from_millis(350)).await;
    let result = acquire.await.unwrap();
    eprintln!("result: {result:?}");
    assert!(
        entries_on(&cluster, "semaphore/full/permit") >= 6,
        "o still holds both slots"
    );
    assert!(
        matches!(result, Err(Error::Timeout)),
        "every locker is up and said the permits are held elsewhere, yet \
         acquire_timeout says: {result:?}"
    );
}

/// Fails: the same, read from `waiting()` at 350 ms.
#[tokio::test(start_paused = true)]
async fn waiting_as_slot_waits_begin_behind_a_holder_says_held_elsewhere() {
    let (_cluster, _held, sem, acquire) =
        behind_a_holder_with_one_near_locker(Duration::from_secs(5)).await;
    sleep(Duration::from_millis(350)).await;
    let status = sem.waiting().expect("the acquire waits for a slot");
    eprintln!("at 350 ms: {status}");
    assert_eq!(
        status.reason(),
        WaitReason::HeldElsewhere,
        "every locker is up and said the permits are held elsewhere, yet waiting() says: {status}"
    );
    acquire.abort();
}
