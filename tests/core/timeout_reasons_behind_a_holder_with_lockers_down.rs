//! Why `Election::campaign_timeout` gives up behind a leader while some
//! lockers are down: `Timeout` when a quorum answered and the lock is held
//! elsewhere (docs/guarantees.md), `QuorumUnavailable` when too few
//! answered.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::TestCluster;
use quorum_lock::{Dsync, Error};

const SEED: u64 = 3721;

fn client(cluster: &TestCluster, owner: &str) -> Dsync {
    Dsync::builder(cluster.net_lockers())
        .owner(owner)
        .rng_seed(SEED)
        .build()
        .expect("valid settings")
}

/// Fails: with four lockers (a write quorum is 3), two down and the other
/// two holding o's lock, only 2 answer, not a quorum; `reason()` still
/// says `HeldElsewhere` (its rule: more holders than `lockers - quorum`),
/// and `lock_timeout` says `Error::Timeout`.
#[tokio::test(start_paused = true)]
async fn campaign_timeout_behind_a_leader_with_two_of_five_lockers_down_says_timeout() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(5, SEED);
    let (h, o) = (client(&cluster, "h"), client(&cluster, "o"));
    let leading = o
        .election("lead5")
        .unwrap()
        .campaign(b"o".to_vec())
        .await
        .unwrap();
    cluster.crash(&[3, 4]).unwrap();
    let result = h
        .election("lead5")
        .unwrap()
        .campaign_timeout(b"h".to_vec(), Duration::from_secs(3))
        .await;
    eprintln!("result: {result:?}");
    assert!(
        matches!(result, Err(Error::Timeout)),
        "another candidate leads and 3 of 5 lockers answer: {result:?}"
    );
    drop(leading);
}

/// Passes: behind a leader with three of five lockers down, only two
/// answer: the campaign says the lockers could not grant.
#[tokio::test(start_paused = true)]
async fn campaign_timeout_behind_a_leader_with_three_of_five_lockers_down_says_unavailable() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(5, SEED);
    let (h, o) = (client(&cluster, "h"), client(&cluster, "o"));
    let leading = o
        .election("lead5d")
        .unwrap()
        .campaign(b"o".to_vec())
        .await
        .unwrap();
    cluster.crash(&[2, 3, 4]).unwrap();
    let result = h
        .election("lead5d")
        .unwrap()
        .campaign_timeout(b"h".to_vec(), Duration::from_secs(3))
        .await;
    eprintln!("result: {result:?}");
    assert!(
        matches!(result, Err(Error::QuorumUnavailable { .. })),
        "only 2 of 5 lockers answer: {result:?}"
    );
    drop(leading);
}
