//! Reproduces a past break: a campaign that gave up during its term draw, with a locker refusing the draw for quarantine beside one still answering and one down, said `Quarantined` with the time left read at the refusal, not counted to the moment it gave up.
//!
//! docs/guarantees.md ("Why a wait waits"): "The time left that
//! `Error::Quarantined` gives is counted to the moment the wait gave up";
//! the rustdoc of `Error::Quarantined`: `left` says "how long until enough
//! of them are out of quarantine for a quorum".
//!
//! Three lockers, quorum two. Nodes 0 and 1 answer 1 s late, node 2 at
//! once. At 990 ms node 2 crashes and node 1 restarts (in quarantine for
//! the default validity, 60 s, so until 60.99 s) and answers at once from
//! then on. The campaign is granted at 1 s by nodes 2 and 0; its term
//! draw is refused for quarantine by node 1 at once (60 s - 10 ms left),
//! fails on node 2, and waits on node 0, still answering, until the
//! campaign's deadline at 1.9 s. Then 59.09 s are left, not 59.99 s.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::Latency;
use quorum_lock::Error;

use crate::a_campaign_with_a_deadline::{campaign_ended, BesideLateLockers};

const SEED: u64 = 7_411;

#[tokio::test(start_paused = true)]
async fn campaign_timeout_in_quarantine_counts_the_time_left_to_when_it_gave_up() {
    let (scene, campaign) = BesideLateLockers::new(
        SEED,
        Duration::from_millis(1_000),
        Duration::from_millis(1_900),
    );
    let (cluster, start) = (&scene.cluster, scene.start);
    scene.until(990).await;
    cluster.crash(&[2]).unwrap();
    cluster.restart(&[1]).unwrap();
    let restarted = start.elapsed();
    cluster.set_latency(Latency::None, &[1]).unwrap();
    let result = campaign_ended(campaign, Duration::from_secs(5)).await;
    let gave_up = start.elapsed();
    eprintln!("restarted at {restarted:?}; campaign gave up at {gave_up:?} with: {result:?}");
    let Err(Error::Quarantined {
        left: Some(left), ..
    }) = result
    else {
        panic!("node 0 still answering, node 1 in quarantine, node 2 down: {result:?}");
    };
    // The quarantine ends one validity after the restart.
    let truly_left = (restarted + Duration::from_secs(60)).saturating_sub(gave_up);
    assert!(
        left <= truly_left + Duration::from_millis(50),
        "left {left:?} when it gave up, but only {truly_left:?} of the quarantine were left then"
    );
}
