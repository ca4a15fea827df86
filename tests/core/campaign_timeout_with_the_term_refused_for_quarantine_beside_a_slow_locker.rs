//! Reproduces a past break: a campaign whose term draw a locker in quarantine refused, beside one locker refusing connections and one slow but answering, gave up with `QuorumUnavailable` (the draw stopped before the slow locker answered and counted it as not answering), where a wait in the same state says `Quarantined`.
//!
//! docs/guarantees.md ("Why a wait waits"): after a grant, "when lockers
//! that refused such a call for quarantine would make the quorum with
//! those that answered, the operation gives up with `Quarantined`, as a
//! wait does (so do a fencing draw and a proclamation that find them
//! so)"; a locker that has not answered "counts as still answering for
//! twice as long as its latest answer took".
//!
//! Three lockers, quorum two. Nodes 0 and 1 answer 1 s late, node 2 at
//! once. At 990 ms node 2 starts refusing connections and node 1
//! restarts (in quarantine for 60 s) and answers at once from then on.
//! The campaign (deadline 1.9 s) is granted at 1 s by nodes 2 and 0;
//! every term draw from then on is refused for quarantine by node 1,
//! fails on node 2 and waits on node 0, which answers in 1 s as it always
//! did. A lock wait in that state gives up with `Quarantined`.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::Latency;
use quorum_lock::Error;

use crate::a_campaign_with_a_deadline::{a_plain_wait, BesideLateLockers};

const SEED: u64 = 7_413;

#[tokio::test(start_paused = true)]
async fn campaign_timeout_with_the_term_refused_for_quarantine_beside_a_slow_locker() {
    let (scene, campaign) = BesideLateLockers::new(
        SEED,
        Duration::from_millis(1_000),
        Duration::from_millis(1_900),
    );
    scene.until(990).await;
    scene.cluster.set_refuse(true, &[2]).unwrap();
    scene.cluster.restart(&[1]).unwrap();
    scene.cluster.set_latency(Latency::None, &[1]).unwrap();
    let result = scene.gave_up(campaign).await;

    // The same lockers, asked by a plain wait with a deadline.
    let waited = a_plain_wait(&scene.h, Duration::from_millis(900)).await;

    assert!(
        matches!(waited, Err(Error::Quarantined { .. })),
        "the state this test means: one answering, one in quarantine, one refusing: {waited:?}"
    );
    assert!(
        matches!(result, Err(Error::Quarantined { .. })),
        "node 0 answers the term draw in its usual 1 s, node 1 refuses it for quarantine, \
         node 2 refuses connections: {result:?}"
    );
}
