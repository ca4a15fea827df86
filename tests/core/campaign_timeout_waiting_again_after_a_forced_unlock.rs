//! Why `Election::campaign_timeout` gives up when its lock was granted, an
//! operator forced it open before the term was drawn (so the campaign
//! waits in line again), and every locker died as that second wait began.
//! No other candidate exists.
//!
//! docs/guarantees.md ("Why a wait waits"): "`Error::Timeout` only when the
//! lock is held elsewhere [...] `Error::QuorumUnavailable`, naming each
//! unreachable locker and why, otherwise"; the rustdoc of
//! `campaign_timeout`: "with [`Error::Timeout`] when another candidate led
//! or waited ahead, and with [`Error::Quarantined`] or
//! [`Error::QuorumUnavailable`] when the lockers could not grant".
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Dsync, Error, WaitReason};
use tokio::time::{sleep, Instant};

use super::lost_locks_and_wait_outcomes::entries_on;
use crate::common;

const SEED: u64 = 3661;

fn client(cluster: &TestCluster, owner: &str) -> Dsync {
    common::seeded(cluster.net_lockers(), owner, SEED)
}

/// Fails: the second wait is the first round of a new lock of the
/// campaign, so the first lock's round (granted by all three 100 ms
/// before) stands in for the lockers it has not heard from: "granted by 3
/// of 3", which maps to `Error::Timeout`, while every locker is dead. The
/// election's own `waiting()` says at the same moment that no locker
/// answered.
#[tokio::test(start_paused = true)]
async fn campaign_timeout_waiting_again_after_a_forced_unlock_with_every_locker_dead_is_not_held_elsewhere(
) {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let (h, admin) = (client(&cluster, "h"), client(&cluster, "admin"));
    let all = [0, 1, 2];
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(100)), &all)
        .unwrap();
    let election = h.election("forced").unwrap();
    let watcher = election.clone();
    let start = Instant::now();
    let campaign = tokio::spawn(async move {
        election
            .campaign_timeout(b"a".to_vec(), Duration::from_millis(900))
            .await
    });
    // Granted at 100 ms; the term's call lands at 200 ms.
    sleep(Duration::from_millis(150)).await;
    assert_eq!(entries_on(&cluster, "election/forced"), 3, "granted");
    cluster.set_latency(Latency::None, &all).unwrap();
    assert_eq!(admin.force_unlock(["election/forced"]).await.unwrap(), 3);
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(100)), &all)
        .unwrap();
    // The term's call finds the lock gone; the campaign waits again.
    let mut again = false;
    for _ in 0..400 {
        sleep(Duration::from_millis(1)).await;
        if watcher.waiting().is_some() {
            again = true;
            break;
        }
    }
    assert!(again, "the campaign never waited in line again");
    eprintln!("waits again from {:?}", start.elapsed());
    cluster.crash(&all).unwrap();
    sleep(Duration::from_millis(200)).await;
    let own = watcher.waiting().expect("the campaign waits in line");
    eprintln!("{:?}: {own}", start.elapsed());
    assert_eq!(own.reason(), WaitReason::NoQuorum, "{own}");
    let result = campaign.await.unwrap();
    eprintln!("result: {result:?}");
    assert!(
        matches!(result, Err(Error::QuorumUnavailable { .. })),
        "every locker died and no other candidate exists, yet campaign_timeout says: {result:?}"
    );
}
