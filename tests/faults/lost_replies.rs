#![cfg(feature = "testing")]
//! A failed round whose lock calls were applied but whose replies were lost
//! leaves nothing behind once the lockers answer again.

use std::time::Duration;

use crate::harness::client;
use quorum_lock::testing::TestCluster;
use quorum_lock::Error;
use tokio::time::{sleep, Instant};

/// The reproducer from the review: n = 3, two nodes apply the lock but lose
/// the replies, then refuse every call for 0.6 s. Before the fix each of
/// them kept its entry until expiry (60 s) and a new client waited that long.
#[tokio::test(start_paused = true)]
async fn grants_with_lost_replies_are_undone_once_the_lockers_answer() {
    for seed in 0..20u64 {
        let cluster = TestCluster::new(3, seed);
        let ds = client(&cluster, "unlucky", seed);
        cluster.drop_replies(1.0, true, &[0, 1]).unwrap();
        let err = ds.rw_mutex(["r"]).unwrap().try_lock().await.unwrap_err();
        assert!(
            matches!(err, Error::QuorumUnavailable { .. }),
            "seed {seed}: {err:?}"
        );
        // Applied on nodes 0 and 1, with the replies lost.
        cluster.drop_replies(0.0, true, &[0, 1]).unwrap();
        cluster.set_refuse(true, &[0, 1]).unwrap();
        sleep(Duration::from_millis(600)).await;
        cluster.set_refuse(false, &[0, 1]).unwrap();

        // One backoff step (at most RetryPolicy::max, 1 s) after the
        // lockers answer again, the queued unlocks have landed.
        sleep(Duration::from_millis(1_100)).await;
        let left: Vec<_> = cluster
            .lockers()
            .iter()
            .map(|l| l.snapshot().len())
            .collect();
        assert_eq!(left, [0, 0, 0], "seed {seed}: entries left behind");

        let other = client(&cluster, "next", seed + 1000);
        let start = Instant::now();
        let guard = other
            .rw_mutex(["r"])
            .unwrap()
            .lock_timeout(Duration::from_secs(60))
            .await
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(
            start.elapsed(),
            Duration::ZERO,
            "seed {seed}: waited for a ghost"
        );
        guard.unlock().await.unwrap();
    }
}

/// However many rounds fail against a refusing locker, it sees one batch of
/// unlocks per backoff step, not one retry loop per round.
#[tokio::test(start_paused = true)]
async fn a_refusing_locker_is_not_stormed_with_unlocks() {
    let cluster = TestCluster::new(3, 5);
    let ds = client(&cluster, "busy", 5);
    // Node 0 applies and loses replies for 200 rounds, then refuses.
    cluster.drop_replies(1.0, true, &[0]).unwrap();
    cluster.set_refuse(true, &[1]).unwrap();
    let m = ds.rw_mutex(["r"]).unwrap();
    for _ in 0..200 {
        let _ = m.try_lock().await;
    }
    cluster.drop_replies(0.0, true, &[0]).unwrap();
    cluster.set_refuse(true, &[0]).unwrap();
    let before = cluster.nodes()[0].total_stats();
    sleep(Duration::from_secs(10)).await;
    let unlocks = cluster.nodes()[0].total_stats().seen - before.seen;
    // Each failed round's lock call ends in this window and gets its one
    // first unlock (200). After that the queue probes with one unlock per
    // backoff step (growing from 10 ms to at most 1 s) and sends the rest
    // only once a probe lands: a few dozen more calls, where one retry loop
    // per failed round would send about 200 per backoff step (thousands).
    assert!(unlocks <= 200 + 50, "{unlocks} unlock calls in 10 s");
    cluster.heal_all();
    sleep(Duration::from_millis(1_100)).await;
    assert_eq!(cluster.total_entries(), 0);
}
