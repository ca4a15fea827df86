//! The time left that `Error::Quarantined` (and `WaitStatus::quarantine_left`)
//! gives when a locker still answering is among the reachable ones.
//!
//! `WaitStatus::quarantine_left`'s rustdoc: "How long until enough lockers
//! are out of quarantine for a quorum of the reachable ones", and
//! `WaitStatus::answering`: lockers "asked a moment ago", which `reason()`
//! counts as reachable ("Those still answering may yet answer either
//! way: they count as reachable"). Five lockers (a write quorum is 3), the
//! lock free: locker 0 grants, locker 1 is asked a moment ago and still
//! answering, lockers 2 and 3 restarted 20 s apart (in quarantine for
//! about 40 s and 60 s more), locker 4 refuses connections. The reachable
//! ones (0 and 1) need one more locker for a quorum: the first quarantine
//! to end, about 40 s. The wait says the second, about 60 s.
//!
//! Reproduces a past break: the time left was the 60 s of the second quarantine, not the 40 s of the first.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Error, WaitReason};
use tokio::time::sleep;

const SEED: u64 = 7151;

#[tokio::test(start_paused = true)]
async fn the_quarantine_left_counts_a_locker_still_answering_as_reachable() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(5, SEED);
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(100)), &[0, 1, 2, 3, 4])
        .unwrap();
    let client = common::seeded(cluster.net_lockers(), "h", SEED);
    // The client hears every locker take 100 ms.
    let warm = client.rw_mutex(["warm-up"]).unwrap();
    warm.lock().await.unwrap().unlock().await.unwrap();
    cluster.restart(&[2]).unwrap();
    sleep(Duration::from_secs(20)).await;
    cluster.restart(&[3]).unwrap();
    cluster
        .set_latency(Latency::Fixed(Duration::from_secs(10)), &[1])
        .unwrap();
    cluster.set_refuse(true, &[4]).unwrap();

    let mutex = client.rw_mutex(["free"]).unwrap();
    let wait = common::spawn_lock_timeout(&mutex, Duration::from_millis(150));
    sleep(Duration::from_millis(140)).await;
    let status = mutex.waiting().expect("the wait runs");
    eprintln!("waiting at 140ms: {status} ({status:?})");
    let result = wait.await.unwrap();
    eprintln!("gave up with: {result:?}");
    assert_eq!(status.reason(), WaitReason::Quarantine, "{status}");
    assert_eq!(status.answering, ["node-1"], "{status}");
    let left = status
        .quarantine_left()
        .expect("both quarantines said how long");
    assert!(
        left < Duration::from_secs(45),
        "lockers 0 and 1 need one more for a quorum, which the quarantine of \
         locker 2 ends in about 40 s; the status says {left:?}: {status}"
    );
    match result {
        Err(Error::Quarantined {
            left: Some(left), ..
        }) => assert!(
            left < Duration::from_secs(45),
            "the give-up error says the quarantine lasts {left:?}, not about 40 s"
        ),
        other => panic!("expected Quarantined with the time left, got {other:?}"),
    }
}
