//! Reproduces a past break: a campaign that gave up while its proclamation waited said `Timeout` (held elsewhere) after two lockers refused the proclamation for quarantine, because another lock of the same client was released on those lockers meanwhile, though their quarantine still stood and the other two lockers were down.
//!
//! docs/guarantees.md ("Why a wait waits"): a refusal for quarantine
//! "stands until the time it said was left has passed, or until it answers
//! a call a locker in quarantine refuses"; a wait among such lockers says
//! `Quarantined` "also when its own release, or another lock's, reached
//! them first". After a grant, "when lockers that refused such a call for
//! quarantine would make the quorum with those that answered, the
//! operation gives up with `Quarantined`, as a wait does". `Error::Timeout`
//! is for a lock held elsewhere, or lockers enough for a quorum still
//! answering: neither holds here.
//!
//! Five lockers, quorum three, every answer 10 ms late. Nodes 3 and 4
//! restarted (in quarantine for 60 s). Nodes 0, 1 and 2 grant the
//! campaign's lock and draw its term; nodes 3 and 4 refuse the
//! proclamation for quarantine, node 0 stores it, nodes 1 and 2 crash with
//! it on its way. 50 ms later a `try_lock` on another name through the same
//! client is refused by nodes 3 and 4 for quarantine and released there
//! (they answer the unlock; the client's rounds give up on a silent locker
//! after 100 ms, so this ends well before the campaign's deadline). The campaign gives up 500 ms after it began:
//! nodes 1 and 2 silent for far more than their patience, nodes 3 and 4
//! still in quarantine for almost 60 s. Without the `try_lock`, the same
//! campaign gives up with `Quarantined`.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::a_campaign_with_a_deadline::{campaign_ended, spawn_campaign, until_seen};
use quorum_lock::testing::{CallKind, Latency, TestCluster};
use quorum_lock::{Dsync, Error, Timeouts};
use tokio::time::{sleep, Instant};

const SEED: u64 = 18_001;

async fn campaign_gives_up(release_another_lock: bool) -> Result<(), Error> {
    let start = Instant::now();
    let cluster = TestCluster::new(5, SEED);
    // A round gives up on a silent locker after 100 ms, so that the other
    // lock's round ends (and is released) well before the campaign does.
    let h = Dsync::builder(cluster.net_lockers())
        .owner("h")
        .rng_seed(SEED)
        .timeouts(Timeouts {
            acquire: Duration::from_millis(100),
            ..Timeouts::default()
        })
        .build()
        .unwrap();
    cluster.restart(&[3, 4]).unwrap();
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(10)), &[0, 1, 2, 3, 4])
        .unwrap();
    let campaign = spawn_campaign(&h, Duration::from_millis(500));
    let proclaimed = until_seen(&cluster, CallKind::Proclaim, 5, 2_000, start).await;
    eprintln!("proclamation sent by {proclaimed:?}");
    assert!(proclaimed.is_some(), "the proclamation was never sent");
    // Nodes 1 and 2 die with the proclamation on its way: never answered.
    cluster.crash(&[1, 2]).unwrap();
    sleep(Duration::from_millis(50)).await;
    if release_another_lock {
        let other = h.rw_mutex(["other"]).unwrap();
        let tried = tokio::time::timeout(Duration::from_secs(1), other.try_lock())
            .await
            .expect("one round")
            .map(|_guard| ());
        eprintln!("try_lock on another name: {tried:?}");
        assert!(
            tried.is_err(),
            "nodes 3 and 4 refuse it, nodes 1 and 2 are down"
        );
        // Let its release reach the lockers.
        sleep(Duration::from_millis(30)).await;
    }
    let tried_by = start.elapsed();
    let result = campaign_ended(campaign, Duration::from_secs(10)).await;
    let gave_up = start.elapsed();
    let quarantined: Vec<bool> = cluster
        .lockers()
        .iter()
        .map(|l| l.is_quarantined())
        .collect();
    eprintln!("other lock done by {tried_by:?}");
    assert!(
        tried_by < Duration::from_millis(480),
        "the other lock's round and release ended before the campaign gave up"
    );
    eprintln!("gave up at {gave_up:?} with {result:?}; lockers in quarantine: {quarantined:?}");
    assert_eq!(
        quarantined,
        [false, false, false, true, true],
        "the state this test means: nodes 3 and 4 still in quarantine"
    );
    result
}

#[tokio::test(start_paused = true)]
async fn campaign_timeout_quarantined_after_another_lock_was_released_there() {
    eprintln!("seed {SEED}");
    let alone = campaign_gives_up(false).await;
    assert!(
        matches!(&alone, Err(Error::Quarantined { .. })),
        "the state this test means: without the other lock, the campaign says Quarantined: \
         {alone:?}"
    );
    let released = campaign_gives_up(true).await;
    assert!(
        matches!(&released, Err(Error::Quarantined { .. })),
        "nodes 3 and 4 refused the proclamation for quarantine and are still in it (59 s \
         left), node 0 stored it, nodes 1 and 2 are down: an unlock of another lock that \
         nodes 3 and 4 answered ends no quarantine, yet the campaign says {released:?}"
    );
}
