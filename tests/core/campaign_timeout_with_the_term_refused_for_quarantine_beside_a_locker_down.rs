//! Reproduces a past break: a campaign whose lock was granted and whose term draw a locker in quarantine refused, beside one locker down and one answering, gave up with `QuorumUnavailable` (the draw's error, naming the quarantined locker as unreachable), where `waiting()` and every wait say `Quarantined` with the time left.
//!
//! docs/guarantees.md ("Why a wait waits"): `Error::Quarantined` "when
//! lockers in quarantine after a restart are what keeps a quorum from
//! granting"; a semaphore's `acquire_timeout` and an election's
//! `campaign_timeout` report the latest step's error, and "a step refused
//! for quarantine is the exception ... the operation then gives up with
//! what its lockers say at that moment, as `waiting()` says it". The
//! rustdoc of `campaign_timeout`: "with `Error::Quarantined` or
//! `Error::QuorumUnavailable` when the lockers could not grant (see
//! `DRWMutex::lock_timeout`)". A fencing draw that lockers in quarantine
//! refuse fails with `QuorumUnavailable` whatever kept it from a quorum,
//! and the campaign hands that on.
//!
//! Three lockers; nodes 0 and 1 answer 200 ms late, node 2 at once. The
//! campaign (deadline 1500 ms) is granted at 200 ms by nodes 2 and 0; at
//! 190 ms node 2 crashed and node 1 restarted (its quarantine lasts the
//! default validity), so every term draw from then on gets a token from
//! node 0, a refusal for quarantine from node 1 and nothing from node 2:
//! one answering, one in quarantine, one down, with a quorum of two.
//! A plain lock wait in that state gives up with `Quarantined`.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Dsync, Error};
use tokio::time::{sleep, Instant};

const SEED: u64 = 7_397;

#[tokio::test(start_paused = true)]
async fn campaign_timeout_with_the_term_refused_for_quarantine_beside_a_locker_down() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let h = Dsync::builder(cluster.net_lockers())
        .owner("h")
        .rng_seed(SEED)
        .build()
        .unwrap();
    let start = Instant::now();
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(200)), &[0, 1])
        .unwrap();
    let election = h.election("e").unwrap();
    let campaign = tokio::spawn(async move {
        election
            .campaign_timeout(b"v".to_vec(), Duration::from_millis(1_500))
            .await
            .map(|_leadership| ())
    });
    sleep(Duration::from_millis(190).saturating_sub(start.elapsed())).await;
    cluster.crash(&[2]).unwrap();
    cluster.restart(&[1]).unwrap();
    let result = tokio::time::timeout(Duration::from_secs(5), campaign)
        .await
        .expect("the campaign ends at its deadline")
        .unwrap();
    eprintln!("campaign gave up at {:?} with: {result:?}", start.elapsed());

    // The same lockers, asked by a plain wait with a deadline.
    let waiter = h.rw_mutex(["other"]).unwrap();
    let waited = tokio::time::timeout(
        Duration::from_secs(5),
        waiter.lock_timeout(Duration::from_millis(1_000)),
    )
    .await
    .expect("the wait ends at its deadline")
    .map(|_guard| ());
    eprintln!("a lock wait in the same state gave up with: {waited:?}");

    assert!(
        matches!(waited, Err(Error::Quarantined { .. })),
        "the state this test means: one answering, one in quarantine, one down: {waited:?}"
    );
    assert!(
        matches!(result, Err(Error::Quarantined { .. })),
        "node 0 answers the term draw, node 1 refuses it for quarantine, node 2 is down: {result:?}"
    );
}
