//! Reproduces a past break: a wait against lockers all in quarantine, on a multi-thread runtime, gave up with `Timeout` instead of `Quarantined` when the release of its own abandoned wait (spawned at the deadline) was answered before the error was read.
//!
//! `DRWMutex::lock_timeout`'s rustdoc: it gives up with
//! "[`Error::Quarantined`] when too many lockers were in quarantine after a
//! restart". At the deadline the wait in line is dropped (inside the
//! timeout) before `WaitWatch::gave_up` reads why; dropping it spawns the
//! release of every locker that failed, and a locker in quarantine answers
//! an unlock. When another worker runs that release first, each answer
//! makes the quarantine refusal count as over, every locker reads as
//! "still answering", and the error is `Timeout` (exit 75 on the command
//! line: `outcomes::a_wait_in_quarantine_says_so_with_the_time_left`
//! printed "3 of 3 lockers are in quarantine" and then "held elsewhere").
//!
//! This one is a race between two threads, so it cannot use paused time:
//! it tries up to `ATTEMPTS` fresh waits (each with its own seed, printed)
//! and fails at the first that does not give `Quarantined`. On a 2-core
//! machine about a third of the attempts lose the race.
#![cfg(feature = "testing")]

use std::time::{Duration, Instant};

use quorum_lock::testing::TestCluster;
use quorum_lock::{Dsync, Error};

const ATTEMPTS: u64 = 300;

#[test]
fn a_wait_in_quarantine_fails_with_quarantined_whatever_its_release_does_meanwhile() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let began = Instant::now();
    runtime.block_on(async {
        for seed in 0..ATTEMPTS {
            if began.elapsed() > Duration::from_secs(20) {
                break;
            }
            let cluster = TestCluster::new(3, seed);
            cluster.restart(&[0, 1, 2]).unwrap();
            let client = Dsync::builder(cluster.net_lockers())
                .owner("h")
                .rng_seed(seed)
                .build()
                .unwrap();
            let mutex = client.rw_mutex(["job"]).unwrap();
            let result = tokio::time::timeout(
                Duration::from_secs(5),
                mutex.lock_timeout(Duration::from_millis(3)),
            )
            .await
            .expect("the wait ends at its deadline")
            .map(|_guard| ());
            assert!(
                matches!(&result, Err(Error::Quarantined { .. })),
                "seed {seed} (attempt {}): every locker refuses with its quarantine error, \
                 yet the wait gave up with {result:?}",
                seed + 1
            );
        }
    });
}
