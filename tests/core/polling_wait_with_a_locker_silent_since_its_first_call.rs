//! Why a polling wait waits when one locker has not answered any call of
//! the wait for seconds. docs/guarantees.md ("Why a wait waits"):
//!
//! > A locker that has not answered its latest call counts as still
//! > answering for twice as long as its latest answer took, and as
//! > unreachable after that ("no answer yet after 300ms")
//!
//! > `Error::QuorumUnavailable`, naming each unreachable locker and why,
//! > when too few lockers answer;
//!
//! With `Waiting::Poll` every round asks each locker again, so a locker
//! frozen since the wait began (its first call of the wait, 2.5 s ago,
//! still unanswered; it took 300 ms before) is "asked a moment ago" again
//! at each round and counts as still answering for the whole wait. Here
//! three lockers (a write quorum is 2): locker 0 refuses connections,
//! locker 1 is frozen, locker 2 holds another owner's lock. Only one
//! locker answers, and one holding elsewhere is no more than a grant can
//! do without, so the wait should say `NoQuorum` and give up with
//! `QuorumUnavailable` naming locker 1; it says held elsewhere and gives
//! up with `Timeout`.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Dsync, Error, Timeouts, WaitReason, Waiting};
use tokio::time::sleep;

const SEED: u64 = 5530;
/// A deadline that lands soon after a round began (with this seed, rounds
/// are re-sent every few hundred ms); later ones may land past the
/// 600 ms window and say `QuorumUnavailable`.
const DEADLINE_MS: u64 = 2700;

#[tokio::test(start_paused = true)]
async fn polling_lock_timeout_with_a_locker_frozen_all_along_says_quorum_unavailable() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let owner = common::seeded(cluster.net_lockers(), "o", SEED);
    let client = Dsync::builder(cluster.net_lockers())
        .owner("h")
        .rng_seed(SEED)
        .waiting(Waiting::Poll)
        .timeouts(Timeouts {
            acquire: Duration::from_secs(10),
            ..Timeouts::default()
        })
        .build()
        .expect("valid settings");
    let held = owner.rw_mutex(["busy"]).unwrap().lock().await.unwrap();
    // The client hears locker 1 take 300 ms.
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(300)), &[1])
        .unwrap();
    let warm = client.rw_mutex(["warm-up"]).unwrap();
    warm.lock().await.unwrap().unlock().await.unwrap();
    cluster.set_hang(true, &[1]).unwrap();
    cluster.set_refuse(true, &[0]).unwrap();

    let mutex = client.rw_mutex(["busy"]).unwrap();
    let waiter = mutex.clone();
    let wait = tokio::spawn(async move {
        waiter
            .lock_timeout(Duration::from_millis(DEADLINE_MS))
            .await
    });
    sleep(Duration::from_millis(2500)).await;
    let status = mutex.waiting().expect("the wait runs");
    eprintln!("waiting at 2.5s: {status} ({status:?})");
    let result = wait.await.unwrap();
    eprintln!("gave up with: {result:?}");
    assert!(
        !status.answering.contains(&"node-1".to_string()),
        "node-1 has not answered for 2.5s, yet counts as answering: {status:?}"
    );
    assert_eq!(status.reason(), WaitReason::NoQuorum, "{status}");
    assert!(
        matches!(&result, Err(Error::QuorumUnavailable { unreachable, .. })
            if unreachable.iter().any(|u| u.endpoint == "node-1")),
        "{result:?}"
    );
    drop(held);
}
