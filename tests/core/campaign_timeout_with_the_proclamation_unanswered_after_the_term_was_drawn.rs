//! What `Election::campaign_timeout` says when its lock was granted and
//! every locker answered the term's fencing draw, and then two of the three
//! lockers died while the first proclamation was on its way, so the
//! campaign's deadline came while the proclamation waited for a quorum.
//!
//! docs/guarantees.md ("Why a wait waits"): "`Error::QuorumUnavailable`,
//! naming each locker that did not answer and why, when too few lockers
//! answer"; and a lock granted with the calls after it unanswered is
//! `QuorumUnavailable`. An error that says too few answered must not count
//! a quorum of answers, and must name the lockers that left the
//! proclamation unanswered.
//!
//! Reproduces a past break: it counted the term's answers, 2 of 2 answered, and left node-1 out.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::a_campaign_with_a_deadline::{spawn_campaign, until_seen};
use crate::common;
use quorum_lock::testing::{CallKind, Latency, TestCluster};
use quorum_lock::Error;
use tokio::time::Instant;

const SEED: u64 = 5120;

#[tokio::test(start_paused = true)]
async fn campaign_timeout_with_the_proclamation_unanswered_names_the_silent_lockers() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let h = common::seeded(cluster.net_lockers(), "h", SEED);
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(100)), &[0, 1, 2])
        .unwrap();
    let campaign = spawn_campaign(&h, Duration::from_millis(900));
    // Wait until the proclamation reached the lockers (the term's draw was
    // answered by all three before it was sent), then kill nodes 1 and 2:
    // their proclamations, waiting in latency, are never answered.
    let proclaimed = until_seen(&cluster, CallKind::Proclaim, 3, 900, Instant::now()).await;
    assert!(proclaimed.is_some(), "the proclamation was never sent");
    assert!(
        cluster.stats(CallKind::Fence).seen >= 3,
        "the term was drawn from every locker first"
    );
    cluster.crash(&[1, 2]).unwrap();
    let result = campaign.await.unwrap();
    eprintln!("result: {result:?}");
    let Err(Error::QuorumUnavailable {
        answered,
        quorum,
        unreachable,
        ..
    }) = &result
    else {
        panic!("expected QuorumUnavailable, got {result:?}");
    };
    assert!(
        answered < quorum,
        "QuorumUnavailable says {answered} answered with {quorum} needed: {result:?}"
    );
    let named: Vec<&str> = unreachable.iter().map(|u| u.endpoint.as_str()).collect();
    for silent in ["node-1", "node-2"] {
        assert!(
            named.contains(&silent),
            "{silent} did not answer the proclamation, yet is not named: {result:?}"
        );
    }
}
