//! `Semaphore::acquire_timeout` on a full semaphore, given up while the
//! lockers that make a quorum without the one in quarantine are still
//! answering. Its rustdoc: "[`Error::Timeout`] when the permits (or the
//! line) were held elsewhere (or the lockers were still answering),
//! [`Error::Quarantined`] or [`Error::QuorumUnavailable`] when the lockers
//! could not grant". docs/guarantees.md: `Error::Quarantined` "when lockers
//! in quarantine after a restart are what keeps a quorum from granting".
//! Here the one permit is held by another owner on lockers 1 and 2, which
//! make a quorum of three by themselves and are still answering: the
//! quarantine of locker 0 keeps nothing from granting.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Dsync, Error};

const SEED: u64 = 8841;

fn client(cluster: &TestCluster, owner: &str) -> Dsync {
    common::seeded(cluster.net_lockers(), owner, SEED)
}

#[tokio::test(start_paused = true)]
async fn full_semaphore_with_answers_coming_beside_a_quarantined_locker_times_out() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let (h, o) = (client(&cluster, "h"), client(&cluster, "o"));
    let permit = o.semaphore("pool", 1).unwrap().acquire().await.unwrap();
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(300)), &[1, 2])
        .unwrap();
    // h hears lockers 1 and 2 take 300 ms.
    let warm = h.rw_mutex(["warm-up"]).unwrap();
    warm.lock().await.unwrap().unlock().await.unwrap();
    cluster.crash(&[0]).unwrap();
    cluster.restart(&[0]).unwrap();

    let result = h
        .semaphore("pool", 1)
        .unwrap()
        .acquire_timeout(Duration::from_millis(200))
        .await
        .map(drop);
    eprintln!("gave up with: {result:?}");
    assert!(matches!(result, Err(Error::Timeout)), "{result:?}");
    drop(permit);
}
