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

use quorum_lock::Error;

use crate::a_campaign_with_a_deadline::{a_plain_wait, BesideLateLockers};

const SEED: u64 = 7_397;

#[tokio::test(start_paused = true)]
async fn campaign_timeout_with_the_term_refused_for_quarantine_beside_a_locker_down() {
    let (scene, campaign) = BesideLateLockers::new(
        SEED,
        Duration::from_millis(200),
        Duration::from_millis(1_500),
    );
    scene.until(190).await;
    scene.cluster.crash(&[2]).unwrap();
    scene.cluster.restart(&[1]).unwrap();
    let result = scene.gave_up(campaign).await;

    // The same lockers, asked by a plain wait with a deadline.
    let waited = a_plain_wait(&scene.h, Duration::from_millis(1_000)).await;

    assert!(
        matches!(waited, Err(Error::Quarantined { .. })),
        "the state this test means: one answering, one in quarantine, one down: {waited:?}"
    );
    assert!(
        matches!(result, Err(Error::Quarantined { .. })),
        "node 0 answers the term draw, node 1 refuses it for quarantine, node 2 is down: {result:?}"
    );
}
