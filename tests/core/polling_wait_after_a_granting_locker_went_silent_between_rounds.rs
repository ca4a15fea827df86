//! Why a polling wait waits, and what `lock_timeout` gives up with, when a
//! locker that granted the wait's previous round (a round that failed and
//! gave its grant back) hangs on the current round.
//!
//! docs/guarantees.md ("Why a wait waits"): lockers "that have not
//! answered yet" are read from their latest failure, or count as still
//! answering for twice as long as their latest answer took "and as
//! unreachable after that"; `Error::QuorumUnavailable` "when too few
//! lockers answer". Here three lockers (a write quorum is 2), all answering
//! at once: in the first round lockers 0 and 2 refuse connections and
//! locker 1 grants; the round fails and releases that grant. Then locker 0
//! comes back, locker 1 hangs. In the second round locker 0 grants, locker
//! 2 still refuses, locker 1 never answers. Only one locker answers, so
//! the wait should say `NoQuorum` and give up with `QuorumUnavailable`;
//! the first round's grant, given back, must not count as a grant of the
//! current one ("granted by 2 of 3 lockers, waiting for the grant to be
//! confirmed", and `Error::Timeout`).
//!
//! Reproduces a past break: the given-back grant stood in, and the wait said granted and gave up with Timeout.
#![cfg(feature = "testing")]

use crate::common;
use std::time::Duration;

use quorum_lock::testing::TestCluster;
use quorum_lock::{Dsync, Error, RetryPolicy, Timeouts, WaitReason, Waiting};
use tokio::time::{sleep, Instant};

const SEED: u64 = 3607;

#[tokio::test(start_paused = true)]
async fn a_grant_given_back_by_the_previous_round_does_not_count_for_a_silent_locker() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let client = Dsync::builder(cluster.net_lockers())
        .owner("h")
        .rng_seed(SEED)
        .waiting(Waiting::Poll)
        .retry(RetryPolicy {
            initial: Duration::from_millis(400),
            max: Duration::from_millis(400),
        })
        .timeouts(Timeouts {
            acquire: Duration::from_secs(10),
            ..Timeouts::default()
        })
        .build()
        .expect("valid settings");
    cluster.set_refuse(true, &[0, 2]).unwrap();
    let start = Instant::now();
    let mutex = client.rw_mutex(["r"]).unwrap();
    let wait = common::spawn_lock_timeout(&mutex, Duration::from_millis(1500));
    sleep(Duration::from_millis(1)).await;
    let first = mutex.waiting().expect("the first round ran");
    eprintln!("first round: {first}");
    assert_eq!(
        first.granted, 1,
        "locker 1 granted the first round: {first}"
    );
    // Between the rounds: locker 0 answers again, locker 1 hangs.
    cluster.set_refuse(false, &[0]).unwrap();
    cluster.set_hang(true, &[1]).unwrap();
    sleep(Duration::from_millis(1300)).await;
    let status = mutex.waiting().expect("the wait runs");
    eprintln!("at {:?}: {status} ({status:?})", start.elapsed());
    let result = wait.await.unwrap();
    eprintln!("at {:?}: {result:?}", start.elapsed());
    assert_eq!(
        status.reason(),
        WaitReason::NoQuorum,
        "only locker 0 answers; locker 1 has hung since its grant was given back: {status}"
    );
    assert!(
        matches!(result, Err(Error::QuorumUnavailable { .. })),
        "only locker 0 answers, yet the wait gives up with {result:?}"
    );
}
