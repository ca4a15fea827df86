//! The scene of the tests of how a semaphore's `acquire_timeout` gives up
//! (`semaphore_timeout_*`): a client of a `TestCluster`, its acquire of
//! the one-slot semaphore "pool" as a task of its own, the lockers'
//! quarantines, and how the acquire ended. Paused time.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Dsync, DsyncBuilder, Error, RetryPolicy, Semaphore, WriteGuard};
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

/// Four lockers, nodes 0, 1 and 3 answering after 10 ms and node-2 after
/// 100 ms, and the client "h" of `seed` retrying every 10 s: node 0
/// restarts; 59 s later the client's acquire (deadline `deadline`) starts;
/// 105 ms later, the line granted at 59.1 s (node-2's answer completes the
/// quorum of three) and the count and its check asked, nodes 1 and 2
/// restart. Returns the cluster, the client, the semaphore and its
/// acquire.
pub async fn acquire_as_nodes_restart(
    seed: u64,
    deadline: Duration,
) -> (TestCluster, Dsync, Semaphore, JoinHandle<Result<(), Error>>) {
    let cluster = TestCluster::new(4, seed);
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(10)), &[0, 1, 3])
        .unwrap();
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(100)), &[2])
        .unwrap();
    let client = retrying_every(&cluster, seed, Duration::from_secs(10))
        .build()
        .unwrap();
    cluster.lockers()[0].restart();
    tokio::time::sleep(Duration::from_millis(59_000)).await;
    let (semaphore, acquire) = spawn_acquire(&client, deadline);
    tokio::time::sleep(Duration::from_millis(105)).await;
    cluster.lockers()[1].restart();
    cluster.lockers()[2].restart();
    (cluster, client, semaphore, acquire)
}

/// Clients of three lockers in `cluster` whose choices are drawn from
/// `seed`: "other", which holds one of the flipped digits of 2 (a check of
/// a count-2 acquirer write-locks them: every check of "h" for "chk" with
/// 2 permits is refused while `left_behind` holds), and "h".
pub struct CheckHeldElsewhere {
    /// Kept for as long as the test runs.
    _other: Dsync,
    pub h: Dsync,
    pub left_behind: WriteGuard,
}

impl CheckHeldElsewhere {
    pub async fn new(cluster: &TestCluster, seed: u64) -> CheckHeldElsewhere {
        let other = crate::common::seeded(cluster.net_lockers(), "other", seed);
        let h = crate::common::seeded(cluster.net_lockers(), "h", seed);
        let left_behind = other
            .rw_mutex(["semaphore/chk/count-bit/0/1"])
            .unwrap()
            .lock()
            .await
            .unwrap();
        CheckHeldElsewhere {
            _other: other,
            h,
            left_behind,
        }
    }

    /// The semaphore "chk" of "h", with 2 permits.
    pub fn semaphore(&self) -> Semaphore {
        self.h.semaphore("chk", 2).unwrap()
    }
}

/// Three lockers of `seed` whose every answer takes 10 ms.
pub fn three_answering_in_10_ms(seed: u64) -> TestCluster {
    let cluster = TestCluster::new(3, seed);
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(10)), &[0, 1, 2])
        .unwrap();
    cluster
}
