//! Why `Semaphore::acquire_timeout` gives up, and what `waiting()` says,
//! when every locker dies (or restarts into quarantine) after the count
//! and its check were granted, while the first slot is asked for. Nothing
//! is held elsewhere: the semaphore is free.
//!
//! docs/guarantees.md ("Why a wait waits"): "`Error::Timeout` only when the
//! lock is held elsewhere [...] `Error::QuorumUnavailable`, naming each
//! unreachable locker and why, otherwise"; the rustdoc of
//! `acquire_timeout`: `Error::Timeout` "when the permits (or the line) were
//! held elsewhere"; the rustdoc of `WaitStatus::granted`: "Lockers that
//! granted this wait".
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Error, Semaphore, SemaphorePermit};
use tokio::task::JoinHandle;
use tokio::time::sleep;

use super::lost_locks_and_wait_outcomes::entries_on;
use crate::common;

const SEED: u64 = 3621;

/// h's acquire with `deadline` on a free semaphore of 2 permits, every
/// locker 100 ms away: the line is granted at 100 ms, the count and its
/// check at 200 ms, and the first slot's try is answered at 300 ms. At
/// 250 ms, with that try in flight, every locker dies.
async fn lockers_die_while_the_first_slot_is_asked_for(
    deadline: Duration,
) -> (
    TestCluster,
    Semaphore,
    JoinHandle<Result<SemaphorePermit, Error>>,
) {
    lockers_fail_while_the_first_slot_is_asked_for(deadline, |cluster| {
        cluster.crash(&[0, 1, 2]).unwrap()
    })
    .await
}

/// The same, with the lockers failed by `fail` at 250 ms.
async fn lockers_fail_while_the_first_slot_is_asked_for(
    deadline: Duration,
    fail: impl FnOnce(&TestCluster),
) -> (
    TestCluster,
    Semaphore,
    JoinHandle<Result<SemaphorePermit, Error>>,
) {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let h = common::seeded(cluster.net_lockers(), "h", SEED);
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(100)), &[0, 1, 2])
        .unwrap();
    let sem = h.semaphore("free", 2).unwrap();
    let acquiring = sem.clone();
    let acquire = tokio::spawn(async move { acquiring.acquire_timeout(deadline).await });
    sleep(Duration::from_millis(250)).await;
    assert_eq!(
        entries_on(&cluster, "semaphore/free/queue"),
        3,
        "h heads the line"
    );
    assert!(
        entries_on(&cluster, "semaphore/free/count-bit") > 0,
        "h has the count"
    );
    assert_eq!(
        entries_on(&cluster, "semaphore/free/permit"),
        0,
        "the slot's try has not landed yet"
    );
    fail(&cluster);
    (cluster, sem, acquire)
}

/// Fails: the slot's try is the first round of its lock, so the check's
/// round (granted by all three) stands in for the lockers it has not heard
/// from; at the deadline that reads "granted by 3 of 3 lockers, waiting
/// for the grant to be confirmed", which maps to `Error::Timeout`, while
/// every locker is dead and nothing is held elsewhere.
#[tokio::test(start_paused = true)]
async fn acquire_timeout_with_every_locker_dead_while_a_slot_is_asked_for_is_not_held_elsewhere() {
    let (_cluster, _sem, acquire) =
        lockers_die_while_the_first_slot_is_asked_for(Duration::from_millis(800)).await;
    let result = acquire.await.unwrap();
    eprintln!("result: {result:?}");
    assert!(
        matches!(result, Err(Error::QuorumUnavailable { .. })),
        "every locker died and nothing is held elsewhere, yet acquire_timeout says: {result:?}"
    );
}

/// Fails: the same, read from `waiting()` 300 ms after the lockers died:
/// it counts the check's grants as grants of the slot.
#[tokio::test(start_paused = true)]
async fn waiting_with_every_locker_dead_while_a_slot_is_asked_for_counts_no_grant() {
    let (_cluster, sem, acquire) =
        lockers_die_while_the_first_slot_is_asked_for(Duration::from_secs(5)).await;
    sleep(Duration::from_millis(300)).await;
    let status = sem.waiting().expect("the acquire waits for its slot");
    eprintln!("at 550 ms: {status} ({status:?})");
    assert_eq!(
        status.granted, 0,
        "no locker answered the slot's try, yet waiting() says: {status}"
    );
    acquire.abort();
}

/// Fails: the same with every locker restarted into its quarantine (60 s)
/// instead: the slot's try, sent to the previous incarnations, is never
/// answered, and at the deadline the check's grants stand in for it.
/// docs/guarantees.md: "`Error::Quarantined` (with the time left) when
/// lockers in quarantine after a restart are what keeps a quorum from
/// granting".
#[tokio::test(start_paused = true)]
async fn acquire_timeout_with_every_locker_restarted_while_a_slot_is_asked_for_is_not_held_elsewhere(
) {
    let (_cluster, _sem, acquire) =
        lockers_fail_while_the_first_slot_is_asked_for(Duration::from_millis(800), |cluster| {
            cluster.restart(&[0, 1, 2]).unwrap()
        })
        .await;
    let result = acquire.await.unwrap();
    eprintln!("result: {result:?}");
    assert!(
        matches!(
            result,
            Err(Error::Quarantined { .. } | Error::QuorumUnavailable { .. })
        ),
        "every locker restarted into quarantine and nothing is held elsewhere, yet \
         acquire_timeout says: {result:?}"
    );
}
