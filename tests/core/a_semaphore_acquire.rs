//! The scene of the tests of how a semaphore's `acquire_timeout` gives up
//! (`semaphore_timeout_*`): a client of a `TestCluster`, its acquire of
//! the one-slot semaphore "pool" as a task of its own, the lockers'
//! quarantines, and how the acquire ended. Paused time.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::TestCluster;
use quorum_lock::{Dsync, DsyncBuilder, Error, RetryPolicy, Semaphore};
use tokio::task::JoinHandle;

/// The client "h" of `cluster` (choices drawn from `seed`), whose retries
/// wait `retry` each, to be built.
pub fn retrying_every(cluster: &TestCluster, seed: u64, retry: Duration) -> DsyncBuilder {
    Dsync::builder(cluster.net_lockers())
        .owner("h")
        .rng_seed(seed)
        .retry(RetryPolicy {
            initial: retry,
            max: retry,
        })
}

/// The one-slot semaphore "pool" of `client`, and its
/// `acquire_timeout(deadline)` as a task of its own.
pub fn spawn_acquire(
    client: &Dsync,
    deadline: Duration,
) -> (Semaphore, JoinHandle<Result<(), Error>>) {
    let semaphore = client.semaphore("pool", 1).unwrap();
    let acquirer = semaphore.clone();
    let acquire =
        tokio::spawn(async move { acquirer.acquire_timeout(deadline).await.map(|_permit| ()) });
    (semaphore, acquire)
}

/// How the acquire ended, waited for at most 5 s.
pub async fn acquire_ended(acquire: JoinHandle<Result<(), Error>>) -> Result<(), Error> {
    tokio::time::timeout(Duration::from_secs(5), acquire)
        .await
        .expect("the acquire ends at its deadline")
        .unwrap()
}

/// The quarantine left of each locker of `cluster`.
pub fn quarantine_left(cluster: &TestCluster) -> Vec<Option<Duration>> {
    cluster
        .lockers()
        .iter()
        .map(|l| l.quarantine_left())
        .collect()
}
