//! Reproduces a past break: dropping a leadership after a confirmed resign force-unlocked its uid on every locker again, though every one had confirmed the release.
//!
//! docs/election.md and `Leadership::resign`: "A confirmed resign makes
//! later calls return `Ok` at once", and the resign's own comment says
//! "dropping the guard sends nothing more". A fault-free run: three
//! lockers, l campaigns, leads, resigns (every locker confirms the
//! unlock), and drops the leadership. The resign marked the guard's loss
//! signal declared, so the guard's drop finds an empty release plan and a
//! declared loss and starts a lost lock's clean-up: one `force_unlock` per
//! locker for a uid none of them holds.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::{CallKind, TestCluster};

const SEED: u64 = 36_341;

#[tokio::test(start_paused = true)]
async fn a_confirmed_resign_sends_nothing_more_when_its_leadership_is_dropped() {
    let cluster = TestCluster::new(3, SEED);
    let l = common::seeded(cluster.net_lockers(), "l", SEED);
    let mut leading = tokio::time::timeout(
        Duration::from_secs(5),
        l.election("e").unwrap().campaign(b"l".to_vec()),
    )
    .await
    .expect("in time")
    .expect("l leads");
    let resigned = tokio::time::timeout(Duration::from_secs(5), leading.resign())
        .await
        .expect("in time");
    assert!(
        resigned.is_ok(),
        "a fault-free resign confirms: {resigned:?}"
    );
    assert_eq!(cluster.total_entries(), 0, "every locker freed it");
    let unlocks = cluster.stats(CallKind::Unlock).seen;
    let forced_before = cluster.stats(CallKind::ForceUnlock).seen;
    drop(leading);
    // Let any background task run.
    tokio::time::sleep(Duration::from_secs(120)).await;
    let _ = tokio::time::timeout(
        Duration::from_secs(5),
        l.finish_releases(Duration::from_secs(5)),
    )
    .await;
    let forced = cluster.stats(CallKind::ForceUnlock).seen - forced_before;
    let more_unlocks = cluster.stats(CallKind::Unlock).seen - unlocks;
    eprintln!("unlocks at resign {unlocks}; after the drop: {more_unlocks} unlocks, {forced} force_unlocks");
    assert_eq!(
        (forced, more_unlocks),
        (0, 0),
        "dropping a leadership whose resign every locker confirmed sent {forced} force_unlock \
         and {more_unlocks} unlock calls for a uid no locker holds"
    );
}
