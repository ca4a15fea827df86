//! What `Semaphore::waiting` and `acquire_timeout` say while the slot is
//! asked for, after a first attempt at the count was refused by two of the
//! three lockers and the retry was granted by all three.
//!
//! docs/guarantees.md ("Why a wait waits"): of an operation's locks, "the
//! one that too few lockers can grant says why, [...] failing those, what
//! the latest lock that gave up saw (between two attempts at a semaphore's
//! count, say), then answers still coming"; the rustdoc of
//! `Semaphore::waiting`: "between two attempts at the count, what the last
//! attempt saw". Once the count's retry was granted by every locker, the
//! attempt that was refused is over: the lockers it found refusing have
//! answered since, and the acquire now only waits for the slot's answers.
//! Naming them as unreachable (and giving up with `QuorumUnavailable`)
//! blames lockers that answered.
//!
//! Timeline (100 ms on every locker; seeded backoff): the line is granted
//! at 100 ms; the count's first attempt, asked then, is refused by nodes 1
//! and 2; the retry is asked at 110 ms and granted by all three at 210 ms;
//! the slot is asked at 210 ms and granted at 310 ms.
//!
//! Reproduces a past break: the refused attempt's view stood after the retry was granted.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::{CallKind, Latency, TestCluster};
use quorum_lock::{Error, Semaphore};
use tokio::time::{sleep, Instant};

const SEED: u64 = 8817;

/// A semaphore of 2 on three lockers at 100 ms, an acquire of it started
/// with `timeout` (none: no deadline), and nodes 1 and 2 refusing the
/// count's first attempt. Returns the acquire and a watcher clone.
async fn refused_first_count(
    timeout: Option<Duration>,
) -> (
    TestCluster,
    Semaphore,
    tokio::task::JoinHandle<Result<(), Error>>,
) {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let h = common::seeded(cluster.net_lockers(), "h", SEED);
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(100)), &[0, 1, 2])
        .unwrap();
    let sem = h.semaphore("s", 2).unwrap();
    let watcher = sem.clone();
    let acquire = tokio::spawn(async move {
        let permit = match timeout {
            Some(timeout) => sem.acquire_timeout(timeout).await,
            None => sem.acquire().await,
        };
        permit.map(|_permit| ())
    });
    // The line's calls (sent at 0 ms) took their decision already; the
    // count's first attempt, sent when they answer, is refused.
    sleep(Duration::from_millis(50)).await;
    cluster.set_refuse(true, &[1, 2]).unwrap();
    for _ in 0..200 {
        sleep(Duration::from_millis(1)).await;
        if cluster.stats(CallKind::RLock).faulted >= 2 {
            break;
        }
    }
    assert_eq!(
        cluster.stats(CallKind::RLock).faulted,
        2,
        "the count's first attempt was refused by nodes 1 and 2"
    );
    cluster.set_refuse(false, &[1, 2]).unwrap();
    (cluster, watcher, acquire)
}

#[tokio::test(start_paused = true)]
async fn waiting_for_the_slot_does_not_name_lockers_that_granted_the_count_since() {
    let start = Instant::now();
    let (cluster, watcher, acquire) = refused_first_count(None).await;
    sleep(Duration::from_millis(260).saturating_sub(start.elapsed())).await;
    // The count's retry was answered by all three, none refused.
    let rlock = cluster.stats(CallKind::RLock);
    assert_eq!((rlock.seen, rlock.faulted), (6, 2), "{rlock:?}");
    assert!(!acquire.is_finished(), "the slot is still being asked for");
    let status = watcher.waiting().expect("the acquire waits for its slot");
    eprintln!("at {:?}: {status}", start.elapsed());
    let named: Vec<&str> = status
        .unreachable
        .iter()
        .map(|u| u.endpoint.as_str())
        .collect();
    for answered in ["node-1", "node-2"] {
        assert!(
            !named.contains(&answered),
            "{answered} granted the count 50 ms ago, yet is named unreachable: {status}"
        );
    }
    acquire.await.unwrap().expect("granted");
}

#[tokio::test(start_paused = true)]
async fn acquire_timeout_while_the_slot_is_asked_does_not_blame_lockers_that_granted_the_count() {
    let (cluster, _watcher, acquire) = refused_first_count(Some(Duration::from_millis(260))).await;
    let result = acquire.await.unwrap();
    eprintln!("result: {result:?}");
    let rlock = cluster.stats(CallKind::RLock);
    assert_eq!((rlock.seen, rlock.faulted), (6, 2), "{rlock:?}");
    if let Err(Error::QuorumUnavailable { unreachable, .. }) = &result {
        let named: Vec<&str> = unreachable.iter().map(|u| u.endpoint.as_str()).collect();
        for answered in ["node-1", "node-2"] {
            assert!(
                !named.contains(&answered),
                "{answered} granted the count 50 ms before the deadline, yet is named: {result:?}"
            );
        }
    }
    assert!(
        matches!(result, Err(Error::Timeout)),
        "the deadline came while every locker was answering the slot's round: {result:?}"
    );
}
