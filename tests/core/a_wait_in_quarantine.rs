//! The scene of the tests of a wait against lockers all in quarantine
//! (`lock_timeout_in_quarantine_*`, `lock_timeout_with_lockers_down_after_*`,
//! `polling_wait_with_every_locker_in_quarantine`): three lockers just
//! restarted, the client "h" waiting for "job", what its wait says and how
//! it ended. Paused time.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{DRWMutex, Dsync, DsyncBuilder, Error, WaitStatus};
use tokio::task::JoinHandle;

use crate::common;

/// Three lockers just restarted (in quarantine for the default 60 s),
/// answering in `latency`, when one is given.
pub fn restarted(seed: u64, latency: Option<Duration>) -> TestCluster {
    eprintln!("seed {seed}");
    let cluster = TestCluster::new(3, seed);
    cluster.restart(&[0, 1, 2]).unwrap();
    if let Some(latency) = latency {
        cluster
            .set_latency(Latency::Fixed(latency), &[0, 1, 2])
            .unwrap();
    }
    cluster
}

/// The client "h" of `cluster` (choices drawn from `seed`), to be built.
pub fn client_h(cluster: &TestCluster, seed: u64) -> DsyncBuilder {
    Dsync::builder(cluster.net_lockers())
        .owner("h")
        .rng_seed(seed)
}

/// The client's wait for "job" with `deadline`, as a task of its own; and
/// its mutex.
pub fn wait_for_job(
    client: &Dsync,
    deadline: Duration,
) -> (DRWMutex, JoinHandle<Result<(), Error>>) {
    let mutex = client.rw_mutex(["job"]).unwrap();
    let wait = common::spawn_lock_timeout(&mutex, deadline);
    (mutex, wait)
}

/// What the running wait on `mutex` says now, printed as seen `when`.
pub fn status_now(mutex: &DRWMutex, when: &str) -> WaitStatus {
    let status = mutex.waiting().expect("the wait runs");
    eprintln!("waiting at {when}: {status} ({status:?})");
    status
}

/// How the wait ended (at most 5 s from now), printed.
pub async fn ended(wait: JoinHandle<Result<(), Error>>) -> Result<(), Error> {
    let result = common::ended(wait).await;
    eprintln!("gave up with: {result:?}");
    result
}
