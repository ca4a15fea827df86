//! Reproduces a past break: `Semaphore::acquire_timeout` against lockers in quarantine gives up with `Error::Quarantined` whose `left` is the time left when its latest one-round step was refused, seconds before the deadline (54.2s), not the time left at the deadline (52.1s) that `waiting()` reads at the same moment.
//!
//! The rustdoc of `Error::Quarantined::left`: "How long until enough of
//! them are out of quarantine for a quorum"; of `Error::Quarantined`: "Wait
//! and try again: `left` says how long until enough of them are out of
//! it". docs/guarantees.md ("Why a wait waits"): a wait that gives up
//! returns "`Error::Quarantined` (with the time left)". The rustdoc of
//! `Semaphore::waiting`: "its reason is the one `acquire_timeout` would
//! give up with then".
//!
//! Three in-process lockers, each call delayed 50 ms; retries back off up
//! to 3 s. An acquire of a semaphore of one permit with an 8 s deadline:
//! its place in line is granted at 50 ms, and at 60 ms the three lockers
//! restart (in quarantine for 60 s, so until 60.06 s) while the count's
//! calls are on their way. From then on every step is refused for
//! quarantine. At 7.999 s `waiting()` says "3 of 3 lockers are in
//! quarantine ..., for 52s more" (`quarantine_left()` 52.06 s); a
//! millisecond later the acquire gives up with `Quarantined { left: 54.16s
//! }`: the error kept from the step refused about 2 s earlier, before its
//! backoff, so the operator is told to wait two seconds longer than the
//! lockers said.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::a_semaphore_acquire::{acquire_ended, retrying_every, spawn_acquire};
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Error, WaitReason};
use tokio::time::sleep;

const SEED: u64 = 3;

#[tokio::test(start_paused = true)]
async fn acquire_timeout_in_quarantine_gives_the_time_left_at_the_deadline() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(50)), &[0, 1, 2])
        .unwrap();
    let client = retrying_every(&cluster, SEED, Duration::from_secs(3))
        .build()
        .unwrap();
    let (semaphore, acquire) = spawn_acquire(&client, Duration::from_secs(8));
    sleep(Duration::from_millis(60)).await;
    cluster.restart(&[0, 1, 2]).unwrap();
    sleep(Duration::from_millis(7_939)).await;
    let status = semaphore.waiting().expect("the acquire waits");
    eprintln!(
        "waiting at 7.999s: {status}; quarantine_left() = {:?}",
        status.quarantine_left()
    );
    let result = acquire_ended(acquire).await;
    eprintln!("gave up at 8s with: {result:?}");
    assert_eq!(status.reason(), WaitReason::Quarantine, "{status}");
    let expected = status.quarantine_left().expect("the lockers said how long");
    match result {
        Err(Error::Quarantined {
            left: Some(left), ..
        }) => assert!(
            left <= expected,
            "at the deadline the quarantine has {expected:?} left (60.06s - 8s), \
             yet the error says {left:?}"
        ),
        other => panic!("expected Quarantined with the time left, got {other:?}"),
    }
}
