//! Reproduces a past break: a campaign granted its lock and gave up while its proclamation waited, with `Error::Quarantined` naming two lockers whose refusal's stated time had run out (their quarantine over), where a wait in the same state no longer counts them as in quarantine.
//!
//! docs/guarantees.md ("Why a wait waits"): a refusal for quarantine
//! "stands until the time it said was left has passed"; after a grant,
//! "when lockers that refused such a call for quarantine would make the
//! quorum with those that answered, the operation gives up with
//! `Quarantined`, as a wait does". A refusal whose time has passed does
//! not stand, so it is no reason to say `Quarantined`.
//!
//! Five lockers, quorum three, every answer 10 ms late, node 1's 150 ms.
//! Nodes 3 and 4 restart first, so their quarantine ends a moment after the
//! campaign proclaims. Nodes 0, 1 and 2 grant the lock and draw the term;
//! nodes 3 and 4 refuse the proclamation for quarantine (a few ms left),
//! node 2 dies with the proclamation on its way, node 1's is still coming.
//! The campaign gives up 120 ms after the proclamation was sent: node 2 is
//! silent past its patience (unreachable), node 1 within its own (still
//! answering), and nodes 3 and 4 are out of quarantine.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::a_campaign_with_a_deadline::{campaign_ended, spawn_campaign, until_seen};
use crate::common;
use quorum_lock::testing::{CallKind, Latency, TestCluster};
use quorum_lock::Error;
use tokio::time::{sleep, Instant};

const SEED: u64 = 17_001;

#[tokio::test(start_paused = true)]
async fn campaign_timeout_quarantined_after_the_refusals_time_ran_out() {
    eprintln!("seed {SEED}");
    let start = Instant::now();
    let cluster = TestCluster::new(5, SEED);
    let h = common::seeded(cluster.net_lockers(), "h", SEED);
    // Quarantine of the default 60 s: it ends at 60 s.
    cluster.restart(&[3, 4]).unwrap();
    sleep(Duration::from_millis(59_500)).await;
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(10)), &[0, 2, 3, 4])
        .unwrap();
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(150)), &[1])
        .unwrap();
    // Sent at 59.951 s (lock and two term rounds wait for node 1): the
    // deadline comes 129 ms later, at 60.080 s.
    let campaign = spawn_campaign(&h, Duration::from_millis(580));
    let proclaimed = until_seen(&cluster, CallKind::Proclaim, 5, 2_000, start).await;
    eprintln!("proclamation sent by {proclaimed:?}");
    assert!(proclaimed.is_some(), "the proclamation was never sent");
    assert!(
        cluster.stats(CallKind::Fence).seen >= 3,
        "the term was drawn first"
    );
    // Node 2 dies with the proclamation on its way: never answered.
    cluster.crash(&[2]).unwrap();
    let result = campaign_ended(campaign, Duration::from_secs(10)).await;
    let gave_up = start.elapsed();
    let quarantined: Vec<bool> = cluster
        .lockers()
        .iter()
        .map(|l| l.is_quarantined())
        .collect();
    eprintln!("gave up at {gave_up:?} with {result:?}; lockers in quarantine: {quarantined:?}");
    assert!(
        gave_up > Duration::from_secs(60) && quarantined.iter().all(|q| !q),
        "the state this test means: every quarantine over when the campaign gives up"
    );
    assert!(
        !matches!(&result, Err(Error::Quarantined { .. })),
        "nodes 3 and 4 refused the proclamation for quarantine with {} ms left, and that \
         time has passed ({gave_up:?}; their quarantine ended at 60 s): their refusal no \
         longer stands, yet the campaign says they are in quarantine: {result:?}",
        60_000 - 59_961
    );
}
