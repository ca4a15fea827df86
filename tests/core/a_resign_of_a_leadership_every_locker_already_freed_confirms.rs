//! Reproduces a past break: a resign of a leadership that every locker had already freed (forced open, the loss declared as "not found") returned `ReleaseUnconfirmed` with no locker confirming, on every retry until the safety margin passed.
//!
//! docs/election.md: `leading.resign().await?` "gives up the lead; `Ok`
//! once a quorum freed it; retry on error". Three lockers; l leads; an
//! operator forces the election's lock open on every locker, so l's next
//! refresh finds it on none and declares the leadership lost. l's loop then
//! ends its work and resigns (as the example in docs/election.md does).
//! The lockers are reached over a link, as lock servers are (over
//! in-process lockers that answer at once, the resign's unlocks skip the
//! hold and it confirms). Every locker has freed the lock and answers, yet the release is held
//! for the lost lock's safety margin (`Acquisition::held_off`): each
//! unlock is queued, none is sent, and `resign()` reports
//! `ReleaseUnconfirmed { confirmed: 0 }` on each retry.
#![cfg(feature = "testing")]

use std::sync::Arc;
use std::time::Duration;

use crate::common;
use quorum_lock::testing::{Relay, Route, TestCluster};
use quorum_lock::{Error, NetLocker};

const SEED: u64 = 36_342;

#[tokio::test(start_paused = true)]
async fn a_resign_of_a_leadership_every_locker_already_freed_confirms() {
    let cluster = TestCluster::new(3, SEED);
    // Lockers reached over a link (no answer at once), as lock servers are.
    let linked: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .map(|l| Arc::new(Relay::new(l, |_, _| Route::Forward)) as Arc<dyn NetLocker>)
        .collect();
    let l = common::seeded(linked, "l", SEED);
    let admin = common::seeded(cluster.net_lockers(), "admin", SEED + 1);
    let mut leading = tokio::time::timeout(
        Duration::from_secs(5),
        l.election("e").unwrap().campaign(b"l".to_vec()),
    )
    .await
    .expect("in time")
    .expect("l leads");
    let forced = tokio::time::timeout(Duration::from_secs(5), admin.force_unlock(["election/e"]))
        .await
        .expect("in time");
    eprintln!(
        "forced open: {forced:?}; entries left {}",
        cluster.total_entries()
    );
    assert_eq!(
        cluster.total_entries(),
        0,
        "no locker holds the election's lock"
    );
    // The next refresh (every 10 s) finds it on no locker.
    tokio::time::timeout(Duration::from_secs(30), leading.lost())
        .await
        .expect("the leadership is declared lost within a refresh");
    let mut results = Vec::new();
    for _ in 0..3 {
        let r = tokio::time::timeout(Duration::from_secs(5), leading.resign())
            .await
            .expect("in time");
        let done = r.is_ok();
        results.push(r);
        if done {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    eprintln!("resigns: {results:?}");
    assert!(
        !results
            .iter()
            .all(|r| matches!(r, Err(Error::ReleaseUnconfirmed { .. }))),
        "every locker answers and none holds the lock, yet each of {} resigns reported it \
         unconfirmed: {results:?}",
        results.len()
    );
}
