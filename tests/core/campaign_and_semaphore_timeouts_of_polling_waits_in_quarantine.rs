//! Reproduces a past break: with `Waiting::Poll`, `Semaphore::acquire_timeout` and `Election::campaign_timeout` against lockers all in quarantine (or two in quarantine and one down) gave up with `Timeout`, not `Quarantined`.
//!
//! `Semaphore::acquire_timeout` and `Election::campaign_timeout` promise
//! `Error::Quarantined` "when the lockers could not grant (see
//! `DRWMutex::lock_timeout`)", whose rustdoc gives "[`Error::Quarantined`]
//! when too many lockers were in quarantine after a restart". With a
//! polling coordinator every refused round is dropped and released; each
//! locker in quarantine answers that unlock, and the answer makes its
//! quarantine refusal count as over, so the give-up reads the lockers as
//! "still answering" and fails with `Timeout`. The same root cause as
//! `polling_wait_with_every_locker_in_quarantine`, through the recipes.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::TestCluster;
use quorum_lock::{Dsync, Error, Waiting};

const SEED: u64 = 5;

fn polling_client(cluster: &TestCluster) -> Dsync {
    Dsync::builder(cluster.net_lockers())
        .owner("h")
        .rng_seed(SEED)
        .waiting(Waiting::Poll)
        .build()
        .unwrap()
}

fn assert_quarantined(what: &str, result: Result<(), Error>, names: &[&str]) {
    eprintln!("{what} gave up with: {result:?}");
    match result {
        Err(Error::Quarantined { quarantined, .. }) => assert_eq!(quarantined, names, "{what}"),
        other => panic!("{what}: expected Error::Quarantined naming {names:?}, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_polling_semaphore_acquire_in_quarantine_fails_with_quarantined() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    cluster.restart(&[0, 1, 2]).unwrap();
    let semaphore = polling_client(&cluster).semaphore("pool", 2).unwrap();
    let result = tokio::time::timeout(
        Duration::from_secs(5),
        semaphore.acquire_timeout(Duration::from_secs(1)),
    )
    .await
    .expect("the acquire ends at its deadline")
    .map(|_permit| ());
    assert_quarantined("acquire_timeout", result, &["node-0", "node-1", "node-2"]);
}

#[tokio::test(start_paused = true)]
async fn a_polling_campaign_in_quarantine_fails_with_quarantined() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    cluster.restart(&[0, 1, 2]).unwrap();
    let election = polling_client(&cluster).election("leader").unwrap();
    let result = tokio::time::timeout(
        Duration::from_secs(5),
        election.campaign_timeout(b"me".to_vec(), Duration::from_secs(1)),
    )
    .await
    .expect("the campaign ends at its deadline")
    .map(|_leadership| ());
    assert_quarantined("campaign_timeout", result, &["node-0", "node-1", "node-2"]);
}

#[tokio::test(start_paused = true)]
async fn a_polling_lock_with_two_lockers_in_quarantine_and_one_down_fails_with_quarantined() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    cluster.restart(&[1, 2]).unwrap();
    cluster.crash(&[0]).unwrap();
    let mutex = polling_client(&cluster).rw_mutex(["job"]).unwrap();
    let result = tokio::time::timeout(
        Duration::from_secs(5),
        mutex.lock_timeout(Duration::from_secs(1)),
    )
    .await
    .expect("the wait ends at its deadline")
    .map(|_guard| ());
    assert_quarantined("lock_timeout", result, &["node-1", "node-2"]);
}
