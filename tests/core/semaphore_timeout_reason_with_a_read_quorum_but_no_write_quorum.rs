//! Why `Semaphore::acquire_timeout` gives up, and what `waiting()` says,
//! when, at the head of the line,
//! the lockers that still answer are a read quorum but not a write quorum
//! (four lockers, two of them gone): the count's read lock is granted, its
//! check (a write lock) cannot be, so the lockers could not grant
//! (docs/semaphore.md). Reproduces a past break: the read's grant hid the
//! check's status, and the acquire said `Error::Timeout`.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::Error;
use tokio::time::sleep;

use super::lost_locks_and_wait_outcomes::entries_on;
use crate::common;

const SEED: u64 = 3601;

#[tokio::test(start_paused = true)]
async fn acquire_timeout_with_two_of_four_lockers_gone_at_the_head_of_the_line_says_the_lockers_could_not_grant(
) {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(4, SEED);
    let h = common::seeded(cluster.net_lockers(), "h", SEED);
    assert_eq!((h.read_quorum(), h.write_quorum()), (2, 3));
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(100)), &[0, 1, 2, 3])
        .unwrap();
    let sem = h.semaphore("reasons", 2).unwrap();
    let acquire = tokio::spawn(async move { sem.acquire_timeout(Duration::from_secs(3)).await });
    // The line is granted at 100 ms; the count is asked for from then on.
    sleep(Duration::from_millis(150)).await;
    assert_eq!(
        entries_on(&cluster, "semaphore/reasons/queue"),
        4,
        "at the head of the line"
    );
    // Nobody else uses the semaphore: no permit, no line, no count is held
    // by anyone else. Two of four lockers go: a write quorum (3) is out of
    // reach, a read quorum (2) is not.
    cluster.crash(&[2, 3]).unwrap();
    let result = acquire.await.unwrap();
    assert!(
        matches!(
            result,
            Err(Error::QuorumUnavailable { .. } | Error::Quarantined { .. })
        ),
        "nothing is held elsewhere and only 2 of 4 lockers answer (a write quorum is 3), \
         yet acquire_timeout says: {result:?}"
    );
}

/// The same acquire, without a deadline, asked every 50 ms why it waits:
/// the lockers cannot grant, also between two attempts at the count.
/// Reproduces a past break: `waiting()` said `None` in the backoff between
/// attempts and `HeldElsewhere` while the count's read was granted. Right
/// after the crash the silent lockers are only slow for two round trips.
#[tokio::test(start_paused = true)]
async fn waiting_with_two_of_four_lockers_gone_at_the_head_of_the_line_says_no_quorum() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(4, SEED);
    let h = common::seeded(cluster.net_lockers(), "h", SEED);
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(100)), &[0, 1, 2, 3])
        .unwrap();
    let sem = h.semaphore("why", 2).unwrap();
    let waiter = sem.clone();
    let acquire = tokio::spawn(async move { waiter.acquire().await });
    sleep(Duration::from_millis(150)).await;
    assert_eq!(
        entries_on(&cluster, "semaphore/why/queue"),
        4,
        "at the head of the line"
    );
    cluster.crash(&[2, 3]).unwrap();
    let mut seen = Vec::new();
    for _ in 0..40 {
        sleep(Duration::from_millis(50)).await;
        assert!(
            !acquire.is_finished(),
            "the acquire ended: only 2 of 4 lockers answer"
        );
        seen.push(sem.waiting().map(|status| status.reason()));
    }
    acquire.abort();
    // The count's calls went out at 100 ms, just before the crash; for
    // twice a round trip (200 ms) the silent lockers may only be slow
    // (`Answering`), and from then on they are gone.
    use quorum_lock::WaitReason::{Answering, NoQuorum};
    let wrong: Vec<_> = seen
        .iter()
        .enumerate()
        .filter(|(i, reason)| match reason {
            Some(NoQuorum) => false,
            Some(Answering) => *i >= 3,
            _ => true,
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "the acquire waits only because 2 of 4 lockers are gone, yet waiting() said, \
         every 50 ms for 2 s: {seen:?}"
    );
}
