//! What `Election::campaign_timeout` says when its lock was forced open by
//! an operator after it was granted, a rival candidate took the lock and
//! leads, and the campaign's deadline came just after the term's draw
//! found the lock gone, before the campaign waited in line again.
//!
//! The rustdoc of `campaign_timeout`: it fails "with [`Error::Timeout`]
//! when another candidate led or waited ahead"; docs/guarantees.md ("Why
//! a wait waits"): `QuorumUnavailable` is for "too few lockers answer".
//! Every locker answered here, and another candidate leads.
//!
//! Timeline (100 ms on every locker, seeded backoff): granted at 100 ms;
//! forced open and the rival leads at 150 ms; the term's draw, sent at
//! 100 ms, finds the lock gone at 200 ms; the campaign waits in line again
//! at 204 ms. The deadline is at 202 ms.
//!
//! Reproduces a past break: it said QuorumUnavailable, counting 2 of 2 as answered.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Dsync, Error};
use tokio::time::sleep;

const SEED: u64 = 3661;

fn client(cluster: &TestCluster, owner: &str) -> Dsync {
    common::seeded(cluster.net_lockers(), owner, SEED)
}

#[tokio::test(start_paused = true)]
async fn campaign_timeout_after_a_rival_took_the_forced_lock_says_held_elsewhere() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let (a, b, admin) = (
        client(&cluster, "a"),
        client(&cluster, "b"),
        client(&cluster, "admin"),
    );
    let all = [0, 1, 2];
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(100)), &all)
        .unwrap();
    let election = a.election("e").unwrap();
    let campaign = tokio::spawn(async move {
        election
            .campaign_timeout(b"a".to_vec(), Duration::from_millis(202))
            .await
            .map(|_leadership| ())
    });
    sleep(Duration::from_millis(150)).await;
    // Forced open, and the rival takes the lock and leads at once.
    cluster.set_latency(Latency::None, &all).unwrap();
    assert_eq!(admin.force_unlock(["election/e"]).await.unwrap(), 3);
    let rival = b.election("e").unwrap();
    let lead = rival
        .campaign(b"b".to_vec())
        .await
        .expect("the rival leads");
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(100)), &all)
        .unwrap();
    let result = campaign.await.unwrap();
    eprintln!("result: {result:?}");
    let leader = rival.leader().await.expect("every locker answers");
    assert!(leader.is_some(), "the rival still leads");
    assert!(
        matches!(result, Err(Error::Timeout)),
        "another candidate leads and every locker answered, yet campaign_timeout says: {result:?}"
    );
    drop(lead);
}
