//! Reproduces a past break: `Semaphore::acquire_timeout` gives up with `Error::Quarantined`, kept from a step refused for quarantine seconds earlier, although the two lockers it names have refused every connection since and `waiting()` a millisecond before says "only 1 of 3 lockers reachable" (`NoQuorum`: `QuorumUnavailable`).
//!
//! The rustdoc of `Semaphore::waiting`: "While it waits for a lock, its
//! reason is the one `acquire_timeout` would give up with then".
//! docs/guarantees.md ("Why a wait waits"): a refusal for quarantine
//! "stands beside a later failure of another kind (a connection refused
//! for a moment): once that one is over, the locker is in quarantine
//! again", so while it is not over the locker is unreachable; and the
//! error is `Error::QuorumUnavailable`, "naming each locker that did not
//! answer and why, when too few lockers answer".
//!
//! Three in-process lockers, each call delayed 50 ms; the lease refreshes
//! every 500 ms; retries back off up to 10 s (seeded). An acquire of a
//! semaphore of one permit with an 8 s deadline: its place in line is
//! granted at 50 ms, and at 60 ms lockers 0 and 1 restart (in quarantine
//! for 60 s). With seed 7 the count step sent at 2.78 s is refused for
//! quarantine by both (`Quarantined`, 57 s left) and the next step is
//! more than 5 s of backoff away. At 3 s both lockers start refusing
//! connections: the line's refreshes fail against them with "connection
//! refused", and at 7.999 s `waiting()` says "only 1 of 3 lockers
//! reachable, 2 needed; unreachable: node-0: connection refused ...;
//! node-1: connection refused ...". At 8 s the acquire gives up with
//! `Quarantined { quarantined: [node-0, node-1], left: Some(52.06s) }`.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::a_semaphore_acquire::{acquire_ended, retrying_every, spawn_acquire};
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Error, Lease, WaitReason};
use tokio::time::{sleep, Instant};

const SEED: u64 = 7;

#[tokio::test(start_paused = true)]
async fn acquire_timeout_with_lockers_refusing_connections_after_a_quarantine_refusal() {
    let seed = SEED;
    eprintln!("seed {seed}");
    let cluster = TestCluster::new(3, seed);
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(50)), &[0, 1, 2])
        .unwrap();
    let client = retrying_every(&cluster, seed, Duration::from_secs(10))
        .lease(Lease {
            refresh_interval: Duration::from_millis(500),
            ..Lease::default()
        })
        .build()
        .unwrap();
    let start = Instant::now();
    let (semaphore, acquire) = spawn_acquire(&client, Duration::from_secs(8));
    sleep(Duration::from_millis(60)).await;
    cluster.restart(&[0, 1]).unwrap();
    tokio::time::sleep_until(start + Duration::from_secs(3)).await;
    let before = semaphore.waiting();
    eprintln!("at 3s: {:?}", before.as_ref().map(|s| s.to_string()));
    assert_eq!(
        before.map(|s| s.reason()),
        Some(WaitReason::Quarantine),
        "the set-up: at 3 s the acquire waits for the quarantine"
    );
    cluster.set_refuse(true, &[0, 1]).unwrap();
    let until = start + Duration::from_millis(7_999);
    tokio::time::sleep_until(until).await;
    let status = semaphore.waiting();
    eprintln!(
        "waiting at 7.999s: {:?}",
        status.as_ref().map(|s| (s.to_string(), s.reason()))
    );
    let result = acquire_ended(acquire).await;
    eprintln!("gave up at {:?} with: {result:?}", start.elapsed());
    let status = status.expect("the acquire waits");
    assert_eq!(status.reason(), WaitReason::NoQuorum, "{status}");
    assert!(
        matches!(result, Err(Error::QuorumUnavailable { .. })),
        "waiting() a millisecond before the deadline said {status}, yet acquire_timeout \
         gave up with {result:?}"
    );
}
